//! A small YAML tree built from `saphyr-parser` events.
//!
//! Building the tree ourselves gives us what the reference validator (strictyaml) does and
//! generic YAML loaders do not: every scalar stays the string it was written as (`123`,
//! `true`, `null` and `~` are not converted), duplicate keys are reported, and anchors,
//! aliases, tags, flow collections and tabs outside quoted or block scalars and comments
//! are rejected, as the reference validator rejects them.

use std::collections::HashMap;

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, ScanError, Span};

use crate::document::YAML_FIRST_LINE;
use crate::finding::{Finding, FindingCode, quote};

/// Mappings deeper than this (the root is depth 0) keep no entries: the specification's
/// deepest structure is `metadata`'s string values at depth 1, so only the kind of anything
/// deeper matters. Not keeping it bounds memory and keeps drops shallow.
const MAX_RETAINED_DEPTH: usize = 1;

/// A YAML node and the file line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) value: Value,
    pub(crate) line: usize,
    /// A scalar written without quotes or a block indicator, which typed YAML loaders
    /// (goose's serde_yaml) may read as a number or null; false for collections.
    pub(crate) plain: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// Any scalar, as the string it denotes (quotes and escapes resolved, no type guessing).
    Scalar(String),
    /// A sequence; its items are never needed.
    Sequence,
    /// A mapping's entries with scalar keys, in document order, first occurrence of each key.
    Mapping(Vec<Entry>),
    /// A reference to an anchor.
    Alias,
}

impl Value {
    /// "a sequence", "a mapping", ... for messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::Scalar(_) => "a string",
            Value::Sequence => "a sequence",
            Value::Mapping(_) => "a mapping",
            Value::Alias => "an alias",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) key_line: usize,
    pub(crate) value: Node,
}

/// Parses `yaml` (the frontmatter, whose first line is file line 2) into its root node.
///
/// Returns `Ok(None)` for a stream without a document (empty or only comments). Restricted
/// features and duplicate keys are pushed to `findings`; a syntax error is returned alone,
/// because nothing after it can be trusted.
pub(crate) fn parse(yaml: &str, findings: &mut Vec<Finding>) -> Result<Option<Node>, Finding> {
    let mut builder = Builder {
        cursor: CharCursor::new(yaml),
        stack: Vec::new(),
        root: None,
        documents: 0,
        explicit_document_ends: 0,
        findings: Vec::new(),
        tab_safe: Vec::new(),
    };
    let mut parser = Parser::new_from_str(yaml);
    while let Some(event) = parser.next_event() {
        let (event, span) = event.map_err(|e| syntax_error(&e))?;
        if !builder.event(event, span)? {
            break;
        }
    }
    check_document_end_markers(yaml, builder.explicit_document_ends)?;
    check_tabs(yaml, &builder.tab_safe, &mut builder.findings);
    findings.append(&mut builder.findings);
    Ok(builder.root)
}

/// A `...` line must end the document. YAML also lets one stand before a document or
/// repeat, but strictyaml (so skills-ref) rejects both, and saphyr emits no event for them,
/// so they are found by counting marker lines against the document ends saphyr reported.
fn check_document_end_markers(yaml: &str, explicit_ends: usize) -> Result<(), Finding> {
    let is_marker = |line: &str| {
        line.strip_prefix("...")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
    };
    let mut markers = yaml
        .lines()
        .enumerate()
        .filter(|(_, line)| is_marker(line))
        .map(|(i, _)| i + YAML_FIRST_LINE);
    match markers.nth(explicit_ends) {
        Some(line) => Err(Finding::new(
            FindingCode::YamlInvalid,
            format!("the '...' at line {line} does not end the frontmatter's YAML document"),
        )),
        None => Ok(()),
    }
}

