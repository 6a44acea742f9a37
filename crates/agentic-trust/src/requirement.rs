//! What a signature must satisfy: keys, or a keyless identity under a trust root.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use x509_parser::prelude::FromDer as _;

use crate::TrustError;
use crate::keys::{PublicKey, keys_from_pem_list, pem_blocks};
use crate::limits::MAX_TRUST_ROOT_CERTIFICATES;

/// Longest regular expression accepted in an identity, in bytes of its source.
pub const MAX_PATTERN_BYTES: usize = 1024;
/// Compiled size of an identity's regular expression, so a hostile pattern cannot take the
/// operator's memory.
const MAX_REGEX_SIZE: usize = 256 * 1024;

/// What makes a signature count: made with one of `keys`, or keyless under `keyless`. Either
/// is enough; several keys allow rotation (old and new both count until the old is removed).
#[derive(Debug, Clone, Default)]
pub struct Requirement {
    pub keys: Vec<PublicKey>,
    pub keyless: Option<Keyless>,
    /// Whether a signature must name the image's repository: then a bundle whose statement
    /// names no repository, and a bundle's message signature (over the manifest, which
    /// names none), do not count, only the legacy layout and statements naming it.
    pub repository_bound: bool,
}

impl Requirement {
    /// Signatures made with any of `keys`.
    pub fn keys(keys: Vec<PublicKey>) -> Requirement {
        Requirement {
            keys,
            ..Requirement::default()
        }
    }

    /// Keyless signatures whose certificate chains to `keyless.trust_root` and names one of
    /// `keyless.identities`.
    pub fn keyless(keyless: Keyless) -> Requirement {
        Requirement {
            keyless: Some(keyless),
            ..Requirement::default()
        }
    }

    /// Whether nothing could ever satisfy it.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
            && self
                .keyless
                .as_ref()
                .is_none_or(|keyless| keyless.identities.is_empty())
    }
}

/// Keyless (Fulcio-style) signatures: a short-lived certificate naming who signed, logged
/// in Rekor. Verified offline against an administrator-supplied [`TrustRoot`].
#[derive(Debug, Clone)]
pub struct Keyless {
    /// Accepted signers; any one is enough.
    pub identities: Vec<Identity>,
    pub trust_root: TrustRoot,
}

/// Who signed, as the certificate says: the OIDC issuer (Fulcio's extension
/// `1.3.6.1.4.1.57264.1.8`, or the older `.1.1`) and the subject (the certificate's email or
/// URI subject alternative name).
#[derive(Debug, Clone)]
pub struct Identity {
    pub issuer: Pattern,
    pub subject: Pattern,
}

/// An exact string, or a regular expression that must match the whole value.
#[derive(Debug, Clone)]
pub enum Pattern {
    Exact(String),
    Regex(regex::Regex),
}

impl Pattern {
    /// A regular expression (Rust `regex` syntax), anchored at both ends. `field` names where
    /// it came from, for errors.
    pub fn regex(source: &str, field: &str) -> Result<Pattern, TrustError> {
        let invalid = |message: String| TrustError::InvalidPattern {
            field: field.to_string(),
            message,
        };
        if source.len() > MAX_PATTERN_BYTES {
            return Err(invalid(format!(
                "{} bytes, over the limit of {MAX_PATTERN_BYTES} (MAX_PATTERN_BYTES)",
                source.len()
            )));
        }
        regex::RegexBuilder::new(&format!("^(?:{source})$"))
            .size_limit(MAX_REGEX_SIZE)
            .build()
            .map(Pattern::Regex)
            .map_err(|error| invalid(error.to_string()))
    }

    pub fn matches(&self, value: &str) -> bool {
        match self {
            Pattern::Exact(wanted) => wanted == value,
            Pattern::Regex(regex) => regex.is_match(value),
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pattern::Exact(value) => write!(f, "{value:?}"),
            Pattern::Regex(regex) => write!(f, "/{}/", regex.as_str()),
        }
    }
}

/// When a trust root's entry may be used, in seconds since the epoch: Sigstore's
/// `trusted_root.json` gives each certificate authority and log key a `validFor` window (a
/// retired key stays for old signatures, a new one counts only from its start). Unbounded
/// ends are `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) start: Option<i64>,
    pub(crate) end: Option<i64>,
}

impl Window {
    pub(crate) fn contains(&self, time: i64) -> bool {
        self.start.is_none_or(|start| start <= time) && self.end.is_none_or(|end| time <= end)
    }
}

