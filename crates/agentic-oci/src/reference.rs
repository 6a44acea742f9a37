//! Image references (`[host[:port]/]path[:tag][@digest]`), parsed by hand.
//!
//! oci-client parses them with one regular expression whose Unicode `\w{0,127}` for the tag
//! compiles to an automaton of about 15 MB, built on the first parse and kept for the life of
//! the process: most of an idle operator's peak heap. This parser follows the same grammar (the
//! distribution project's `reference` package) and normalizes the same way (`docker.io`,
//! `library/`, the `latest` tag), with one difference: tags are ASCII, as the distribution
//! spec has them, where the regular expression also takes any Unicode word character.

use oci_client::Reference;

/// Longest repository path, the registry left out.
const MAX_REPOSITORY: usize = 255;
/// Longest tag.
const MAX_TAG: usize = 128;
/// Shortest digest, in hex characters.
const MIN_DIGEST_HEX: usize = 32;
const DOCKER_HUB: &str = "docker.io";
const DOCKER_HUB_LEGACY: &str = "index.docker.io";
const DOCKER_HUB_OFFICIAL: &str = "library";
const DEFAULT_TAG: &str = "latest";

/// Parses `reference`, or says which part of it is wrong.
pub(crate) fn parse(reference: &str) -> Result<Reference, String> {
    if reference.is_empty() {
        return Err("the reference is empty".into());
    }
    let (rest, digest) = match reference.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (reference, None),
    };
    // A ':' after the last '/' starts the tag; one before it belongs to the host's port.
    let (name, tag) = match rest.rfind(':') {
        Some(colon) if !rest[colon..].contains('/') => (&rest[..colon], Some(&rest[colon + 1..])),
        _ => (rest, None),
    };
    check_name(name)?;
    if let Some(tag) = tag {
        check_tag(tag)?;
    }
    if let Some(digest) = digest {
        check_digest(digest)?;
    }
    let (registry, repository) = split_registry(name);
    if repository.len() > MAX_REPOSITORY {
        return Err(format!(
            "the repository path is {} characters long, over the limit of {MAX_REPOSITORY}",
            repository.len()
        ));
    }
    Ok(match (tag, digest) {
        (Some(tag), Some(digest)) => {
            Reference::with_tag_and_digest(registry, repository, tag.into(), digest.into())
        }
        (None, Some(digest)) => Reference::with_digest(registry, repository, digest.into()),
        (tag, None) => Reference::with_tag(registry, repository, tag.unwrap_or(DEFAULT_TAG).into()),
    })
}

/// `[host[:port]/]component[/component...]`: the first of several components may be a
/// registry host.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the repository name is empty".into());
    }
    let components: Vec<&str> = name.split('/').collect();
    let path = match components.split_first() {
        Some((first, rest)) if !rest.is_empty() && is_host(first) => rest,
        _ => &components[..],
    };
    let first_of_several = path.len() == components.len() && components.len() > 1;
    match path.iter().position(|c| !is_path_component(c)) {
        None => Ok(()),
        Some(0) if first_of_several => Err(format!(
            "{:?} is neither a registry host[:port] nor a path component (lowercase letters and digits, separated by '.', '_', '__' or dashes)",
            path[0]
        )),
        Some(i) => Err(bad_component(path[i])),
    }
}

fn bad_component(component: &str) -> String {
    if component.is_empty() {
        return "the repository path has an empty component (a leading, trailing or double '/')"
            .into();
    }
    format!(
        "the path component {component:?} is not lowercase letters and digits, separated by '.', '_', '__' or dashes"
    )
}

/// Lowercase letters and digits, runs of them joined by one `.`, one `_`, `__` or any number
/// of `-`.
fn is_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !bytes.first().is_some_and(|&b| alnum(b)) || !bytes.last().is_some_and(|&b| alnum(b)) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &component[start..i];
        if !(matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-')) {
            return false;
        }
    }
    true
}

/// `label[.label...][:port]`, each label letters, digits and inner dashes.
fn is_host(host: &str) -> bool {
    let (domain, port) = match host.split_once(':') {
        Some((domain, port)) => (domain, Some(port)),
        None => (host, None),
    };
    let label = |l: &str| {
        let bytes = l.as_bytes();
        !bytes.is_empty()
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
            && bytes[0] != b'-'
            && bytes[bytes.len() - 1] != b'-'
    };
    domain.split('.').all(label)
        && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A word character, then up to 127 word characters, dots and dashes.
fn check_tag(tag: &str) -> Result<(), String> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    if bytes.len() > MAX_TAG {
        return Err(format!(
            "the tag is {} characters long, over the limit of {MAX_TAG}",
            bytes.len()
        ));
    }
    if !bytes.first().is_some_and(|&b| word(b))
        || !bytes.iter().all(|&b| word(b) || b == b'.' || b == b'-')
    {
        return Err(format!(
            "the tag {tag:?} is not ASCII letters, digits and '_', then also '.' and '-'"
        ));
    }
    Ok(())
}

/// `algorithm:hex`, with the length the algorithm has; sha256, sha384 and sha512 only.
fn check_digest(digest: &str) -> Result<(), String> {
    let malformed = || {
        format!(
            "the digest {digest:?} is not algorithm:hex (for example sha256: and 64 hex digits)"
        )
    };
    let (algorithm, hex) = digest.split_once(':').ok_or_else(malformed)?;
    let algorithm_ok = algorithm.split(['-', '_', '+', '.']).all(|part| {
        part.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
            && part.bytes().all(|b| b.is_ascii_alphanumeric())
    });
    if !algorithm_ok || hex.len() < MIN_DIGEST_HEX || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(malformed());
    }
    let expected = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        other => {
            return Err(format!(
                "the digest algorithm {other:?} is not sha256, sha384 or sha512"
            ));
        }
    };
    if hex.len() != expected {
        return Err(format!(
            "a {algorithm} digest has {expected} hex digits, this one {}",
            hex.len()
        ));
    }
    Ok(())
}

/// The registry and the repository path of a checked name, Docker Hub's when the first
/// component is no host (no '.' or ':', and not `localhost`).
fn split_registry(name: &str) -> (String, String) {
    let (registry, repository) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (first, rest),
        _ => (DOCKER_HUB, name),
    };
    let registry = if registry == DOCKER_HUB_LEGACY {
        DOCKER_HUB
    } else {
        registry
    };
    let repository = if registry == DOCKER_HUB && !repository.contains('/') {
        format!("{DOCKER_HUB_OFFICIAL}/{repository}")
    } else {
        repository.to_string()
    };
    (registry.to_string(), repository)
}

#[cfg(test)]
mod tests;
