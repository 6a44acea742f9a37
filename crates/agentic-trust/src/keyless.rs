//! Keyless signatures, verified offline: the signing certificate's chain to the trust root,
//! its identity, its signed certificate timestamps when the trust root names CT logs, and
//! the Rekor signed entry timestamp (SET) that proves when it signed.
//!
//! A valid SET only proves that Rekor logged *some* entry at that time. The entry's body is
//! therefore compared with what is being verified (the signed bytes' hash, the signature, the
//! certificate): a SET lifted from another signature's log entry never counts. sigstore-rs's
//! bundle verifier skipped that comparison (sigstore-rs#285), so it is done here by hand, for
//! both layouts: the legacy tag's annotations and a Sigstore bundle's `tlogEntries`.

mod sct;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rustls_pki_types::{CertificateDer, UnixTime};
use serde::{Deserialize, Deserializer};
use sha2::{Digest as _, Sha256};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer as _;
use x509_parser::time::ASN1Time;

use crate::Signer;
use crate::limits::{MAX_CHAIN_LENGTH, MAX_SIGNATURES};
use crate::refusal::{Refusal, RefusalReason};
use crate::requirement::{Keyless, TrustRoot};

/// Fulcio's OIDC issuer extension (a DER UTF8String), and its older raw-string form.
const ISSUER_V2: &str = "1.3.6.1.4.1.57264.1.8";
const ISSUER_V1: &str = "1.3.6.1.4.1.57264.1.1";

/// The Rekor bundle cosign stores in the `dev.sigstore.cosign/bundle` annotation.
#[derive(Deserialize)]
struct RekorBundle {
    #[serde(rename = "SignedEntryTimestamp")]
    signed_entry_timestamp: String,
    #[serde(rename = "Payload")]
    payload: RekorPayload,
}

#[derive(Deserialize)]
struct RekorPayload {
    body: String,
    #[serde(rename = "integratedTime")]
    integrated_time: i64,
    #[serde(rename = "logIndex")]
    log_index: i64,
    #[serde(rename = "logID")]
    log_id: String,
}

/// One entry of a Sigstore bundle's `verificationMaterial.tlogEntries` (protobuf JSON:
/// 64-bit integers are strings, bytes are base64).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BundleLogEntry {
    #[serde(deserialize_with = "int64")]
    log_index: i64,
    log_id: BundleLogId,
    #[serde(deserialize_with = "int64")]
    integrated_time: i64,
    inclusion_promise: Option<InclusionPromise>,
    canonicalized_body: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BundleLogId {
    key_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InclusionPromise {
    signed_entry_timestamp: String,
}

/// A protobuf JSON int64: a string, or a number from writers that do not quote it.
fn int64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int64 {
        Text(String),
        Number(i64),
    }
    match Int64::deserialize(deserializer)? {
        Int64::Text(text) => text.parse().map_err(serde::de::Error::custom),
        Int64::Number(number) => Ok(number),
    }
}

/// A transparency-log entry and Rekor's SET over it, from either layout.
struct LogEntry {
    /// The entry body, base64 as logged: the SET covers this text.
    body: String,
    integrated_time: i64,
    log_index: i64,
    /// Hex SHA-256 of the log's key (its DER SubjectPublicKeyInfo).
    log_id: String,
    signed_entry_timestamp: Vec<u8>,
}

impl BundleLogEntry {
    fn log_entry(&self) -> Result<LogEntry, Refusal> {
        let promise = self.inclusion_promise.as_ref().ok_or_else(|| Refusal::new(RefusalReason::LogEntryInvalid,
            "the bundle's log entry has no inclusion promise (a Rekor signed entry timestamp), the only proof of time verified offline",
        ))?;
        let log_id = STANDARD.decode(&self.log_id.key_id).map_err(|error| {
            Refusal::new(
                RefusalReason::Malformed,
                format!("the bundle's log id is not base64: {error}"),
            )
        })?;
        let signed_entry_timestamp =
            STANDARD
                .decode(&promise.signed_entry_timestamp)
                .map_err(|error| {
                    Refusal::new(
                        RefusalReason::Malformed,
                        format!("the signed entry timestamp is not base64: {error}"),
                    )
                })?;
        Ok(LogEntry {
            body: self.canonicalized_body.clone(),
            integrated_time: self.integrated_time,
            log_index: self.log_index,
            log_id: hex::encode(log_id),
            signed_entry_timestamp,
        })
    }
}