/// A trust root entry and its window.
#[derive(Debug, Clone)]
pub(crate) struct Windowed<T> {
    pub(crate) item: T,
    pub(crate) valid: Window,
}

impl<T> Windowed<T> {
    fn always(item: T) -> Self {
        Windowed {
            item,
            valid: Window::default(),
        }
    }
}

/// What keyless signatures are checked against, all supplied by the administrator (e.g. from
/// Sigstore's `trusted_root.json`, or a private Fulcio and Rekor): nothing is fetched.
#[derive(Debug, Clone, Default)]
pub struct TrustRoot {
    /// DER certificates of the certificate authorities (roots and intermediates) a signing
    /// certificate must chain to, each counting within its window (and its own validity).
    pub(crate) certificate_authorities: Vec<Windowed<Vec<u8>>>,
    /// Keys of the transparency logs whose signed entry timestamps count, each for entries
    /// logged within its window.
    pub(crate) rekor_keys: Vec<Windowed<PublicKey>>,
    /// Keys of the certificate-transparency logs: when any are given, a signing certificate
    /// needs an embedded SCT of one of them, stamped within its window; when none are, SCTs
    /// are not required.
    pub(crate) ct_log_keys: Vec<Windowed<PublicKey>>,
}

impl TrustRoot {
    /// A trust root from PEM: `certificate_authorities` holds one or more `CERTIFICATE`
    /// blocks, `rekor_keys` and `ct_log_keys` one or more `PUBLIC KEY` blocks (`ct_log_keys`
    /// may be empty). PEM carries no windows: the keys always count, the certificates within
    /// their own validity.
    pub fn from_pem(
        certificate_authorities: &str,
        rekor_keys: &str,
        ct_log_keys: &str,
    ) -> Result<TrustRoot, TrustError> {
        let mut authorities = Vec::new();
        for (index, block) in pem_blocks(
            certificate_authorities.as_bytes(),
            "certificate authorities",
        )?
        .into_iter()
        .enumerate()
        {
            let name = format!("certificate authorities (block {})", index + 1);
            if block.label != "CERTIFICATE" {
                return Err(TrustError::InvalidKey {
                    name,
                    message: format!("the PEM block is a {:?}, not a CERTIFICATE", block.label),
                });
            }
            check_certificate(&block.contents, &name)?;
            authorities.push(Windowed::always(block.contents));
        }
        check_authority_count(authorities.len())?;
        let rekor_keys = keys_from_pem_list(rekor_keys, "Rekor keys")?;
        let ct_log_keys = if ct_log_keys.trim().is_empty() {
            Vec::new()
        } else {
            keys_from_pem_list(ct_log_keys, "CT log keys")?
        };
        Ok(TrustRoot {
            certificate_authorities: authorities,
            rekor_keys: rekor_keys.into_iter().map(Windowed::always).collect(),
            ct_log_keys: ct_log_keys.into_iter().map(Windowed::always).collect(),
        })
    }

