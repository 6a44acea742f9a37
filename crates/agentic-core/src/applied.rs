//! What a server-side apply would change: nothing, when the object as stored already holds
//! every field the desired one sets.

use serde_json::Value;

/// Whether `existing` already holds every field `desired` sets, as set: what an apply of
/// `desired` would change nothing of. Fields others set (more labels, fields the API server
/// defaults) do not count; a list counts whole.
pub fn holds(existing: &Value, desired: &Value) -> bool {
    match (existing, desired) {
        (Value::Object(existing), Value::Object(desired)) => desired
            .iter()
            .all(|(key, value)| existing.get(key).is_some_and(|e| holds(e, value))),
        (existing, desired) => existing == desired,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::holds;

    #[test]
    fn fields_others_add_do_not_count_and_a_list_counts_whole() {
        let stored = json!({"spec": {"image": "a", "type": "skill"}, "labels": ["x", "y"]});
        assert!(holds(&stored, &json!({"spec": {"image": "a"}})));
        assert!(!holds(&stored, &json!({"spec": {"image": "b"}})));
        assert!(!holds(&stored, &json!({"spec": {"subPath": "p"}})));
        assert!(!holds(&stored, &json!({"labels": ["x"]})));
        assert!(holds(&stored, &json!({"labels": ["x", "y"]})));
    }
}
