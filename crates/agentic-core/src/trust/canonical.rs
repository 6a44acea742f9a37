//! The canonical names trust policies select by. One repository or git URL can be written
//! several ways that reach the same bytes (`REGISTRY.example`, `registry.example:443`,
//! `index.docker.io/library/x`, `https://Git.example/a/b.git/`); a policy must select all of
//! them or none, so both its patterns and the pinned names are brought to one form first.
//! Wildcards pass through untouched: a pattern is canonicalized as a name that may hold them.

/// Docker Hub's canonical registry name, and the other names it answers to.
const DOCKER_HUB: &str = "docker.io";
const DOCKER_HUB_ALIASES: [&str; 2] = ["index.docker.io", "registry-1.docker.io"];
/// The namespace of Docker Hub's official images (`docker.io/alpine` is `docker.io/library/alpine`).
const DOCKER_HUB_OFFICIAL: &str = "library/";
/// The port an OCI registry is reached on when none is written (HTTPS).
const REGISTRY_DEFAULT_PORT: &str = "443";

/// An image repository (`[host[:port]/]path`) or an `images` pattern, canonical: the host in
/// lower case without the default port 443, Docker Hub for a name without a host and for
/// Docker Hub's other names, and `library/` before a Docker Hub name of one component.
pub fn canonical_repository(repository: &str) -> String {
    let (host, path) = match repository.split_once('/') {
        Some((first, rest)) if is_registry_host(first) => (canonical_host(first), rest),
        // A lone `*` or `**` pattern names no registry: it matches names of any.
        None if repository.contains('*') => return repository.to_string(),
        _ => (DOCKER_HUB.to_string(), repository),
    };
    let host = if DOCKER_HUB_ALIASES.contains(&host.as_str()) {
        DOCKER_HUB.to_string()
    } else {
        host
    };
    // `**` may stand for several components, so only a name of one component without it is
    // an official image.
    if host == DOCKER_HUB && !path.contains('/') && !path.contains("**") {
        format!("{host}/{DOCKER_HUB_OFFICIAL}{path}")
    } else {
        format!("{host}/{path}")
    }
}

/// Whether the first component of a repository names a registry: the distribution
/// reference's rule (a `.` or `:`, or `localhost`), plus a wildcard, which in a pattern
/// stands for registries.
fn is_registry_host(component: &str) -> bool {
    component.contains(['.', ':', '*']) || component == "localhost"
}

/// `host[:port]` in lower case, without the default registry port.
fn canonical_host(host: &str) -> String {
    let host = host.to_ascii_lowercase();
    match split_port(&host) {
        (name, Some(REGISTRY_DEFAULT_PORT)) => name.to_string(),
        _ => host,
    }
}

/// `host` and its port, an IPv6 literal's brackets kept with the host.
fn split_port(host: &str) -> (&str, Option<&str>) {
    let after_literal = if host.starts_with('[') {
        host.find(']').map_or(host.len(), |end| end + 1)
    } else {
        0
    };
    match host[after_literal..].rfind(':') {
        Some(colon) => {
            let colon = after_literal + colon;
            (&host[..colon], Some(&host[colon + 1..]))
        }
        None => (host, None),
    }
}

/// The port a git URL's scheme uses when none is written.
fn git_default_port(scheme: &str) -> Option<&'static str> {
    match scheme {
        "https" => Some("443"),
        "http" => Some("80"),
        "git" => Some("9418"),
        "ssh" => Some("22"),
        _ => None,
    }
}

/// A git URL or a `sources` pattern, canonical: scheme and host in lower case, the scheme's
/// default port dropped, and no trailing `/` or `.git` (`https://Git.example:443/a/b.git/` is
/// `https://git.example/a/b`).
pub fn canonical_git_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return trim_repository_suffix(url).to_string();
    };
    let scheme = scheme.to_ascii_lowercase();
    let (authority, path) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, ""),
    };
    // Credentials, when a URL carries any, keep their case; only the host is a name.
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((userinfo, host)) => (Some(userinfo), host),
        None => (None, authority),
    };
    let host = host.to_ascii_lowercase();
    let host = match split_port(&host) {
        (name, Some(port)) if git_default_port(&scheme) == Some(port) => name.to_string(),
        _ => host,
    };
    let userinfo = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
    format!(
        "{scheme}://{userinfo}{host}{}",
        trim_repository_suffix(path)
    )
}

/// `path` without trailing `/` and one trailing `.git` (either order).
fn trim_repository_suffix(path: &str) -> &str {
    let path = path.trim_end_matches('/');
    path.strip_suffix(".git")
        .unwrap_or(path)
        .trim_end_matches('/')
}

