//! Signatures of git commits: SSH, with `gpg.ssh.allowedSignersFile` semantics, and
//! OpenPGP (GPG) against armored public keys.

use std::time::SystemTime;

use crate::TrustError;
use crate::gpg::GpgKeys;
use crate::limits::{MAX_ALLOWED_SIGNERS, MAX_COMMIT_BYTES};
use crate::refusal::{Refusal, RefusalReason};
use crate::verdict::CommitVerdict;

/// The namespace git signs commits in (`ssh-keygen -Y sign -n git`).
const GIT_NAMESPACE: &str = "git";

/// An allowed-signers list, in the format of git's `gpg.ssh.allowedSignersFile`
/// (`ssh-keygen(1)`, ALLOWED SIGNERS): one `principals [options] keytype base64-key [comment]`
/// per line, `#` comments and blank lines ignored. Principals are comma-separated patterns
/// (`*` and `?` wildcards, `!` negation). Options understood: `namespaces="…"` (the signature
/// must be in one of them), `valid-after` and `valid-before` (checked against the commit's
/// committer time, as git does). A `cert-authority` line is refused: certificate signers are
/// not supported.
#[derive(Debug, Clone, Default)]
pub struct AllowedSigners {
    entries: Vec<AllowedSigner>,
}

#[derive(Debug, Clone)]
struct AllowedSigner {
    principals: String,
    namespaces: Option<String>,
    valid_after: Option<i64>,
    valid_before: Option<i64>,
    key: ssh_key::PublicKey,
}

