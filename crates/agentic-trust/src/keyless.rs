//! Keyless signatures, verified offline: the signing certificate's chain to the trust root,
//! its identity, and the Rekor signed entry timestamp (SET) that proves when it signed.
//!
//! A valid SET only proves that Rekor logged *some* entry at that time. The entry's body is
//! therefore compared with what is being verified (the payload's hash, the signature, the
//! certificate): a SET lifted from another signature's log entry never counts. sigstore-rs's
//! bundle verifier skipped that comparison (sigstore-rs#285), so it is done here by hand.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer as _;
use x509_parser::time::ASN1Time;

use crate::Signer;
use crate::limits::MAX_CHAIN_LENGTH;
use crate::requirement::{Keyless, TrustRoot};

/// Fulcio's OIDC issuer extension (a DER UTF8String), and its older raw-string form.
const ISSUER_V2: &str = "1.3.6.1.4.1.57264.1.8";
const ISSUER_V1: &str = "1.3.6.1.4.1.57264.1.1";

/// The Rekor bundle cosign stores in the `dev.sigstore.cosign/bundle` annotation.
#[derive(Deserialize)]
pub(crate) struct RekorBundle {
    #[serde(rename = "SignedEntryTimestamp")]
    pub signed_entry_timestamp: String,
    #[serde(rename = "Payload")]
    pub payload: RekorPayload,
}

#[derive(Deserialize)]
pub(crate) struct RekorPayload {
    pub body: String,
    #[serde(rename = "integratedTime")]
    pub integrated_time: i64,
    #[serde(rename = "logIndex")]
    pub log_index: i64,
    #[serde(rename = "logID")]
    pub log_id: String,
}

/// Verifies a keyless signature of `payload`: `certificate_pem` (the signer's leaf),
/// `chain_pem` (intermediates, optional), `rekor_bundle` (the annotation's JSON). Returns
/// the signer's identity, or why it does not count.
pub(crate) fn verify_keyless(
    keyless: &Keyless,
    payload: &[u8],
    signature: &[u8],
    certificate_pem: &str,
    chain_pem: Option<&str>,
    rekor_bundle: Option<&str>,
) -> Result<Signer, String> {
    let leaf_der = single_certificate(certificate_pem)?;
    let (_, leaf) = X509Certificate::from_der(&leaf_der)
        .map_err(|error| format!("the signing certificate is not X.509: {error}"))?;
    let leaf_key = crate::keys::PublicKey::from_spki(leaf.public_key(), leaf.public_key().raw)
        .map_err(|message| format!("the signing certificate's key: {message}"))?;
    if !leaf_key.verifies(payload, signature) {
        return Err("the signature does not verify with the signing certificate's key".to_string());
    }

    // The time of signing comes from the log, once its SET verifies: never from the payload.
    let bundle_json =
        rekor_bundle.ok_or("a keyless signature needs a Rekor bundle (none was attached)")?;
    let bundle: RekorBundle = serde_json::from_str(bundle_json)
        .map_err(|error| format!("the Rekor bundle is not valid JSON: {error}"))?;
    verify_signed_entry_timestamp(&keyless.trust_root, &bundle)?;
    check_log_entry_matches(&bundle.payload.body, payload, signature, &leaf_der)?;
    let signed_at = ASN1Time::from_timestamp(bundle.payload.integrated_time)
        .map_err(|error| format!("the log's integrated time is out of range: {error}"))?;

    let chain = match chain_pem {
        Some(pem) if !pem.trim().is_empty() => certificates(pem)?,
        _ => Vec::new(),
    };
    verify_chain(&leaf, &chain, &keyless.trust_root, signed_at)?;
    check_leaf_usage(&leaf)?;

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
        Err(format!(
            "the certificate names issuer {issuer:?} and subject {subject:?}, which match none of the accepted identities ({})",
            wanted.join("; ")
        ))
    }
}

