//! A small YAML emitter for JSON values, so generated manifests read like hand-written ones
//! without pulling in a YAML serializer. Output is YAML 1.2: strings that could be read as
//! anything but a plain string are written double-quoted with JSON escapes, which YAML accepts.

use serde_json::Value;

pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => write_seq(&mut out, items, 0),
        scalar => {
            out.push_str(&scalar_text(scalar));
            out.push('\n');
        }
    }
    out
}

fn write_map(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize) {
    for (key, value) in map {
        out.push_str(&" ".repeat(indent));
        out.push_str(&string_text(key));
        out.push(':');
        write_nested(out, value, indent + 2);
    }
}

fn write_seq(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push('-');
        match item {
            // A mapping inside a sequence starts on the dash's line.
            Value::Object(map) if !map.is_empty() => {
                let mut nested = String::new();
                write_map(&mut nested, map, indent + 2);
                out.push(' ');
                out.push_str(nested.trim_start());
            }
            other => write_nested(out, other, indent + 2),
        }
    }
}

fn write_nested(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_map(out, map, indent);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_seq(out, items, indent);
        }
        scalar => {
            out.push(' ');
            out.push_str(&scalar_text(scalar));
            out.push('\n');
        }
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => string_text(s),
        Value::Object(_) => "{}".to_string(),
        Value::Array(_) => "[]".to_string(),
        other => other.to_string(),
    }
}

fn string_text(s: &str) -> String {
    if is_plain_safe(s) {
        s.to_string()
    } else {
        Value::String(s.to_string()).to_string()
    }
}

/// A string may be written plain only when no YAML reader could take it for another type
/// or for syntax.
fn is_plain_safe(s: &str) -> bool {
    const RESERVED: &[&str] = &[
        "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~",
    ];
    let Some(first) = s.chars().next() else {
        return false;
    };
    if RESERVED.contains(&s.to_ascii_lowercase().as_str()) {
        return false;
    }
    if first.is_ascii_digit() || first == '-' || first == '.' || first == '+' {
        return false;
    }
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '$'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quotes_what_would_change_type_or_syntax() {
        let doc = json!({
            "plain": "konveyor.io",
            "bool": "true",
            "num": "123",
            "colon": "a: b",
            "multi": "line one\nline two",
            "empty": "",
            "list": ["x", {"k": 1, "j": false}],
            "nothing": {},
        });
        let text = to_yaml(&doc);
        assert!(text.contains("plain: konveyor.io\n"), "{text}");
        assert!(text.contains("bool: \"true\"\n"), "{text}");
        assert!(text.contains("num: \"123\"\n"), "{text}");
        assert!(text.contains("colon: \"a: b\"\n"), "{text}");
        assert!(text.contains("multi: \"line one\\nline two\"\n"), "{text}");
        assert!(text.contains("empty: \"\"\n"), "{text}");
        assert!(
            text.contains("list:\n  - x\n  - j: false\n    k: 1\n"),
            "{text}"
        );
        assert!(text.contains("nothing: {}\n"), "{text}");
    }
}