impl AllowedSigners {
    /// Parses an allowed-signers list; `name` says where it came from, for errors.
    pub fn parse(text: &str, name: &str) -> Result<AllowedSigners, TrustError> {
        let mut entries = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if entries.len() == MAX_ALLOWED_SIGNERS {
                return Err(TrustError::InvalidAllowedSigners {
                    name: name.to_string(),
                    line: number + 1,
                    error: SignerLineError::TooMany,
                });
            }
            entries.push(
                parse_line(line).map_err(|error| TrustError::InvalidAllowedSigners {
                    name: name.to_string(),
                    line: number + 1,
                    error,
                })?,
            );
        }
        Ok(AllowedSigners { entries })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What is wrong with one line of an allowed-signers file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignerLineError {
    #[error("expected `principals [options] keytype base64-key`")]
    Shape,
    #[error("unreadable {key_type} key: {error}")]
    Key { key_type: String, error: String },
    #[error("cert-authority signers are not supported")]
    CertAuthority,
    #[error("unknown option {0:?}")]
    UnknownOption(String),
    #[error("time {0:?} is not YYYYMMDD[HHMM[SS]][Z]")]
    Time(String),
    #[error("more than {MAX_ALLOWED_SIGNERS} signers (MAX_ALLOWED_SIGNERS)")]
    TooMany,
}

fn parse_line(line: &str) -> Result<AllowedSigner, SignerLineError> {
    let (principals, rest) = split_token(line);
    let rest = rest.trim_start();
    let (options, rest) = if is_key_type(rest.split_whitespace().next().unwrap_or("")) {
        ("", rest)
    } else {
        split_token(rest)
    };
    let mut fields = rest.split_whitespace();
    let (Some(key_type), Some(key_data)) = (fields.next(), fields.next()) else {
        return Err(SignerLineError::Shape);
    };
    let key =
        ssh_key::PublicKey::from_openssh(&format!("{key_type} {key_data}")).map_err(|error| {
            SignerLineError::Key {
                key_type: key_type.to_string(),
                error: error.to_string(),
            }
        })?;
    let mut signer = AllowedSigner {
        principals: principals.to_string(),
        namespaces: None,
        valid_after: None,
        valid_before: None,
        key,
    };
    for option in split_options(options) {
        let (name, value) = option.split_once('=').unwrap_or((option, ""));
        let value = value.trim_matches('"');
        match name.to_ascii_lowercase().as_str() {
            "namespaces" => signer.namespaces = Some(value.to_string()),
            "valid-after" => signer.valid_after = Some(parse_time(value)?),
            "valid-before" => signer.valid_before = Some(parse_time(value)?),
            "cert-authority" => return Err(SignerLineError::CertAuthority),
            other => return Err(SignerLineError::UnknownOption(other.to_string())),
        }
    }
    Ok(signer)
}

/// The first token of `text` (quotes keep spaces inside it) and what follows it.
fn split_token(text: &str) -> (&str, &str) {
    let mut quoted = false;
    for (index, character) in text.char_indices() {
        match character {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => return (&text[..index], &text[index..]),
            _ => {}
        }
    }
    (text, "")
}

/// The comma-separated options of an options token, commas inside quotes kept.
fn split_options(options: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut quoted = false;
    let mut start = 0;
    for (index, character) in options.char_indices() {
        match character {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&options[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    if start < options.len() {
        parts.push(&options[start..]);
    }
    parts.into_iter().filter(|part| !part.is_empty()).collect()
}

fn is_key_type(token: &str) -> bool {
    token.starts_with("ssh-") || token.starts_with("ecdsa-") || token.starts_with("sk-")
}

/// `YYYYMMDD[HHMM[SS]][Z]` (ssh-keygen's format), as seconds since the epoch, read as UTC.
fn parse_time(value: &str) -> Result<i64, SignerLineError> {
    let digits = value.strip_suffix('Z').unwrap_or(value);
    let invalid = || SignerLineError::Time(value.to_string());
    if !digits.chars().all(|c| c.is_ascii_digit()) || ![8, 12, 14].contains(&digits.len()) {
        return Err(invalid());
    }
    let field = |range: std::ops::Range<usize>| -> i64 {
        digits
            .get(range)
            .and_then(|part| part.parse().ok())
            .unwrap_or(0)
    };
    let (year, month, day) = (field(0..4), field(4..6), field(6..8));
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return Err(invalid());
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let shifted_year = if month <= 2 { year - 1 } else { year };
    let era = shifted_year.div_euclid(400);
    let year_of_era = shifted_year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Ok(days * 86_400 + field(8..10) * 3_600 + field(10..12) * 60 + field(12..14))
}

/// Whether `principal` matches a comma-separated pattern list the way OpenSSH's
/// `match_pattern_list` does: a negated match (`!pattern`) refuses outright.
fn principals_match(patterns: &str, principal: &str) -> bool {
    let mut matched = false;
    for pattern in patterns.split(',') {
        match pattern.strip_prefix('!') {
            Some(negated) if glob(negated, principal) => return false,
            Some(_) => {}
            None => matched |= glob(pattern, principal),
        }
    }
    matched
}

fn glob(pattern: &str, text: &str) -> bool {
    let (pattern, text): (Vec<char>, Vec<char>) =
        (pattern.chars().collect(), text.chars().collect());
    // Iterative wildcard matching with backtracking to the last `*`.
    let (mut p, mut t, mut star, mut resume) = (0, 0, None, 0);
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some(p);
            resume = t;
            p += 1;
        } else if let Some(star_at) = star {
            p = star_at + 1;
            resume += 1;
            t = resume;
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// A commit object split into the bytes that were signed and its SSH signature.
struct SignedCommit {
    signed: Vec<u8>,
    signature: Option<String>,
    committer_time: Option<i64>,
}

/// Splits the raw commit object (`git cat-file commit <id>`): the `gpgsig` header, with its
/// continuation lines, is the signature; the commit without it is what was signed.
fn split_commit(raw: &[u8]) -> Result<SignedCommit, Refusal> {
    let text = std::str::from_utf8(raw)
        .map_err(|_| Refusal::new(RefusalReason::Malformed, "the commit object is not UTF-8"))?;
    let (headers, message) = text
        .split_once("\n\n")
        .map_or((text, None), |(headers, message)| (headers, Some(message)));
    let mut signed = String::with_capacity(text.len());
    let mut signature: Option<String> = None;
    let mut committer_time = None;
    let mut in_signature = false;
    for line in headers.split('\n') {
        if in_signature && let Some(continued) = line.strip_prefix(' ') {
            if let Some(signature) = signature.as_mut() {
                signature.push('\n');
                signature.push_str(continued);
            }
            continue;
        }
        in_signature = false;
        if let Some(value) = line.strip_prefix("gpgsig ") {
            if signature.is_some() {
                return Err(Refusal::new(
                    RefusalReason::Malformed,
                    "the commit carries two gpgsig headers",
                ));
            }
            signature = Some(value.to_string());
            in_signature = true;
            continue;
        }
        if let Some(committer) = line.strip_prefix("committer ") {
            // `Name <email> 1700000000 +0000`
            committer_time = committer
                .rsplit(' ')
                .nth(1)
                .and_then(|seconds| seconds.parse().ok());
        }
        signed.push_str(line);
        signed.push('\n');
    }
    if let Some(message) = message {
        signed.push('\n');
        signed.push_str(message);
    } else {
        // No blank line: the last header had no newline after it in the object.
        signed.pop();
    }
    Ok(SignedCommit {
        signed: signed.into_bytes(),
        signature,
        committer_time,
    })
}

/// Who may sign commits: SSH keys of an allowed-signers list, OpenPGP keys, or both.
#[derive(Debug, Clone, Default)]
pub struct CommitSigners {
    pub allowed_signers: AllowedSigners,
    pub gpg_keys: GpgKeys,
}

impl CommitSigners {
    /// Whether no signature could ever count.
    pub fn is_empty(&self) -> bool {
        self.allowed_signers.is_empty() && self.gpg_keys.is_empty()
    }
}

impl From<AllowedSigners> for CommitSigners {
    fn from(allowed_signers: AllowedSigners) -> Self {
        CommitSigners {
            allowed_signers,
            gpg_keys: GpgKeys::default(),
        }
    }
}

/// Verifies the signature of a raw commit object (as `git cat-file commit <id>` prints it;
/// `agentic_git`'s `Fetched::raw_commit` hands it over) against `signers`, by the armor of
/// its `gpgsig` header:
///
/// - `SSH SIGNATURE`: an SSHSIG in the `git` namespace by a key of the allowed-signers
///   list, within that line's options;
/// - `PGP SIGNATURE`: a detached OpenPGP signature by one of the GPG keys (or a signing
///   subkey of one), neither revoked nor expired at `now`.
///
/// The caller must have checked that `raw` is the object of the pinned commit id.
pub fn verify_commit(raw: &[u8], signers: &CommitSigners, now: SystemTime) -> CommitVerdict {
    let invalid =
        |reason: RefusalReason, why: String| CommitVerdict::Invalid(Refusal::new(reason, why));
    if raw.len() > MAX_COMMIT_BYTES {
        return invalid(
            RefusalReason::OverLimit,
            format!(
                "the commit object is {} bytes, over the limit of {MAX_COMMIT_BYTES} (MAX_COMMIT_BYTES)",
                raw.len()
            ),
        );
    }
    let commit = match split_commit(raw) {
        Ok(commit) => commit,
        Err(refusal) => return CommitVerdict::Invalid(refusal),
    };
    let Some(armored) = commit.signature else {
        return CommitVerdict::Unsigned;
    };
    if armored.starts_with("-----BEGIN PGP SIGNATURE-----") {
        if signers.gpg_keys.is_empty() {
            return invalid(
                RefusalReason::SignatureMismatch,
                "the commit is GPG-signed, and no GPG keys are allowed".to_string(),
            );
        }
        return crate::gpg::verify(&signers.gpg_keys, &armored, &commit.signed, now);
    }
    if !armored.starts_with("-----BEGIN SSH SIGNATURE-----") {
        return invalid(
            RefusalReason::Malformed,
            "the commit's signature is neither an SSH nor an OpenPGP signature".to_string(),
        );
    }
    if signers.allowed_signers.is_empty() {
        return invalid(
            RefusalReason::SignatureMismatch,
            "the commit is SSH-signed, and no SSH signers are allowed".to_string(),
        );
    }
    let allowed = &signers.allowed_signers;
    let signature = match ssh_key::SshSig::from_pem(armored.trim_end()) {
        Ok(signature) => signature,
        Err(error) => {
            return invalid(
                RefusalReason::Malformed,
                format!("the commit's signature is not an SSH signature: {error}"),
            );
        }
    };
    if signature.namespace() != GIT_NAMESPACE {
        return invalid(
            RefusalReason::SignatureMismatch,
            format!(
                "the signature is in namespace {:?}, not {GIT_NAMESPACE:?}",
                signature.namespace()
            ),
        );
    }
    let signing_key = signature.public_key();
    let fingerprint = signing_key
        .fingerprint(ssh_key::HashAlg::Sha256)
        .to_string();
    let Some(signer) = allowed
        .entries
        .iter()
        .find(|entry| entry.key.key_data() == signing_key)
    else {
        return invalid(
            RefusalReason::SignatureMismatch,
            format!("the signing key {fingerprint} is not an allowed signer"),
        );
    };
    if let Some(namespaces) = &signer.namespaces
        && !principals_match(namespaces, GIT_NAMESPACE)
    {
        return invalid(
            RefusalReason::SignatureMismatch,
            format!(
                "the allowed signer {} may sign only in namespaces {namespaces:?}",
                signer.principals
            ),
        );
    }
    if signer.valid_after.is_some() || signer.valid_before.is_some() {
        let Some(time) = commit.committer_time else {
            return invalid(
                RefusalReason::KeyNotUsable,
                "the commit has no committer time to check the signer's validity with".to_string(),
            );
        };
        if signer.valid_after.is_some_and(|after| time < after)
            || signer.valid_before.is_some_and(|before| time > before)
        {
            return invalid(
                RefusalReason::KeyNotUsable,
                format!(
                    "the allowed signer {} was not valid at the commit's time",
                    signer.principals
                ),
            );
        }
    }
    if let Err(error) = signer.key.verify(GIT_NAMESPACE, &commit.signed, &signature) {
        return invalid(
            RefusalReason::SignatureMismatch,
            format!("the signature does not verify: {error}"),
        );
    }
    CommitVerdict::Verified {
        principal: signer.principals.clone(),
        fingerprint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_follow_openssh_patterns() {
        assert!(principals_match("*@example.com", "dev@example.com"));
        assert!(!principals_match(
            "*@example.com,!eve@example.com",
            "eve@example.com"
        ));
        assert!(principals_match("a?c", "abc"));
        assert!(!principals_match("a?c", "abbc"));
    }

    #[test]
    fn options_and_times_are_read_like_ssh_keygen() {
        assert_eq!(parse_time("19700102"), Ok(86_400));
        assert_eq!(parse_time("20240229120000Z"), Ok(1_709_208_000));
        assert!(parse_time("2024").is_err());
        assert_eq!(
            split_options(r#"namespaces="git,file",valid-after=20240101"#),
            vec![r#"namespaces="git,file""#, "valid-after=20240101"]
        );
    }

    #[test]
    fn the_signature_header_is_cut_out_of_what_was_signed() {
        let raw = b"tree 1\nauthor A <a> 1 +0000\ncommitter A <a> 1700000000 +0000\ngpgsig -----BEGIN SSH SIGNATURE-----\n U1NI\n -----END SSH SIGNATURE-----\n\nmessage\n";
        let commit = split_commit(raw).expect("a commit");
        assert_eq!(
            commit.signed,
            b"tree 1\nauthor A <a> 1 +0000\ncommitter A <a> 1700000000 +0000\n\nmessage\n".to_vec()
        );
        assert_eq!(
            commit.signature.as_deref(),
            Some("-----BEGIN SSH SIGNATURE-----\nU1NI\n-----END SSH SIGNATURE-----")
        );
        assert_eq!(commit.committer_time, Some(1_700_000_000));
    }

    #[test]
    fn an_unsigned_commit_is_unsigned() {
        assert_eq!(
            verify_commit(
                b"tree 1\ncommitter A <a> 1 +0000\n\nm\n",
                &CommitSigners::default(),
                SystemTime::now()
            ),
            CommitVerdict::Unsigned
        );
    }
}