/// What the signing certificate's key signed, which decides the kind of log entry that
/// must record it.
pub(crate) enum Signed<'a> {
    /// Bytes signed directly (a legacy simple-signing payload, a bundle's message
    /// signature): logged as a `hashedrekord` of their SHA-256.
    Message {
        message: &'a [u8],
        signature: &'a [u8],
    },
    /// A DSSE envelope's statement: the key signed its pre-authentication encoding
    /// `encoded`; logged as a `dsse` entry of the statement's SHA-256.
    Envelope {
        statement: &'a [u8],
        encoded: &'a [u8],
        signature: &'a [u8],
    },
}

impl Signed<'_> {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Signed::Message { message, .. } => message,
            Signed::Envelope { encoded, .. } => encoded,
        }
    }

    pub(crate) fn signature(&self) -> &[u8] {
        match self {
            Signed::Message { signature, .. } | Signed::Envelope { signature, .. } => signature,
        }
    }
}

/// A keyless signature in the legacy tag layout: `certificate_pem` (the signer's leaf),
/// `chain_pem` (intermediates, optional), `rekor_bundle` (the annotation's JSON).
pub(crate) fn verify_legacy_keyless(
    keyless: &Keyless,
    payload: &[u8],
    signature: &[u8],
    certificate_pem: &str,
    chain_pem: Option<&str>,
    rekor_bundle: Option<&str>,
) -> Result<Signer, Refusal> {
    let leaf_der = single_certificate(certificate_pem)?;
    let chain = match chain_pem {
        Some(pem) if !pem.trim().is_empty() => certificates(pem)?,
        _ => Vec::new(),
    };
    let bundle_json = rekor_bundle.ok_or_else(|| {
        Refusal::new(
            RefusalReason::LogEntryInvalid,
            "a keyless signature needs a Rekor bundle (none was attached)",
        )
    })?;
    let bundle: RekorBundle = serde_json::from_str(bundle_json).map_err(|error| {
        Refusal::new(
            RefusalReason::Malformed,
            format!("the Rekor bundle is not valid JSON: {error}"),
        )
    })?;
    let entry = LogEntry {
        signed_entry_timestamp: STANDARD.decode(&bundle.signed_entry_timestamp).map_err(
            |error| {
                Refusal::new(
                    RefusalReason::Malformed,
                    format!("the signed entry timestamp is not base64: {error}"),
                )
            },
        )?,
        body: bundle.payload.body,
        integrated_time: bundle.payload.integrated_time,
        log_index: bundle.payload.log_index,
        log_id: bundle.payload.log_id,
    };
    let signed = Signed::Message {
        message: payload,
        signature,
    };
    verify_keyless(keyless, &signed, &leaf_der, &chain, &[entry])
}

/// A keyless signature in a Sigstore bundle: `certificates` is the leaf (DER) then any
/// intermediates, `tlog_entries` the bundle's log entries (one that counts is enough).
pub(crate) fn verify_bundle_keyless(
    keyless: &Keyless,
    signed: &Signed<'_>,
    certificates: &[Vec<u8>],
    tlog_entries: &[BundleLogEntry],
) -> Result<Signer, Refusal> {
    let [leaf_der, chain @ ..] = certificates else {
        return Err(Refusal::new(
            RefusalReason::Malformed,
            "the bundle holds no signing certificate",
        ));
    };
    if tlog_entries.len() > MAX_SIGNATURES {
        return Err(Refusal::new(
            RefusalReason::OverLimit,
            format!(
                "the bundle holds {} log entries, over the limit of {MAX_SIGNATURES} (MAX_SIGNATURES)",
                tlog_entries.len()
            ),
        ));
    }
    let entries = tlog_entries
        .iter()
        .map(BundleLogEntry::log_entry)
        .collect::<Result<Vec<_>, _>>()?;
    verify_keyless(keyless, signed, leaf_der, chain, &entries)
}