/// Reports, once per line, a tab that is not inside a quoted or block scalar (`tab_safe`,
/// character ranges in document order) or a comment. YAML allows tabs as separators and in
/// plain scalars, but strictyaml's scanner (from PyYAML) stops at them, so skills-ref rejects
/// such a file; matching that keeps our verdict from being more lenient than the reference.
fn check_tabs(yaml: &str, tab_safe: &[std::ops::Range<usize>], findings: &mut Vec<Finding>) {
    let mut safe = tab_safe.iter().peekable();
    let mut line = YAML_FIRST_LINE;
    let mut column = 0;
    let mut in_comment = false;
    let mut previous = '\n';
    let mut reported_line = 0;
    for (index, c) in yaml.chars().enumerate() {
        while safe.next_if(|range| range.end <= index).is_some() {}
        let in_scalar = safe.peek().is_some_and(|range| range.contains(&index));
        column += 1;
        match c {
            '\n' => {
                line += 1;
                column = 0;
                in_comment = false;
            }
            '#' if !in_scalar && matches!(previous, ' ' | '\t' | '\n') => in_comment = true,
            '\t' if !in_scalar && !in_comment && reported_line != line => {
                reported_line = line;
                findings.push(Finding::new(
                    FindingCode::TabNotAllowed,
                    format!(
                        "tab at line {line}, column {column}; outside quoted or block scalars \
                         and comments, indent and separate with spaces"
                    ),
                ));
            }
            _ => {}
        }
        previous = c;
    }
}

fn syntax_error(error: &ScanError) -> Finding {
    let mark = error.marker();
    Finding::new(
        FindingCode::YamlInvalid,
        format!(
            "the frontmatter is not valid YAML: {} at line {}, column {}",
            error.info(),
            file_line(mark),
            mark.col() + 1
        ),
    )
}

fn file_line(mark: &Marker) -> usize {
    mark.line() + YAML_FIRST_LINE - 1
}

/// Finds characters by the character index saphyr reports. Events arrive in document order,
/// so the cursor only moves forward and a whole parse walks the text once.
struct CharCursor<'a> {
    text: &'a str,
    char_index: usize,
    byte_offset: usize,
}

impl<'a> CharCursor<'a> {
    fn new(text: &'a str) -> Self {
        CharCursor {
            text,
            char_index: 0,
            byte_offset: 0,
        }
    }

    fn char_at(&mut self, index: usize) -> Option<char> {
        self.rest_at(index)?.chars().next()
    }

    /// The text from character `index` on.
    fn rest_at(&mut self, index: usize) -> Option<&'a str> {
        if index < self.char_index {
            self.char_index = 0;
            self.byte_offset = 0;
        }
        let text = self.text;
        for c in text.get(self.byte_offset..)?.chars() {
            if self.char_index == index {
                break;
            }
            self.char_index += 1;
            self.byte_offset += c.len_utf8();
        }
        (self.char_index == index).then(|| &text[self.byte_offset..])
    }

    /// Where the content of the block scalar whose span starts at `start` begins: there,
    /// when only indentation precedes it on its line, or else (the span starts at the
    /// `|`/`>` header) on the next line; `None` when no line follows.
    fn block_content_start(&mut self, start: usize) -> Option<usize> {
        let rest = self.rest_at(start)?;
        let before = &self.text[..self.byte_offset];
        let line_prefix = before.rsplit('\n').next().unwrap_or(before);
        if line_prefix.chars().all(|c| c == ' ') {
            return Some(start);
        }
        let header_len = rest.find('\n')?;
        Some(start + rest[..header_len].chars().count() + 1)
    }

    /// The character index just past the closing quote of the quoted scalar starting at
    /// `start`; `None` when no quote starts there (an anchor or tag comes first).
    fn quoted_end(&mut self, start: usize) -> Option<usize> {
        let mut chars = self.rest_at(start)?.chars();
        let quote = chars.next().filter(|&c| c == '\'' || c == '"')?;
        let mut end = start + 1;
        while let Some(c) = chars.next() {
            end += 1;
            match c {
                // '' is an escaped quote inside a single-quoted scalar.
                '\'' if quote == '\'' => {
                    if chars.as_str().starts_with('\'') {
                        chars.next();
                        end += 1;
                    } else {
                        return Some(end);
                    }
                }
                '"' if quote == '"' => return Some(end),
                '\\' if quote == '"' => {
                    chars.next();
                    end += 1;
                }
                _ => {}
            }
        }
        None
    }
}

enum Frame {
    Sequence {
        line: usize,
    },
    Mapping {
        line: usize,
        retain: bool,
        entries: Vec<Entry>,
        /// Each key seen so far and the line it first appeared on.
        seen: HashMap<String, usize>,
        state: MappingState,
    },
}

