//! Names and label values of the objects the operator creates, derived deterministically
//! from the names of the objects they serve.
//!
//! Kubernetes names come with different rules. AgentRun and SkillCard names are DNS-1123
//! subdomains (up to 253 characters, dots allowed, may start with a digit), while a sandbox
//! becomes a Pod *and* (with agent-sandbox) a Service of the same name, which must be a
//! DNS-1035 label: at most 63 characters of `a-z`, `0-9` and `-`, starting with a letter and
//! ending with a letter or digit. Label values allow at most 63 characters.
//!
//! A name that already fits is used as is, so names stay readable. Otherwise a readable,
//! sanitized prefix is kept and `-` plus 10 hex digits of the SHA-256 of the *original* name
//! are appended, so two different inputs that sanitize alike still get different results.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// The longest DNS-1035 / DNS-1123 label, and the longest label value.
pub const MAX_LABEL_LEN: usize = 63;
/// The longest DNS-1123 subdomain, the limit for ConfigMap and Secret names.
pub const MAX_SUBDOMAIN_LEN: usize = 253;
/// Hex digits of the hash appended to names that had to change.
const HASH_LEN: usize = 10;

/// Suffix of the per-run Secret holding the ACP key.
const ACP_SECRET_SUFFIX: &str = "-acp-key";
/// Suffix of the SkillCard-owned ConfigMap holding an inline SKILL.md.
const INLINE_SKILL_SUFFIX: &str = "-skill";

/// The name of a run's sandbox: its agent-sandbox `Sandbox`, the Pod, and the Service
/// agent-sandbox creates, all share it.
///
/// A run name that is already a DNS-1035 label is used as is. Any other name (dots, a leading
/// digit, more than 63 characters) is lower-cased, every character outside `a-z0-9` becomes
/// `-` (runs of them collapse), `run-` is prepended when it does not start with a letter, and
/// it is cut to leave room for `-<hash>`: for example `v1.2-upgrade` becomes
/// `v1-2-upgrade-<10 hex digits>` and `2024-fix` becomes `run-2024-fix-<10 hex digits>`.
pub fn sandbox_name(run_name: &str) -> String {
    if is_dns1035_label(run_name) {
        return run_name.to_string();
    }
    let body = dns1035_body(run_name, "run-");
    with_hash(&body, run_name, MAX_LABEL_LEN, &['-'])
}

/// `name` lower-cased, every character outside `a-z0-9` a `-` (runs of them collapsed), and
/// `prefix` prepended when it does not start with a letter: the start of a DNS-1035 label.
fn dns1035_body(name: &str, prefix: &str) -> String {
    let mut body = String::new();
    for c in name.chars().map(|c| c.to_ascii_lowercase()) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            body.push(c);
        } else if !body.is_empty() && !body.ends_with('-') {
            body.push('-');
        }
    }
    if !body.starts_with(|c: char| c.is_ascii_lowercase()) {
        body.insert_str(0, prefix);
    }
    body
}

/// The pod that prefetches an Agent's skill images onto one node: `<agent>-prefetch-<hash>`,
/// the hash over the Agent, the node and the digest set, so that each node and each set
/// gets its own pod and a changed set a new name. The Agent's name is cut (and sanitized,
/// as [`sandbox_name`] does) to keep the whole a DNS-1035 label.
pub fn prefetch_pod_name(agent: &str, node: &str, digest_set: &str) -> String {
    const SUFFIX: &str = "-prefetch-";
    let mut body = dns1035_body(agent, "agent-");
    body.truncate(MAX_LABEL_LEN - SUFFIX.len() - HASH_LEN);
    let body = body.trim_end_matches('-');
    let hash = short_hash(&format!("{agent}\n{node}\n{digest_set}"));
    format!("{body}{SUFFIX}{hash}")
}

/// The per-run Secret holding the ACP key: `<sandbox>-acp-key`.
pub fn acp_secret_name(sandbox_name: &str) -> String {
    format!("{sandbox_name}{ACP_SECRET_SUFFIX}")
}

/// The ConfigMap a SkillCard with `spec.inline` owns: `<skillcard>-skill`, shortened with a
/// hash when that would pass 253 characters.
pub fn inline_skill_config_map_name(skill_card: &str) -> String {
    let name = format!("{skill_card}{INLINE_SKILL_SUFFIX}");
    if name.len() <= MAX_SUBDOMAIN_LEN {
        return name;
    }
    let budget = MAX_SUBDOMAIN_LEN - INLINE_SKILL_SUFFIX.len();
    let prefix = with_hash(skill_card, skill_card, budget, &['-', '.']);
    format!("{prefix}{INLINE_SKILL_SUFFIX}")
}