/// The checks of both layouts: the certificate's key made the signature; a log entry's SET
/// verifies and the entry records this signature, which dates it; the chain to the trust
/// root held at that date; the trust root's CT logs saw the certificate; it is a code-signing
/// certificate of an accepted identity. Returns the signer, or why it does not count.
fn verify_keyless(
    keyless: &Keyless,
    signed: &Signed<'_>,
    leaf_der: &[u8],
    chain_ders: &[Vec<u8>],
    entries: &[LogEntry],
) -> Result<Signer, Refusal> {
    let (_, leaf) = X509Certificate::from_der(leaf_der).map_err(|error| {
        Refusal::new(
            RefusalReason::Malformed,
            format!("the signing certificate is not X.509: {error}"),
        )
    })?;
    let leaf_key = crate::keys::PublicKey::from_spki(leaf.public_key(), leaf.public_key().raw)
        .map_err(|error| {
            Refusal::new(
                RefusalReason::Malformed,
                format!("the signing certificate's key: {error}"),
            )
        })?;
    if !leaf_key.verifies(signed.bytes(), signed.signature()) {
        return Err(Refusal::new(
            RefusalReason::SignatureMismatch,
            "the signature does not verify with the signing certificate's key",
        ));
    }

    // The time of signing comes from the log, once its SET verifies: never from the payload.
    let mut integrated_time = Err(Refusal::new(
        RefusalReason::LogEntryInvalid,
        "a keyless signature needs a Rekor log entry (none was attached)",
    ));
    for entry in entries {
        integrated_time = verify_signed_entry_timestamp(&keyless.trust_root, entry)
            .and_then(|()| check_log_entry_matches(&entry.body, signed, leaf_der))
            .map(|()| entry.integrated_time);
        if integrated_time.is_ok() {
            break;
        }
    }
    let signed_at = ASN1Time::from_timestamp(integrated_time?).map_err(|error| {
        Refusal::new(
            RefusalReason::Malformed,
            format!("the log's integrated time is out of range: {error}"),
        )
    })?;

    let issuer_key = verify_chain(leaf_der, &leaf, chain_ders, &keyless.trust_root, signed_at)?;
    if !keyless.trust_root.ct_log_keys.is_empty() {
        sct::check_embedded_timestamps(&leaf, issuer_key, &keyless.trust_root.ct_log_keys)?;
    }

    let (issuer, subject) = identity_of(&leaf)?;
    if keyless
        .identities
        .iter()
        .any(|identity| identity.issuer.matches(&issuer) && identity.subject.matches(&subject))
    {
        Ok(Signer::Identity { issuer, subject })
    } else {
        let wanted: Vec<String> = keyless
            .identities
            .iter()
            .map(|identity| format!("issuer {} subject {}", identity.issuer, identity.subject))
            .collect();
        Err(Refusal::new(
            RefusalReason::IdentityMismatch,
            format!(
                "the certificate names issuer {issuer:?} and subject {subject:?}, which match none of the accepted identities ({})",
                wanted.join("; ")
            ),
        ))
    }
}

