//! `$(agent.<name>)` and `$(workflow.<name>)` in a prompt or a run's instructions.
//!
//! A reference is `$(`, a scope (`agent` or `workflow`), `.`, a param name (a letter or `_`,
//! then letters, digits and `_`) and `)`. Each is replaced by the param's value as text.
//! `$$(` is written as `$(` and starts no reference, so `$$(agent.x)` gives the text
//! `$(agent.x)`. Every other `$`, and every `$(...)` that is not a reference (`$(date)`,
//! `$(agent.)`), is kept as it is.

use std::collections::BTreeMap;

/// The scope of the Agent's params.
pub const AGENT_SCOPE: &str = "agent";
/// The scope of a workflow's params (`spec.workflowParams`).
pub const WORKFLOW_SCOPE: &str = "workflow";

/// The values references may take, as text, by scope and name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scopes {
    /// `$(agent.<name>)`.
    pub agent: BTreeMap<String, String>,
    /// `$(workflow.<name>)`.
    pub workflow: BTreeMap<String, String>,
}

impl Scopes {
    fn get(&self, scope: &str, name: &str) -> Option<&str> {
        let values = match scope {
            AGENT_SCOPE => &self.agent,
            _ => &self.workflow,
        };
        values.get(name).map(String::as_str)
    }
}

/// `text` with every reference replaced, or every reference without a value, in the order
/// they appear, each once, as written.
pub fn substitute(text: &str, scopes: &Scopes) -> Result<String, Vec<String>> {
    let mut out = String::with_capacity(text.len());
    let mut unresolved: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$$(") {
            out.push_str("$(");
            rest = after;
        } else if let Some((scope, name, len)) = reference(tail) {
            match scopes.get(scope, name) {
                Some(value) => out.push_str(value),
                None => {
                    let written = &tail[..len];
                    if !unresolved.iter().any(|r| r == written) {
                        unresolved.push(written.to_string());
                    }
                }
            }
            rest = &tail[len..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    if unresolved.is_empty() {
        Ok(out)
    } else {
        Err(unresolved)
    }
}

/// The scope, name and length of the reference `text` starts with.
fn reference(text: &str) -> Option<(&str, &str, usize)> {
    let body = text.strip_prefix("$(")?;
    let (scope, name_and_rest) = body.split_once('.')?;
    if scope != AGENT_SCOPE && scope != WORKFLOW_SCOPE {
        return None;
    }
    let (name, _) = name_and_rest.split_once(')')?;
    if !is_param_name(name) {
        return None;
    }
    Some((scope, name, "$(".len() + scope.len() + 1 + name.len() + 1))
}

fn is_param_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scopes() -> Scopes {
        Scopes {
            agent: BTreeMap::from([
                ("target".into(), "quarkus".into()),
                ("depth".into(), "3".into()),
                ("empty".into(), String::new()),
            ]),
            workflow: BTreeMap::from([("ticket".into(), "MIG-7".into())]),
        }
    }

    #[test]
    fn references_are_replaced_by_their_values() {
        assert_eq!(
            substitute(
                "Move to $(agent.target) in $(agent.depth) steps for $(workflow.ticket).$(agent.empty)",
                &scopes()
            ),
            Ok("Move to quarkus in 3 steps for MIG-7.".into())
        );
        // Adjacent, repeated, and a value that looks like a reference is not read again.
        let looping = Scopes {
            agent: BTreeMap::from([("a".into(), "$(agent.a)".into())]),
            ..Scopes::default()
        };
        assert_eq!(
            substitute("$(agent.a)$(agent.a)", &looping),
            Ok("$(agent.a)$(agent.a)".into())
        );
    }

    #[test]
    fn text_that_is_not_a_reference_is_kept() {
        for text in [
            "",
            "no references",
            "costs $5, $ alone, trailing $",
            "$(date) and $(HOME)",
            "$(agent.) $(agent.1x) $(agent.a-b) $(agent.target",
            "$(other.target) $(Agent.target)",
            "$agent.target",
        ] {
            assert_eq!(substitute(text, &scopes()), Ok(text.to_string()), "{text}");
        }
    }

    #[test]
    fn double_dollar_escapes_a_reference() {
        assert_eq!(
            substitute("$$(agent.target) is $(agent.target); $$(date)", &scopes()),
            Ok("$(agent.target) is quarkus; $(date)".into())
        );
        assert_eq!(substitute("$$ and $$x", &scopes()), Ok("$$ and $$x".into()));
        assert_eq!(
            substitute("$$$(agent.target)", &scopes()),
            Ok("$$(agent.target)".into()),
            "the first $ is kept, then $$( is the escape"
        );
    }

    #[test]
    fn every_unresolved_reference_is_named_once_in_order() {
        assert_eq!(
            substitute(
                "$(agent.missing) $(workflow.target) $(agent.missing) $(agent.target) $(workflow.other)",
                &scopes()
            ),
            Err(vec![
                "$(agent.missing)".to_string(),
                "$(workflow.target)".to_string(),
                "$(workflow.other)".to_string(),
            ])
        );
    }

    #[test]
    fn multibyte_text_around_references_survives() {
        assert_eq!(
            substitute("ünï $(agent.target) — €$(agent.depth)$", &scopes()),
            Ok("ünï quarkus — €3$".into())
        );
    }
}