/// The SkillCard a SkillCollection generates for one of its skills: `<collection>-<skill>`
/// when that is a DNS-1123 subdomain of at most 253 characters (every valid skill name in a
/// collection of a short enough name gives one). Otherwise it is lower-cased, every character
/// outside `a-z0-9.-` becomes `-` (runs of them collapse), and it is cut to leave room for
/// `-<hash>` of the unchanged name, so that two skills that sanitize alike still get two
/// names.
pub fn collection_skill_card_name(collection: &str, skill: &str) -> String {
    let name = format!("{collection}-{skill}");
    if is_dns_subdomain(&name) {
        return name;
    }
    let mut body = String::new();
    for c in name.chars().map(|c| c.to_ascii_lowercase()) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' {
            if c == '.' && (body.is_empty() || body.ends_with(['.', '-'])) {
                continue;
            }
            body.push(c);
        } else if !body.is_empty() && !body.ends_with(['-', '.']) {
            body.push('-');
        }
    }
    with_hash(&body, &name, MAX_SUBDOMAIN_LEN, &['-', '.'])
}

/// Whether `name` is a DNS-1123 subdomain as the API server checks object names:
/// dot-separated parts of `a-z0-9-`, each starting and ending with a letter or digit, at
/// most 253 characters in all.
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= MAX_SUBDOMAIN_LEN
        && name.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes[0].is_ascii_alphanumeric()
                && bytes[bytes.len() - 1].is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        })
}

/// A label value naming the object `name`: the name itself when it is a valid label value
/// (at most 63 characters; every run or SkillCard name of that length is), otherwise a
/// sanitized prefix and a hash.
pub fn label_value(name: &str) -> String {
    if is_label_value(name) {
        return name.to_string();
    }
    let body: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let body = body.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    with_hash(body, name, MAX_LABEL_LEN, &['-', '_', '.'])
}

/// Whether `name` is a DNS-1035 label.
pub fn is_dns1035_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_LABEL_LEN
        && bytes[0].is_ascii_lowercase()
        && bytes[bytes.len() - 1] != b'-'
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    if bytes.is_empty() {
        return true;
    }
    bytes.len() <= MAX_LABEL_LEN
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `<body cut to fit>-<hash of original>`, at most `max_len` bytes. Characters in `trim` are
/// removed from the cut end so the joint stays valid.
fn with_hash(body: &str, original: &str, max_len: usize, trim: &[char]) -> String {
    let mut keep = body.len().min(max_len - HASH_LEN - 1);
    while !body.is_char_boundary(keep) {
        keep -= 1;
    }
    let body = body[..keep].trim_end_matches(trim);
    let hash = short_hash(original);
    if body.is_empty() {
        hash
    } else {
        format!("{body}-{hash}")
    }
}

