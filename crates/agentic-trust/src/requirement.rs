//! What a signature must satisfy: keys, or a keyless identity under a trust root.

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
}

impl Requirement {
    /// Signatures made with any of `keys`.
    pub fn keys(keys: Vec<PublicKey>) -> Requirement {
        Requirement {
            keys,
            keyless: None,
        }
    }

    /// Keyless signatures whose certificate chains to `keyless.trust_root` and names one of
    /// `keyless.identities`.
    pub fn keyless(keyless: Keyless) -> Requirement {
        Requirement {
            keys: Vec::new(),
            keyless: Some(keyless),
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

/// What keyless signatures are checked against, all supplied by the administrator (e.g. from
/// Sigstore's `trusted_root.json`, or a private Fulcio and Rekor): nothing is fetched.
#[derive(Debug, Clone, Default)]
pub struct TrustRoot {
    /// DER certificates of the certificate authorities (roots and intermediates) a signing
    /// certificate must chain to.
    pub(crate) certificate_authorities: Vec<Vec<u8>>,
    /// Keys of the transparency logs whose signed entry timestamps count.
    pub(crate) rekor_keys: Vec<PublicKey>,
    /// Keys of the certificate-transparency logs: when any are given, a signing certificate
    /// needs an embedded SCT of one of them; when none are, SCTs are not required.
    pub(crate) ct_log_keys: Vec<PublicKey>,
}

impl TrustRoot {
    /// A trust root from PEM: `certificate_authorities` holds one or more `CERTIFICATE`
    /// blocks, `rekor_keys` and `ct_log_keys` one or more `PUBLIC KEY` blocks (`ct_log_keys`
    /// may be empty).
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
            x509_parser::certificate::X509Certificate::from_der(&block.contents).map_err(
                |error| TrustError::InvalidKey {
                    name: name.clone(),
                    message: format!("not an X.509 certificate: {error}"),
                },
            )?;
            authorities.push(block.contents);
        }
        if authorities.len() > MAX_TRUST_ROOT_CERTIFICATES {
            return Err(TrustError::InvalidKey {
                name: "certificate authorities".to_string(),
                message: format!(
                    "{} certificates, over the limit of {MAX_TRUST_ROOT_CERTIFICATES} (MAX_TRUST_ROOT_CERTIFICATES)",
                    authorities.len()
                ),
            });
        }
        let rekor_keys = keys_from_pem_list(rekor_keys, "Rekor keys")?;
        let ct_log_keys = if ct_log_keys.trim().is_empty() {
            Vec::new()
        } else {
            keys_from_pem_list(ct_log_keys, "CT log keys")?
        };
        Ok(TrustRoot {
            certificate_authorities: authorities,
            rekor_keys,
            ct_log_keys,
        })
    }

    /// How many CT log keys it holds.
    pub fn ct_log_key_count(&self) -> usize {
        self.ct_log_keys.len()
    }
}