/// The SET is Rekor's signature over the canonical JSON (RFC 8785: sorted keys, no spaces)
/// of the entry's body, integrated time, log id and index, by the key whose SPKI digest is
/// the log id.
pub(crate) fn verify_signed_entry_timestamp(
    trust_root: &TrustRoot,
    bundle: &RekorBundle,
) -> Result<(), String> {
    let payload = &bundle.payload;
    let key = trust_root
        .rekor_keys
        .iter()
        .find(|key| key.fingerprint().strip_prefix("sha256:") == Some(payload.log_id.as_str()))
        .ok_or_else(|| {
            format!(
                "the entry was logged by Rekor log {:?}, whose key is not in the trust root",
                payload.log_id
            )
        })?;
    let canonical = format!(
        "{{\"body\":{},\"integratedTime\":{},\"logID\":{},\"logIndex\":{}}}",
        json_string(&payload.body),
        payload.integrated_time,
        json_string(&payload.log_id),
        payload.log_index
    );
    let set = STANDARD
        .decode(&bundle.signed_entry_timestamp)
        .map_err(|error| format!("the signed entry timestamp is not base64: {error}"))?;
    if key.verifies(canonical.as_bytes(), &set) {
        Ok(())
    } else {
        Err("the Rekor signed entry timestamp does not verify with the trust root's Rekor key (a forged or altered log entry)".to_string())
    }
}

fn json_string(value: &str) -> String {
    serde_json::Value::String(value.to_string()).to_string()
}

/// The body of a `hashedrekord` entry: what Rekor logged.
#[derive(Deserialize)]
struct HashedRekord {
    kind: String,
    spec: HashedRekordSpec,
}

#[derive(Deserialize)]
struct HashedRekordSpec {
    data: HashedRekordData,
    signature: HashedRekordSignature,
}

#[derive(Deserialize)]
struct HashedRekordData {
    hash: HashedRekordHash,
}

#[derive(Deserialize)]
struct HashedRekordHash {
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

/// The logged entry must be this signature: the payload's SHA-256, the signature bytes and
/// the signing certificate.
fn check_log_entry_matches(
    body_base64: &str,
    payload: &[u8],
    signature: &[u8],
    leaf_der: &[u8],
) -> Result<(), String> {
    let mismatch =
        |what: &str| format!("the Rekor entry logs another {what} than this signature's");
    let body = STANDARD
        .decode(body_base64)
        .map_err(|error| format!("the Rekor entry body is not base64: {error}"))?;
    let entry: HashedRekord = serde_json::from_slice(&body)
        .map_err(|error| format!("the Rekor entry body is not a hashedrekord entry: {error}"))?;
    if entry.kind != "hashedrekord" {
        return Err(format!(
            "the Rekor entry is a {:?}, not a hashedrekord",
            entry.kind
        ));
    }
    let hash = &entry.spec.data.hash;
    if hash.algorithm != "sha256" || hash.value != hex::encode(Sha256::digest(payload)) {
        return Err(mismatch("payload"));
    }
    if STANDARD
        .decode(&entry.spec.signature.content)
        .ok()
        .as_deref()
        != Some(signature)
    {
        return Err(mismatch("signature"));
    }
    let logged_pem = STANDARD
        .decode(&entry.spec.signature.public_key.content)
        .map_err(|_| mismatch("certificate"))?;
    let logged = std::str::from_utf8(&logged_pem)
        .ok()
        .and_then(|pem| single_certificate(pem).ok());
    if logged.as_deref() != Some(leaf_der) {
        return Err(mismatch("certificate"));
    }
    Ok(())
}

/// Walks from `leaf` up through `chain` to a certificate authority of the trust root, each
/// link's signature checked and each certificate valid when the log says it signed; at most
/// [`MAX_CHAIN_LENGTH`] certificates.
fn verify_chain(
    leaf: &X509Certificate<'_>,
    chain_ders: &[Vec<u8>],
    trust_root: &TrustRoot,
    signed_at: ASN1Time,
) -> Result<(), String> {
    if !leaf.validity().is_valid_at(signed_at) {
        return Err(format!(
            "the signing certificate was not valid at the logged time {signed_at} (valid {} to {})",
            leaf.validity().not_before,
            leaf.validity().not_after
        ));
    }
    fn parse(der: &[u8]) -> Option<X509Certificate<'_>> {
        X509Certificate::from_der(der).map(|(_, cert)| cert).ok()
    }
    let anchors: Vec<X509Certificate<'_>> = trust_root
        .certificate_authorities
        .iter()
        .filter_map(|der| parse(der))
        .collect();
    let intermediates: Vec<X509Certificate<'_>> =
        chain_ders.iter().filter_map(|der| parse(der)).collect();
    let issued_by = |child: &X509Certificate<'_>, parent: &X509Certificate<'_>| {
        parent.subject().as_raw() == child.issuer().as_raw()
            && parent.is_ca()
            && parent.validity().is_valid_at(signed_at)
            && child.verify_signature(Some(parent.public_key())).is_ok()
    };
    let mut current = leaf.clone();
    // The leaf is the first of the path's certificates.
    for _ in 1..MAX_CHAIN_LENGTH {
        if anchors.iter().any(|anchor| issued_by(&current, anchor)) {
            return Ok(());
        }
        match intermediates
            .iter()
            .find(|parent| issued_by(&current, parent))
        {
            Some(parent) => current = parent.clone(),
            None => {
                return Err(format!(
                    "the signing certificate does not chain to a certificate authority of the trust root (no issuer found for {})",
                    current.subject()
                ));
            }
        }
    }
    Err(format!(
        "the signing certificate's chain is longer than {MAX_CHAIN_LENGTH} certificates (MAX_CHAIN_LENGTH)"
    ))
}