/// The SET is Rekor's signature over the canonical JSON (RFC 8785: sorted keys, no spaces)
/// of the entry's body, integrated time, log id and index, by the key whose SPKI digest is
/// the log id.
fn verify_signed_entry_timestamp(trust_root: &TrustRoot, entry: &LogEntry) -> Result<(), Refusal> {
    let named: Vec<_> = trust_root
        .rekor_keys
        .iter()
        .filter(|key| key.item.fingerprint().strip_prefix("sha256:") == Some(entry.log_id.as_str()))
        .collect();
    if named.is_empty() {
        return Err(Refusal::new(
            RefusalReason::LogEntryInvalid,
            format!(
                "the entry was logged by Rekor log {:?}, whose key is not in the trust root",
                entry.log_id
            ),
        ));
    }
    let key = named
        .iter()
        .find(|key| key.valid.contains(entry.integrated_time))
        .map(|key| &key.item)
        .ok_or_else(|| {
            Refusal::new(RefusalReason::LogEntryInvalid, format!(
                "the entry was logged by Rekor log {:?} at {}, outside the window its key has in the trust root",
                entry.log_id, entry.integrated_time
            ))
        })?;
    let canonical = format!(
        "{{\"body\":{},\"integratedTime\":{},\"logID\":{},\"logIndex\":{}}}",
        json_string(&entry.body),
        entry.integrated_time,
        json_string(&entry.log_id),
        entry.log_index
    );
    if key.verifies(canonical.as_bytes(), &entry.signed_entry_timestamp) {
        Ok(())
    } else {
        Err(Refusal::new(
            RefusalReason::LogEntryInvalid,
            "the Rekor signed entry timestamp does not verify with the trust root's Rekor key (a forged or altered log entry)",
        ))
    }
}

fn json_string(value: &str) -> String {
    serde_json::Value::String(value.to_string()).to_string()
}

/// The body of a Rekor entry: its kind decides the shape of `spec`.
#[derive(Deserialize)]
struct RekorEntry {
    kind: String,
    spec: serde_json::Value,
}

/// A `hashedrekord` entry: the SHA-256 of the signed bytes, the signature, the certificate.
#[derive(Deserialize)]
struct HashedRekordSpec {
    data: HashedRekordData,
    signature: HashedRekordSignature,
}

#[derive(Deserialize)]
struct HashedRekordData {
    hash: LoggedHash,
}

#[derive(Deserialize)]
struct LoggedHash {
    algorithm: String,
    value: String,
}

#[derive(Deserialize)]
struct HashedRekordSignature {
    content: String,
    #[serde(rename = "publicKey")]
    public_key: HashedRekordKey,
}

#[derive(Deserialize)]
struct HashedRekordKey {
    content: String,
}

/// A `dsse` entry: the SHA-256 of the envelope's payload and each signature with the
/// certificate (`verifier`, base64 PEM) that made it.
#[derive(Deserialize)]
struct DsseSpec {
    #[serde(rename = "payloadHash")]
    payload_hash: LoggedHash,
    signatures: Vec<DsseLoggedSignature>,
}

#[derive(Deserialize)]
struct DsseLoggedSignature {
    signature: String,
    verifier: String,
}

/// The logged entry must be this signature: the hash of what was signed, the signature
/// bytes and the signing certificate.
fn check_log_entry_matches(
    body_base64: &str,
    signed: &Signed<'_>,
    leaf_der: &[u8],
) -> Result<(), Refusal> {
    let mismatch = |what: &str| {
        Refusal::new(
            RefusalReason::LogEntryInvalid,
            format!("the Rekor entry logs another {what} than this signature's"),
        )
    };
    let body = STANDARD.decode(body_base64).map_err(|error| {
        Refusal::new(
            RefusalReason::LogEntryInvalid,
            format!("the Rekor entry body is not base64: {error}"),
        )
    })?;
    let entry: RekorEntry = serde_json::from_slice(&body).map_err(|error| {
        Refusal::new(
            RefusalReason::LogEntryInvalid,
            format!("the Rekor entry body is not a Rekor entry: {error}"),
        )
    })?;
    let same_hash = |logged: &LoggedHash, bytes: &[u8]| {
        logged.algorithm == "sha256" && logged.value == hex::encode(Sha256::digest(bytes))
    };
    let same_signature =
        |logged: &str| STANDARD.decode(logged.trim()).ok().as_deref() == Some(signed.signature());
    let same_certificate = |logged_base64_pem: &str| {
        STANDARD
            .decode(logged_base64_pem)
            .ok()
            .and_then(|pem| String::from_utf8(pem).ok())
            .and_then(|pem| single_certificate(&pem).ok())
            .as_deref()
            == Some(leaf_der)
    };
    let unreadable = |error: serde_json::Error| {
        Refusal::new(
            RefusalReason::LogEntryInvalid,
            format!("the Rekor {} entry is unreadable: {error}", entry.kind),
        )
    };
    match (entry.kind.as_str(), signed) {
        ("hashedrekord", Signed::Message { message, .. }) => {
            let spec: HashedRekordSpec =
                serde_json::from_value(entry.spec.clone()).map_err(unreadable)?;
            if !same_hash(&spec.data.hash, message) {
                return Err(mismatch("payload"));
            }
            if !same_signature(&spec.signature.content) {
                return Err(mismatch("signature"));
            }
            if !same_certificate(&spec.signature.public_key.content) {
                return Err(mismatch("certificate"));
            }
            Ok(())
        }
        ("dsse", Signed::Envelope { statement, .. }) => {
            let spec: DsseSpec = serde_json::from_value(entry.spec.clone()).map_err(unreadable)?;
            if !same_hash(&spec.payload_hash, statement) {
                return Err(mismatch("statement"));
            }
            let mut logged = spec
                .signatures
                .iter()
                .filter(|logged| same_signature(&logged.signature));
            match logged.next() {
                Some(logged) if same_certificate(&logged.verifier) => Ok(()),
                Some(_) => Err(mismatch("certificate")),
                None => Err(mismatch("signature")),
            }
        }
        (kind, Signed::Message { .. }) => Err(Refusal::new(
            RefusalReason::LogEntryInvalid,
            format!(
                "the Rekor entry is a {kind:?}, not the hashedrekord of a signature over bytes"
            ),
        )),
        (kind, Signed::Envelope { .. }) => Err(Refusal::new(
            RefusalReason::LogEntryInvalid,
            format!("the Rekor entry is a {kind:?}, not the dsse entry of a DSSE envelope"),
        )),
    }
}