    /// A trust root from Sigstore's `trusted_root.json` (media type
    /// `application/vnd.dev.sigstore.trustedroot+json`, as the public-good instance publishes
    /// it through TUF): its certificate authorities (`certificateAuthorities[].certChain`),
    /// Rekor keys (`tlogs`) and CT log keys (`ctlogs`), each with its `validFor` window.
    /// Timestamp authorities are not read. `name` says where it came from, for errors.
    pub fn from_trusted_root_json(json: &str, name: &str) -> Result<TrustRoot, TrustError> {
        let invalid = |message: String| TrustError::InvalidKey {
            name: name.to_string(),
            message,
        };
        let root: TrustedRootJson = serde_json::from_str(json)
            .map_err(|error| invalid(format!("not a Sigstore trusted root: {error}")))?;
        if !root.media_type.starts_with(TRUSTED_ROOT_MEDIA_TYPE) {
            return Err(invalid(format!(
                "the media type {:?} is not a Sigstore trusted root ({TRUSTED_ROOT_MEDIA_TYPE})",
                root.media_type
            )));
        }
        let mut authorities = Vec::new();
        for (index, authority) in root.certificate_authorities.iter().enumerate() {
            let valid = authority
                .valid_for
                .window()
                .map_err(|error| invalid(format!("certificateAuthorities[{index}]: {error}")))?;
            for (position, certificate) in authority.cert_chain.certificates.iter().enumerate() {
                let at =
                    format!("certificateAuthorities[{index}].certChain.certificates[{position}]");
                let der = STANDARD
                    .decode(&certificate.raw_bytes)
                    .map_err(|error| invalid(format!("{at}: not base64: {error}")))?;
                check_certificate(&der, &format!("{name}: {at}"))?;
                authorities.push(Windowed { item: der, valid });
            }
        }
        check_authority_count(authorities.len())?;
        let keys =
            |logs: &[LogJson], field: &str| -> Result<Vec<Windowed<PublicKey>>, TrustError> {
                logs.iter()
                    .enumerate()
                    .map(|(index, log)| {
                        let at = format!("{field}[{index}].publicKey");
                        let der = STANDARD
                            .decode(&log.public_key.raw_bytes)
                            .map_err(|error| invalid(format!("{at}: not base64: {error}")))?;
                        let item = PublicKey::from_spki_der(&der)
                            .map_err(|error| invalid(format!("{at}: {error}")))?;
                        let valid = log
                            .public_key
                            .valid_for
                            .window()
                            .map_err(|error| invalid(format!("{at}: {error}")))?;
                        Ok(Windowed { item, valid })
                    })
                    .collect()
            };
        let rekor_keys = keys(&root.tlogs, "tlogs")?;
        if rekor_keys.is_empty() {
            return Err(invalid("it lists no transparency log (tlogs)".to_string()));
        }
        Ok(TrustRoot {
            certificate_authorities: authorities,
            rekor_keys,
            ct_log_keys: keys(&root.ctlogs, "ctlogs")?,
        })
    }

    /// How many CT log keys it holds.
    pub fn ct_log_key_count(&self) -> usize {
        self.ct_log_keys.len()
    }
}

/// The media type of Sigstore's trusted root (any version).
const TRUSTED_ROOT_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.trustedroot";

fn check_certificate(der: &[u8], name: &str) -> Result<(), TrustError> {
    x509_parser::certificate::X509Certificate::from_der(der)
        .map(|_| ())
        .map_err(|error| TrustError::InvalidKey {
            name: name.to_string(),
            message: format!("not an X.509 certificate: {error}"),
        })
}

fn check_authority_count(count: usize) -> Result<(), TrustError> {
    if count > MAX_TRUST_ROOT_CERTIFICATES {
        return Err(TrustError::InvalidKey {
            name: "certificate authorities".to_string(),
            message: format!(
                "{count} certificates, over the limit of {MAX_TRUST_ROOT_CERTIFICATES} (MAX_TRUST_ROOT_CERTIFICATES)"
            ),
        });
    }
    Ok(())
}

/// Sigstore's `trusted_root.json` (protobuf JSON: camelCase, bytes in base64), the parts
/// read.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TrustedRootJson {
    #[serde(default)]
    media_type: String,
    #[serde(default)]
    tlogs: Vec<LogJson>,
    #[serde(default)]
    certificate_authorities: Vec<AuthorityJson>,
    #[serde(default)]
    ctlogs: Vec<LogJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogJson {
    public_key: LogKeyJson,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogKeyJson {
    raw_bytes: String,
    #[serde(default)]
    valid_for: ValidForJson,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuthorityJson {
    cert_chain: CertChainJson,
    #[serde(default)]
    valid_for: ValidForJson,
}

#[derive(Deserialize)]
struct CertChainJson {
    #[serde(default)]
    certificates: Vec<RawBytesJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBytesJson {
    raw_bytes: String,
}

#[derive(Deserialize, Default)]
struct ValidForJson {
    start: Option<String>,
    end: Option<String>,
}

/// A `validFor` end of a trusted root that is not an RFC 3339 time.
#[derive(Debug, thiserror::Error)]
#[error("validFor.{end} {text:?} is not a time: {error}")]
struct NotATime {
    end: &'static str,
    text: String,
    error: String,
}

impl ValidForJson {
    /// The window, its RFC 3339 ends read as seconds since the epoch.
    fn window(&self) -> Result<Window, NotATime> {
        let seconds = |text: &Option<String>, end: &'static str| {
            text.as_deref()
                .map(|text| {
                    text.parse::<jiff::Timestamp>()
                        .map(jiff::Timestamp::as_second)
                        .map_err(|error| NotATime {
                            end,
                            text: text.to_string(),
                            error: error.to_string(),
                        })
                })
                .transpose()
        };
        Ok(Window {
            start: seconds(&self.start, "start")?,
            end: seconds(&self.end, "end")?,
        })
    }
}