/// A signing certificate must be for code signing and must not be a CA.
fn check_leaf_usage(leaf: &X509Certificate<'_>) -> Result<(), String> {
    if leaf.is_ca() {
        return Err("the signing certificate is a certificate authority".to_string());
    }
    let code_signing = leaf
        .extended_key_usage()
        .ok()
        .flatten()
        .is_some_and(|usage| usage.value.code_signing);
    if !code_signing {
        return Err(
            "the signing certificate is not for code signing (extended key usage)".to_string(),
        );
    }
    Ok(())
}

/// The issuer (Fulcio's extension) and subject (email or URI alternative name).
fn identity_of(leaf: &X509Certificate<'_>) -> Result<(String, String), String> {
    let mut issuer = None;
    for extension in leaf.extensions() {
        match extension.oid.to_id_string().as_str() {
            ISSUER_V2 => {
                let (_, value) = x509_parser::der_parser::der::parse_der_utf8string(
                    extension.value,
                )
                .map_err(|error| format!("the issuer extension is not a UTF8String: {error}"))?;
                let text = value
                    .as_str()
                    .map_err(|error| format!("the issuer extension: {error}"))?;
                issuer = Some(text.to_string());
            }
            ISSUER_V1 if issuer.is_none() => {
                issuer = Some(
                    String::from_utf8(extension.value.to_vec())
                        .map_err(|_| "the issuer extension is not UTF-8".to_string())?,
                );
            }
            _ => {}
        }
    }
    let issuer = issuer
        .ok_or("the signing certificate names no OIDC issuer (extension 1.3.6.1.4.1.57264.1.8)")?;
    let names = leaf
        .subject_alternative_name()
        .map_err(|error| format!("the subject alternative name is unreadable: {error}"))?
        .ok_or("the signing certificate has no subject alternative name")?;
    let subject = names
        .value
        .general_names
        .iter()
        .find_map(|name| match name {
            GeneralName::RFC822Name(email) => Some(email.to_string()),
            GeneralName::URI(uri) => Some(uri.to_string()),
            _ => None,
        })
        .ok_or("the signing certificate names no email or URI subject")?;
    Ok((issuer, subject))
}

/// The DER of the one `CERTIFICATE` block of `pem`.
fn single_certificate(pem: &str) -> Result<Vec<u8>, String> {
    let mut certificates = certificates(pem)?;
    if certificates.len() != 1 {
        return Err(format!(
            "expected one signing certificate, found {}",
            certificates.len()
        ));
    }
    Ok(certificates.remove(0))
}

/// The DER of every `CERTIFICATE` block of `pem`, at most [`MAX_CHAIN_LENGTH`].
fn certificates(pem: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut found = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()) {
        let block = block.map_err(|error| format!("unreadable certificate PEM: {error}"))?;
        if block.label != "CERTIFICATE" {
            return Err(format!(
                "a {:?} PEM block where a certificate was expected",
                block.label
            ));
        }
        if found.len() == MAX_CHAIN_LENGTH {
            return Err(format!(
                "more than {MAX_CHAIN_LENGTH} certificates (MAX_CHAIN_LENGTH)"
            ));
        }
        found.push(block.contents);
    }
    if found.is_empty() {
        return Err("no certificate found".to_string());
    }
    Ok(found)
}