/// Code signing (`id-kp-codeSigning`).
const CODE_SIGNING: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.3");

/// The signature algorithms a certificate path may use: those a [`PublicKey`] verifies.
///
/// [`PublicKey`]: crate::keys::PublicKey
const PATH_ALGORITHMS: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm] = &[
    webpki::ring::ECDSA_P256_SHA256,
    webpki::ring::ECDSA_P256_SHA384,
    webpki::ring::ECDSA_P384_SHA256,
    webpki::ring::ECDSA_P384_SHA384,
    webpki::ring::ED25519,
    webpki::ring::RSA_PKCS1_2048_8192_SHA256,
    webpki::ring::RSA_PKCS1_2048_8192_SHA384,
    webpki::ring::RSA_PKCS1_2048_8192_SHA512,
];

/// Validates the path from `leaf` (DER `leaf_der`) through `chain_ders` to a certificate
/// authority of the trust root, as of `signed_at` (the logged time): at most
/// [`MAX_CHAIN_LENGTH`] certificates, each one's signature, validity period, basic
/// constraints and path length, key usage, name constraints and critical extensions checked
/// by rustls's path validator, and the leaf for code signing. Only the trust root's
/// authorities valid at `signed_at` are anchors. Returns the DER SubjectPublicKeyInfo of the
/// leaf's issuer (what its signed certificate timestamps name).
fn verify_chain(
    leaf_der: &[u8],
    leaf: &X509Certificate<'_>,
    chain_ders: &[Vec<u8>],
    trust_root: &TrustRoot,
    signed_at: ASN1Time,
) -> Result<Vec<u8>, Refusal> {
    if !leaf.validity().is_valid_at(signed_at) {
        return Err(Refusal::new(
            RefusalReason::UntrustedCertificate,
            format!(
                "the signing certificate was not valid at the logged time {signed_at} (valid {} to {})",
                leaf.validity().not_before,
                leaf.validity().not_after
            ),
        ));
    }
    // The path validator asks code signing of every certificate that lists usages; a
    // signing certificate must list it.
    let code_signing = leaf
        .extended_key_usage()
        .ok()
        .flatten()
        .is_some_and(|usage| usage.value.code_signing);
    if !code_signing {
        return Err(Refusal::new(
            RefusalReason::UntrustedCertificate,
            "the signing certificate is not for code signing (extended key usage)",
        ));
    }
    if chain_ders.len() + 1 > MAX_CHAIN_LENGTH {
        return Err(Refusal::new(
            RefusalReason::OverLimit,
            format!(
                "the signing certificate's chain is longer than {MAX_CHAIN_LENGTH} certificates (MAX_CHAIN_LENGTH)"
            ),
        ));
    }
    fn parse(der: &[u8]) -> Option<X509Certificate<'_>> {
        X509Certificate::from_der(der).map(|(_, cert)| cert).ok()
    }
    // The trust root's self-issued authorities are the anchors; its other authorities (an
    // intermediate such as Fulcio's) are path certificates, so that their own constraints
    // (path length, name constraints, usages) are checked too. Only those in their window.
    let mut anchors_der: Vec<CertificateDer<'_>> = Vec::new();
    let mut intermediates: Vec<CertificateDer<'_>> = chain_ders
        .iter()
        .map(|der| CertificateDer::from(der.as_slice()))
        .collect();
    for authority in &trust_root.certificate_authorities {
        if !authority.valid.contains(signed_at.timestamp()) {
            continue;
        }
        let Some(cert) = parse(&authority.item) else {
            continue;
        };
        let der = CertificateDer::from(authority.item.as_slice());
        if cert.subject().as_raw() == cert.issuer().as_raw() {
            if cert.validity().is_valid_at(signed_at) {
                anchors_der.push(der);
            }
        } else {
            intermediates.push(der);
        }
    }
    let anchors: Vec<rustls_pki_types::TrustAnchor<'_>> = anchors_der
        .iter()
        .filter_map(|der| webpki::anchor_from_trusted_cert(der).ok())
        .collect();
    let leaf_cert = CertificateDer::from(leaf_der);
    let end_entity = webpki::EndEntityCert::try_from(&leaf_cert)
        .map_err(|error| path_refusal(&error, signed_at))?;
    let seconds = u64::try_from(signed_at.timestamp()).unwrap_or_default();
    let path = end_entity
        .verify_for_usage(
            PATH_ALGORITHMS,
            &anchors,
            &intermediates,
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(seconds)),
            webpki::KeyUsage::required_if_present(CODE_SIGNING.as_bytes()),
            None,
            None,
        )
        .map_err(|error| path_refusal(&error, signed_at))?;
    // The validator leaves key usage to the caller: an issuer that lists its usages must
    // list certificate signing.
    for issuer in path.intermediate_certificates() {
        let der = issuer.der();
        let Some(cert) = parse(der.as_ref()) else {
            continue;
        };
        if let Ok(Some(usage)) = cert.key_usage()
            && !usage.value.key_cert_sign()
        {
            return Err(Refusal::new(
                RefusalReason::UntrustedCertificate,
                format!(
                    "the signing certificate is refused: {} issued a certificate but is not allowed to sign certificates (key usage)",
                    cert.subject()
                ),
            ));
        }
    }
    Ok(path.issuer_spki().as_ref().to_vec())
}