/// The first 10 hex digits of the SHA-256 of `text`: what tells apart names cut alike.
pub fn short_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(HASH_LEN);
    for byte in digest.iter().take(HASH_LEN / 2) {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_hashed(name: &str, expected_prefix: &str) {
        assert!(is_dns1035_label(name), "{name:?} is not a DNS-1035 label");
        let (prefix, hash) = name.rsplit_once('-').expect("has a hash");
        assert_eq!(prefix, expected_prefix);
        assert_eq!(hash.len(), HASH_LEN);
        assert!(
            hash.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }

    #[test]
    fn collection_card_names_are_kept_when_valid() {
        assert_eq!(
            collection_skill_card_name("java-bundle", "maven-migration"),
            "java-bundle-maven-migration"
        );
        assert_eq!(
            collection_skill_card_name("team.skills", "a"),
            "team.skills-a"
        );
    }

    #[test]
    fn collection_card_names_are_sanitized_bounded_and_distinct() {
        let odd = collection_skill_card_name("bundle", "My_Skill");
        let other = collection_skill_card_name("bundle", "my-skill");
        assert!(is_dns_subdomain(&odd), "{odd}");
        assert!(odd.starts_with("bundle-my-skill-"), "{odd}");
        assert_ne!(odd, other);
        let long = collection_skill_card_name(&"c".repeat(250), "skill");
        assert!(is_dns_subdomain(&long), "{long}");
        assert_eq!(long.len(), MAX_SUBDOMAIN_LEN);
        assert_ne!(long, collection_skill_card_name(&"c".repeat(250), "skilm"));
        let dotted = collection_skill_card_name("a", ".-.x.");
        assert!(is_dns_subdomain(&dotted), "{dotted}");
        // Deterministic: the same inputs always give the same name.
        assert_eq!(odd, collection_skill_card_name("bundle", "My_Skill"));
    }

    #[test]
    fn valid_run_names_are_kept() {
        for name in ["a", "run-1", "migrate-to-quarkus", &"a".repeat(63)] {
            assert_eq!(sandbox_name(name), name);
        }
    }

    #[test]
    fn dots_become_dashes_with_a_hash() {
        assert_hashed(&sandbox_name("v1.2-upgrade"), "v1-2-upgrade");
        assert_hashed(&sandbox_name("a..b"), "a-b");
    }

    #[test]
    fn leading_digit_gets_a_prefix() {
        assert_hashed(&sandbox_name("2024-fix"), "run-2024-fix");
        assert_hashed(&sandbox_name("9"), "run-9");
        assert_hashed(&sandbox_name("-x"), "x");
    }

    #[test]
    fn long_names_fit_and_end_well() {
        let long = format!("{}.{}", "a".repeat(120), "b".repeat(132));
        assert_eq!(long.len(), 253);
        let name = sandbox_name(&long);
        assert_eq!(name.len(), MAX_LABEL_LEN);
        assert_hashed(&name, &"a".repeat(52));

        // A cut that would end in '-' drops it.
        let dashy = format!("{}-{}", "a".repeat(51), "b".repeat(30));
        assert_hashed(&sandbox_name(&dashy), &"a".repeat(51));

        // Room for the derived object suffix stays within a Secret name.
        assert!(acp_secret_name(&name).len() <= MAX_SUBDOMAIN_LEN);
        assert_eq!(acp_secret_name("r"), "r-acp-key");
    }

    #[test]
    fn names_that_sanitize_alike_do_not_collide() {
        let names = ["a.b", "a-b.", "a..b", "a.b.", "A.b"];
        let sandboxes: std::collections::BTreeSet<String> =
            names.iter().map(|n| sandbox_name(n)).collect();
        assert_eq!(sandboxes.len(), names.len());
        assert!(
            !sandboxes.contains("a-b"),
            "the changed names never equal a kept one verbatim"
        );

        let prefix = "x".repeat(70);
        assert_ne!(
            sandbox_name(&format!("{prefix}1")),
            sandbox_name(&format!("{prefix}2"))
        );
    }

    #[test]
    fn sandbox_names_are_stable() {
        assert_eq!(sandbox_name("v1.2-upgrade"), sandbox_name("v1.2-upgrade"));
        // Pinned so a change of algorithm (which would orphan existing sandboxes) is noticed.
        assert_eq!(
            sandbox_name("my.run"),
            format!("my-run-{}", short_hash("my.run"))
        );
        assert_eq!(short_hash("my.run").len(), HASH_LEN);
    }

    #[test]
    fn inline_config_map_names_fit_a_subdomain() {
        assert_eq!(
            inline_skill_config_map_name("java.rules"),
            "java.rules-skill"
        );
        let long = format!("{}.{}", "a".repeat(200), "b".repeat(52));
        let name = inline_skill_config_map_name(&long);
        assert!(name.len() <= MAX_SUBDOMAIN_LEN, "{}", name.len());
        assert!(name.starts_with(&"a".repeat(200)));
        assert!(name.ends_with("-skill"));
        assert!(
            !name.contains(".-"),
            "a cut never leaves a dot before the hash: {name}"
        );
        assert_ne!(name, inline_skill_config_map_name(&format!("{long}c")));
    }

    #[test]
    fn label_values_are_names_when_they_fit() {
        assert_eq!(label_value("my.run"), "my.run");
        assert_eq!(label_value(&"r".repeat(63)), "r".repeat(63));
        let long = "r".repeat(64);
        let value = label_value(&long);
        assert!(value.len() <= MAX_LABEL_LEN);
        assert!(is_label_value(&value));
        assert!(value.starts_with(&"r".repeat(52)));
        assert_ne!(value, label_value(&"r".repeat(65)));
    }
}