enum MappingState {
    ExpectKey,
    /// The next node is the value of this key (and the key's line); `None` when the value is
    /// dropped because its key was a duplicate or not a scalar, both already reported.
    ExpectValue(Option<(String, usize)>),
}

struct Builder<'a> {
    cursor: CharCursor<'a>,
    stack: Vec<Frame>,
    root: Option<Node>,
    documents: usize,
    /// How many documents were ended by an explicit `...`.
    explicit_document_ends: usize,
    findings: Vec<Finding>,
    /// Character ranges of quoted and block scalars, where tabs are content.
    tab_safe: Vec<std::ops::Range<usize>>,
}

impl Builder<'_> {
    /// Handles one event; returns false at the end of the stream.
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<bool, Finding> {
        let line = file_line(&span.start);
        match event {
            Event::StreamEnd => return Ok(false),
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(Finding::new(
                        FindingCode::YamlInvalid,
                        format!(
                            "the frontmatter holds a second YAML document starting at line {line}; \
                             only one is allowed"
                        ),
                    ));
                }
            }
            Event::Scalar(value, style, anchor, tag) => {
                self.check_properties(anchor, tag.is_some(), line);
                // saphyr's scalar spans are not exact: a quoted scalar's runs on over trailing
                // blanks and comments, and a block scalar's may start at its header.
                let content = match style {
                    ScalarStyle::Plain => None,
                    ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => self
                        .cursor
                        .quoted_end(span.start.index())
                        .map(|end| span.start.index()..end),
                    ScalarStyle::Literal | ScalarStyle::Folded => self
                        .cursor
                        .block_content_start(span.start.index())
                        .map(|start| start..span.end.index()),
                };
                self.tab_safe.extend(content);
                self.attach(Node {
                    value: Value::Scalar(value.into_owned()),
                    line,
                    plain: style == ScalarStyle::Plain,
                });
            }
            Event::Alias(_) => {
                self.findings.push(Finding::new(
                    FindingCode::AliasNotAllowed,
                    format!(
                        "YAML aliases (*name) are not allowed in the frontmatter (line {line})"
                    ),
                ));
                self.attach(Node {
                    value: Value::Alias,
                    line,
                    plain: false,
                });
            }
            Event::SequenceStart(anchor, tag) => {
                self.check_properties(anchor, tag.is_some(), line);
                self.check_block_style(&span.start, line);
                self.stack.push(Frame::Sequence { line });
            }
            Event::MappingStart(anchor, tag) => {
                self.check_properties(anchor, tag.is_some(), line);
                self.check_block_style(&span.start, line);
                self.stack.push(Frame::Mapping {
                    line,
                    retain: self.stack.len() <= MAX_RETAINED_DEPTH,
                    entries: Vec::new(),
                    seen: HashMap::new(),
                    state: MappingState::ExpectKey,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match self.stack.pop() {
                    Some(Frame::Sequence { line }) => Node {
                        value: Value::Sequence,
                        line,
                        plain: false,
                    },
                    Some(Frame::Mapping { line, entries, .. }) => Node {
                        value: Value::Mapping(entries),
                        line,
                        plain: false,
                    },
                    // The parser balances start and end events; an unbalanced end has nothing to close.
                    None => return Ok(true),
                };
                self.attach(node);
            }
            // An implicit end has an empty span; an explicit `...` has its own.
            Event::DocumentEnd => {
                if span.end.index() > span.start.index() {
                    self.explicit_document_ends += 1;
                }
            }
            Event::StreamStart | Event::Nothing => {}
        }
        Ok(true)
    }

    fn check_properties(&mut self, anchor: usize, tagged: bool, line: usize) {
        // saphyr numbers anchors from 1; 0 means the node has none.
        if anchor != 0 {
            self.findings.push(Finding::new(
                FindingCode::AnchorNotAllowed,
                format!("YAML anchors (&name) are not allowed in the frontmatter (line {line})"),
            ));
        }
        if tagged {
            self.findings.push(Finding::new(
                FindingCode::TagNotAllowed,
                format!(
                    "YAML tags (such as !!str) are not allowed in the frontmatter (line {line})"
                ),
            ));
        }
    }

    /// A collection starting with `[` or `{` is in flow style. (With an anchor or a tag the
    /// span starts at that property instead, which is reported on its own.)
    fn check_block_style(&mut self, start: &Marker, line: usize) {
        if matches!(self.cursor.char_at(start.index()), Some('[' | '{')) {
            self.findings.push(Finding::new(
                FindingCode::FlowStyleNotAllowed,
                format!(
                    "flow-style collections ([a, b] or {{a: b}}) are not allowed in the frontmatter \
                     (line {line}); use block style, or quote the value if it is text"
                ),
            ));
        }
    }

    /// Adds a finished node to the collection being built, or makes it the root.
    fn attach(&mut self, node: Node) {
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(node);
            return;
        };
        let Frame::Mapping {
            line: mapping_line,
            retain,
            entries,
            seen,
            state,
        } = frame
        else {
            return;
        };
        *state = match std::mem::replace(state, MappingState::ExpectKey) {
            MappingState::ExpectKey => match node.value {
                Value::Scalar(key) => match seen.get(&key) {
                    Some(first) => {
                        self.findings.push(Finding::new(
                            FindingCode::DuplicateKey,
                            format!(
                                "duplicate key {} at line {} (first at line {first})",
                                quote(&key),
                                node.line
                            ),
                        ));
                        MappingState::ExpectValue(None)
                    }
                    None => {
                        seen.insert(key.clone(), node.line);
                        MappingState::ExpectValue(Some((key, node.line)))
                    }
                },
                other => {
                    self.findings.push(Finding::new(
                        FindingCode::NonScalarKey,
                        format!(
                            "the mapping at line {mapping_line} has {} as a key at line {}; keys must be strings",
                            other.kind(),
                            node.line
                        ),
                    ));
                    MappingState::ExpectValue(None)
                }
            },
            MappingState::ExpectValue(key) => {
                if let (Some((key, key_line)), true) = (key, *retain) {
                    entries.push(Entry {
                        key,
                        key_line,
                        value: node,
                    });
                }
                MappingState::ExpectKey
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(yaml: &str) -> (Option<Node>, Vec<FindingCode>) {
        let mut findings = Vec::new();
        let root = parse(yaml, &mut findings).expect("valid YAML");
        (root, findings.into_iter().map(|f| f.code).collect())
    }

    fn entries(node: Option<Node>) -> Vec<(String, Value)> {
        match node.map(|n| n.value) {
            Some(Value::Mapping(entries)) => entries
                .into_iter()
                .map(|e| (e.key, e.value.value))
                .collect(),
            other => panic!("expected a mapping, got {other:?}"),
        }
    }

    fn scalar(s: &str) -> Value {
        Value::Scalar(s.to_owned())
    }

    #[test]
    fn scalars_stay_strings() {
        let (root, findings) = parse_ok(
            "a: 123\nb: true\nc: null\nd: ~\ne: 1.50\nf:\ng: ''\nh: 0x1F\ni: 2024-01-01\nj: .inf\n",
        );
        assert!(findings.is_empty());
        assert_eq!(
            entries(root),
            vec![
                ("a".into(), scalar("123")),
                ("b".into(), scalar("true")),
                ("c".into(), scalar("null")),
                ("d".into(), scalar("~")),
                ("e".into(), scalar("1.50")),
                ("f".into(), scalar("")),
                ("g".into(), scalar("")),
                ("h".into(), scalar("0x1F")),
                ("i".into(), scalar("2024-01-01")),
                ("j".into(), scalar(".inf")),
            ]
        );
    }

    #[test]
    fn keys_are_strings_too() {
        let (root, _) = parse_ok("1: a\ntrue: b\n'name': c\n");
        let keys: Vec<_> = entries(root).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["1", "true", "name"]);
    }

    #[test]
    fn quoted_and_block_scalars_resolve() {
        let (root, _) = parse_ok(
            "a: \"x\\ty\"\nb: 'it''s'\nc: |\n  line 1\n  line 2\nd: >-\n  folded\n  text\ne: plain\n  continued\n",
        );
        assert_eq!(
            entries(root),
            vec![
                ("a".into(), scalar("x\ty")),
                ("b".into(), scalar("it's")),
                ("c".into(), scalar("line 1\nline 2\n")),
                ("d".into(), scalar("folded text")),
                ("e".into(), scalar("plain continued")),
            ]
        );
    }

    #[test]
    fn nested_collections_keep_their_kind() {
        let (root, findings) = parse_ok("m:\n  a: b\n  c:\n    d: e\n  f:\n    - g\ns:\n  - x\n");
        assert!(findings.is_empty());
        let top = entries(root);
        let Value::Mapping(m) = &top[0].1 else {
            panic!("m is not a mapping")
        };
        assert_eq!(m[0].value.value, scalar("b"));
        assert_eq!(m[1].value.value, Value::Mapping(Vec::new()));
        assert_eq!(m[2].value.value, Value::Sequence);
        assert_eq!(top[1].1, Value::Sequence);
    }

    #[test]
    fn lines_are_file_lines() {
        let (root, _) = parse_ok("a: b\n\nc: d\n");
        let root = root.unwrap();
        assert_eq!(root.line, 2);
        let Value::Mapping(entries) = root.value else {
            panic!()
        };
        assert_eq!(entries[1].value.line, 4);
    }

    #[test]
    fn empty_stream_has_no_root() {
        assert_eq!(parse_ok(""), (None, vec![]));
        assert_eq!(parse_ok("# only a comment\n"), (None, vec![]));
    }

    #[test]
    fn root_may_be_a_scalar_or_sequence() {
        assert_eq!(parse_ok("hello\n").0.unwrap().value, scalar("hello"));
        assert_eq!(parse_ok("- a\n").0.unwrap().value, Value::Sequence);
    }

    #[test]
    fn duplicate_keys_are_reported_at_any_depth_and_first_wins() {
        let (root, findings) = parse_ok("a: 1\na: 2\nm:\n  x: 1\n  x: 2\n");
        assert_eq!(
            findings,
            [FindingCode::DuplicateKey, FindingCode::DuplicateKey]
        );
        assert_eq!(entries(root)[0], ("a".into(), scalar("1")));

        let mut findings = Vec::new();
        parse("a: 1\nb: 2\na: 3\n", &mut findings).unwrap();
        assert_eq!(
            findings[0].message,
            "duplicate key 'a' at line 4 (first at line 2)"
        );
    }

    #[test]
    fn non_scalar_keys_are_reported() {
        let (root, findings) = parse_ok("? - a\n: b\nc: d\n");
        assert_eq!(findings, [FindingCode::NonScalarKey]);
        assert_eq!(entries(root), vec![("c".into(), scalar("d"))]);
    }

    #[test]
    fn flow_collections_are_rejected() {
        for yaml in [
            "a: [b]\n",
            "a: {b: c}\n",
            "a: []\n",
            "[a]\n",
            "{a: b}\n",
            "a:\n  - [b]\n",
        ] {
            let (_, findings) = parse_ok(yaml);
            assert!(
                findings.contains(&FindingCode::FlowStyleNotAllowed),
                "{yaml:?}: {findings:?}"
            );
        }
    }

    #[test]
    fn brackets_inside_text_are_not_flow_style() {
        let (_, findings) =
            parse_ok("a: see [docs]\nb: '[x]'\n\"{k}\": v\nc: |\n  [x]\nd:\n  - x [y]\n");
        assert!(findings.is_empty(), "{findings:?}");
    }

    #[test]
    fn anchors_aliases_and_tags_are_rejected() {
        assert_eq!(
            parse_ok("a: &x b\nc: *x\n").1,
            [FindingCode::AnchorNotAllowed, FindingCode::AliasNotAllowed]
        );
        assert_eq!(parse_ok("a: !!str b\n").1, [FindingCode::TagNotAllowed]);
        assert_eq!(
            parse_ok("a: !custom\n  b: c\n").1,
            [FindingCode::TagNotAllowed]
        );
        assert_eq!(
            parse_ok("a: &x\n  - b\n").1,
            [FindingCode::AnchorNotAllowed]
        );
    }

    #[test]
    fn tabs_are_allowed_only_in_quoted_and_block_scalars_and_comments() {
        for yaml in [
            "d: 'a\tb'\n",
            "d: \"a\tb\"\n",
            "d: 'a\n \tb'\n",
            "d: |\n  a\tb\n",
            "d: >\n  a\n\n  \tb\n",
            "d: |\n \ta\n",
            "d: a #\tc\n",
            "#\tc\nd: a\n",
            "d: |  # c\t\n  a\n",
            "d: 'a' # x\t\n",
            "\"k\tk\": v\n",
            "d: |\n  |a\tb\n",
            "d: |\n\n  a\tb\n",
            "d: |\n  \n  a\tb\n",
            "d: 'it''s\ta'\n",
            "d: \"q\\\"\tq\"\n",
        ] {
            assert_eq!(parse_ok(yaml).1, [], "{yaml:?}");
        }
        for yaml in [
            "d: a\tb\n",
            "d: a\t\n",
            "d: a\t# c\n",
            "d: a\n\t\n",
            "d: a\n  b\tc\n",
            "m:\n  k: a\tb\n",
            "d: 'a'\t\n",
            "d:\n  - a\t\n",
            "d: |\n  a\n\t# x\n",
            "d: a#\tb\n",
            "d: |\t\n",
            "d: |\t\n\nb: c\n",
            "d: >+\t\n\n",
            "d: |\t\n  a\n",
            "d: |  \t\n  a\n",
            "d: 'a''b'\t\n",
            "d: \"a\\\"b\"\t\n",
            "\"k\": \tv\n",
        ] {
            let mut findings = Vec::new();
            let codes = match parse(yaml, &mut findings) {
                Ok(_) => findings.iter().map(|f| f.code).collect(),
                Err(e) => vec![e.code],
            };
            assert!(
                codes == [FindingCode::TabNotAllowed] || codes == [FindingCode::YamlInvalid],
                "{yaml:?}: {codes:?}"
            );
        }
    }

    #[test]
    fn a_tab_is_reported_once_per_line_with_its_position() {
        let mut findings = Vec::new();
        parse("a: x\t\t\nb: y\t\n", &mut findings).unwrap();
        let messages: Vec<_> = findings.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(
            messages[0].starts_with("tab at line 2, column 5;"),
            "{}",
            messages[0]
        );
        assert!(
            messages[1].starts_with("tab at line 3, column 5;"),
            "{}",
            messages[1]
        );
    }

    #[test]
    fn syntax_errors_name_the_file_line() {
        let err = parse("a: b\nc: d: e\n", &mut Vec::new()).unwrap_err();
        assert_eq!(err.code, FindingCode::YamlInvalid);
        assert!(err.message.contains("line 3"), "{}", err.message);
    }

    #[test]
    fn undefined_alias_is_a_syntax_error() {
        let err = parse("a: *nowhere\n", &mut Vec::new()).unwrap_err();
        assert_eq!(err.code, FindingCode::YamlInvalid);
    }

    #[test]
    fn a_second_document_is_rejected() {
        let err = parse("a: b\n...\nc: d\n", &mut Vec::new()).unwrap_err();
        assert_eq!(err.code, FindingCode::YamlInvalid);
        assert!(
            err.message.contains("second YAML document"),
            "{}",
            err.message
        );
        // An end marker after the document is fine, with a comment too.
        assert!(parse_ok("a: b\n...\n").0.is_some());
        assert!(parse_ok("a: b\n... # end\n# more\n").0.is_some());
    }

    #[test]
    fn end_markers_that_end_no_document_are_rejected() {
        for yaml in [
            "...\na: b\n",
            "# c\n...\na: b\n",
            "a: b\n...\n...\n",
            "...\n",
        ] {
            let err = parse(yaml, &mut Vec::new()).unwrap_err();
            assert_eq!(err.code, FindingCode::YamlInvalid, "{yaml:?}");
            assert!(
                err.message.contains("does not end"),
                "{yaml:?}: {}",
                err.message
            );
        }
    }

    #[test]
    fn tabs_cannot_indent() {
        let err = parse("a:\n\tb: c\n", &mut Vec::new()).unwrap_err();
        assert_eq!(err.code, FindingCode::YamlInvalid);
    }

    #[test]
    fn deep_nesting_does_not_exhaust_the_stack() {
        // Either parsed or rejected, but never a crash.
        for yaml in [
            format!("{}a\n", "- ".repeat(20_000)),
            format!("a: {}\n", "[".repeat(20_000)),
            format!("a: {}{}\n", "[".repeat(20_000), "]".repeat(20_000)),
        ] {
            let _ = parse(&yaml, &mut Vec::new());
        }
    }
}