/// Why a certificate path does not hold, in the words of the check it failed.
fn path_refusal(error: &webpki::Error, signed_at: ASN1Time) -> Refusal {
    use webpki::Error;
    let why = match error {
        Error::UnknownIssuer => format!(
            "it does not chain to a certificate authority of the trust root valid at the logged time {signed_at}"
        ),
        Error::CertExpired { .. } | Error::CertNotValidYet { .. } => {
            format!("a certificate of its chain was not valid at the logged time {signed_at}")
        }
        Error::EndEntityUsedAsCa => {
            "a certificate that issued another is not a certificate authority (basic constraints)"
                .to_string()
        }
        Error::CaUsedAsEndEntity => "it is a certificate authority".to_string(),
        Error::PathLenConstraintViolated => {
            "the chain is longer than an authority's path length constraint allows".to_string()
        }
        Error::NameConstraintViolation => "it breaks an authority's name constraints".to_string(),
        Error::UnsupportedCriticalExtension => {
            "a certificate of its chain has a critical extension this verifier does not understand"
                .to_string()
        }
        Error::RequiredEkuNotFoundContext(_) => {
            "a certificate of its chain is not for code signing (extended key usage)".to_string()
        }
        other => format!("its chain does not hold: {other}"),
    };
    Refusal::new(
        RefusalReason::UntrustedCertificate,
        format!("the signing certificate is refused: {why}"),
    )
}