/// A signer or revoked key in the canonical form `revoked.keys` documents, so that a key
/// written in another case or with spaces still names the same key: `sha256:` fingerprints
/// in lower case, GPG fingerprints in upper case without spaces, SSH fingerprints with the
/// `SHA256:` prefix and without base64 padding (base64 is case-sensitive, so kept as is), and
/// certificate identities as written.
pub fn canonical_signer(signer: &str) -> String {
    let trimmed = signer.trim();
    if let Some((prefix, rest)) = trimmed.split_once(':')
        && prefix.eq_ignore_ascii_case("sha256")
    {
        // cosign's `sha256:<hex>` and SSH's `SHA256:<base64>`: hex is case-insensitive.
        if rest.len() == 64 && rest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return format!("sha256:{}", rest.to_ascii_lowercase());
        }
        return format!("SHA256:{}", rest.trim_end_matches('='));
    }
    let hex: String = trimmed.chars().filter(|c| *c != ' ').collect();
    if matches!(hex.len(), 40 | 64) && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return hex.to_ascii_uppercase();
    }
    trimmed.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signers_written_differently_have_one_canonical_form() {
        let cosign = format!("sha256:{}", "ab".repeat(32));
        let gpg = "0123456789ABCDEF0123456789ABCDEF01234567";
        let ssh = "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s";
        for (written, canonical) in [
            (cosign.clone(), cosign.clone()),
            (format!("SHA256:{}", "AB".repeat(32)), cosign.clone()),
            (format!(" sha256:{}", "aB".repeat(32)), cosign.clone()),
            (gpg.to_string(), gpg.to_string()),
            (gpg.to_ascii_lowercase(), gpg.to_string()),
            (
                "0123 4567 89AB CDEF 0123  4567 89ab cdef 0123 4567".to_string(),
                gpg.to_string(),
            ),
            (ssh.to_string(), ssh.to_string()),
            (format!("{ssh}="), ssh.to_string()),
            (
                "https://accounts.example me@example.com".to_string(),
                "https://accounts.example me@example.com".to_string(),
            ),
        ] {
            assert_eq!(canonical_signer(&written), canonical, "{written}");
        }
        // SSH fingerprints are base64: another case is another key.
        assert_ne!(
            canonical_signer(&ssh.to_ascii_lowercase()),
            canonical_signer(ssh)
        );
    }

    #[test]
    fn the_canonical_forms_are_those_the_crd_accepts() {
        let regex = regex::Regex::new(agentic_api::REVOKED_KEY_PATTERN).expect("the pattern");
        let pattern = |text: &str| regex.is_match(text);
        for signer in [
            format!("sha256:{}", "ab".repeat(32)),
            "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s".to_string(),
            "0123456789ABCDEF0123456789ABCDEF01234567".to_string(),
            "https://token.actions.githubusercontent.com https://github.com/a/b/.github/workflows/r.yml@refs/tags/v1".to_string(),
        ] {
            assert!(pattern(&canonical_signer(&signer)), "{signer}");
        }
        for refused in [
            format!("SHA256:{}", "ab".repeat(32)),
            "0123456789abcdef0123456789abcdef01234567".to_string(),
            "0123 4567 89AB CDEF 0123 4567 89AB CDEF 0123 4567".to_string(),
            "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s=".to_string(),
            "me@example.com".to_string(),
        ] {
            assert!(!pattern(&refused), "{refused}");
        }
    }

    #[test]
    fn repositories_written_differently_have_one_canonical_name() {
        for (written, canonical) in [
            ("registry.example/skills/x", "registry.example/skills/x"),
            ("REGISTRY.example/skills/x", "registry.example/skills/x"),
            ("registry.example:443/skills/x", "registry.example/skills/x"),
            ("Registry.Example:443/skills/x", "registry.example/skills/x"),
            (
                "registry.example:5000/skills/x",
                "registry.example:5000/skills/x",
            ),
            ("localhost:5000/x", "localhost:5000/x"),
            ("localhost/x", "localhost/x"),
            ("[::1]:443/x", "[::1]/x"),
            ("[::1]:5000/x", "[::1]:5000/x"),
            ("alpine", "docker.io/library/alpine"),
            ("docker.io/alpine", "docker.io/library/alpine"),
            ("index.docker.io/alpine", "docker.io/library/alpine"),
            (
                "registry-1.docker.io/library/alpine",
                "docker.io/library/alpine",
            ),
            ("INDEX.DOCKER.IO:443/acme/x", "docker.io/acme/x"),
            ("acme/x", "docker.io/acme/x"),
        ] {
            assert_eq!(canonical_repository(written), canonical, "{written}");
        }
    }

    #[test]
    fn patterns_keep_their_wildcards() {
        for (written, canonical) in [
            ("**", "**"),
            ("*", "*"),
            ("*/skills/**", "*/skills/**"),
            ("*.EXAMPLE:443/**", "*.example/**"),
            ("index.docker.io/**", "docker.io/**"),
            ("docker.io/*", "docker.io/library/*"),
            ("REGISTRY.example/skills/**", "registry.example/skills/**"),
        ] {
            assert_eq!(canonical_repository(written), canonical, "{written}");
        }
    }

    #[test]
    fn git_urls_written_differently_have_one_canonical_form() {
        for (written, canonical) in [
            ("https://git.example/acme/x", "https://git.example/acme/x"),
            ("HTTPS://Git.Example/acme/x", "https://git.example/acme/x"),
            (
                "https://git.example:443/acme/x",
                "https://git.example/acme/x",
            ),
            (
                "https://git.example/acme/x.git",
                "https://git.example/acme/x",
            ),
            ("https://git.example/acme/x/", "https://git.example/acme/x"),
            (
                "https://git.example/acme/x.git/",
                "https://git.example/acme/x",
            ),
            ("http://git.example:80/x", "http://git.example/x"),
            ("git://git.example:9418/x.git", "git://git.example/x"),
            ("https://git.example:8443/x", "https://git.example:8443/x"),
            ("http://git.example:443/x", "http://git.example:443/x"),
            // The path keeps its case: servers may tell `Acme` from `acme`.
            ("https://git.example/Acme/X", "https://git.example/Acme/X"),
            ("https://git.example/acme/**", "https://git.example/acme/**"),
            (
                "https://git.example/acme/*.git",
                "https://git.example/acme/*",
            ),
        ] {
            assert_eq!(canonical_git_url(written), canonical, "{written}");
        }
    }
}