/// The issuer (Fulcio's extension) and subject (email or URI alternative name).
fn identity_of(leaf: &X509Certificate<'_>) -> Result<(String, String), Refusal> {
    let mut issuer = None;
    for extension in leaf.extensions() {
        match extension.oid.to_id_string().as_str() {
            ISSUER_V2 => {
                let (_, value) = x509_parser::der_parser::der::parse_der_utf8string(
                    extension.value,
                )
                .map_err(|error| {
                    Refusal::new(
                        RefusalReason::Malformed,
                        format!("the issuer extension is not a UTF8String: {error}"),
                    )
                })?;
                let text = value.as_str().map_err(|error| {
                    Refusal::new(
                        RefusalReason::Malformed,
                        format!("the issuer extension: {error}"),
                    )
                })?;
                issuer = Some(text.to_string());
            }
            ISSUER_V1 if issuer.is_none() => {
                issuer = Some(String::from_utf8(extension.value.to_vec()).map_err(|_| {
                    Refusal::new(
                        RefusalReason::Malformed,
                        "the issuer extension is not UTF-8",
                    )
                })?);
            }
            _ => {}
        }
    }
    let issuer = issuer.ok_or_else(|| {
        Refusal::new(
            RefusalReason::IdentityMismatch,
            "the signing certificate names no OIDC issuer (extension 1.3.6.1.4.1.57264.1.8)",
        )
    })?;
    let names = leaf
        .subject_alternative_name()
        .map_err(|error| {
            Refusal::new(
                RefusalReason::Malformed,
                format!("the subject alternative name is unreadable: {error}"),
            )
        })?
        .ok_or_else(|| {
            Refusal::new(
                RefusalReason::IdentityMismatch,
                "the signing certificate has no subject alternative name",
            )
        })?;
    let subject = names
        .value
        .general_names
        .iter()
        .find_map(|name| match name {
            GeneralName::RFC822Name(email) => Some(email.to_string()),
            GeneralName::URI(uri) => Some(uri.to_string()),
            _ => None,
        })
        .ok_or_else(|| {
            Refusal::new(
                RefusalReason::IdentityMismatch,
                "the signing certificate names no email or URI subject",
            )
        })?;
    Ok((issuer, subject))
}

/// The DER of the one `CERTIFICATE` block of `pem`.
fn single_certificate(pem: &str) -> Result<Vec<u8>, Refusal> {
    let mut certificates = certificates(pem)?;
    if certificates.len() != 1 {
        return Err(Refusal::new(
            RefusalReason::Malformed,
            format!(
                "expected one signing certificate, found {}",
                certificates.len()
            ),
        ));
    }
    Ok(certificates.remove(0))
}

/// The DER of every `CERTIFICATE` block of `pem`, at most [`MAX_CHAIN_LENGTH`].
fn certificates(pem: &str) -> Result<Vec<Vec<u8>>, Refusal> {
    let mut found = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()) {
        let block = block.map_err(|error| {
            Refusal::new(
                RefusalReason::Malformed,
                format!("unreadable certificate PEM: {error}"),
            )
        })?;
        if block.label != "CERTIFICATE" {
            return Err(Refusal::new(
                RefusalReason::Malformed,
                format!(
                    "a {:?} PEM block where a certificate was expected",
                    block.label
                ),
            ));
        }
        if found.len() == MAX_CHAIN_LENGTH {
            return Err(Refusal::new(
                RefusalReason::Malformed,
                format!("more than {MAX_CHAIN_LENGTH} certificates (MAX_CHAIN_LENGTH)"),
            ));
        }
        found.push(block.contents);
    }
    if found.is_empty() {
        return Err(Refusal::new(
            RefusalReason::Malformed,
            "no certificate found",
        ));
    }
    Ok(found)
}

#[cfg(test)]
mod tests;
