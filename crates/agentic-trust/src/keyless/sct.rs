//! Signed certificate timestamps (SCTs) embedded in a signing certificate (RFC 6962 §3.3):
//! a certificate-transparency log's promise that it logged the certificate. Checked only
//! when the trust root names CT logs; then one SCT of a named log must verify.
//!
//! The log signed the *precertificate*: the certificate's TBS without the SCT list
//! extension, with the SHA-256 of the issuer's key (RFC 6962 §3.2). That TBS is rebuilt here
//! by removing the extension from the DER. Fulcio issues directly, so the issuer is the CA
//! that signed the leaf; precertificates from a separate precertificate-signing CA are not
//! supported (their SCTs fail to verify, which refuses the certificate).

use sha2::{Digest as _, Sha256};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::ParsedExtension;

use crate::keys::PublicKey;
use crate::requirement::Windowed;

/// The SCT list extension.
const SCT_LIST: &str = "1.3.6.1.4.1.11129.2.4.2";
/// Its OID as DER (tag, length, arcs), to find it in the raw TBS.
const SCT_LIST_OID_DER: &[u8] = &[
    0x06, 0x0a, 0x2b, 0x06, 0x01, 0x04, 0x01, 0xd6, 0x79, 0x02, 0x04, 0x02,
];
/// RFC 6962's SCT version v1, signature type `certificate_timestamp`, entry type
/// `precert_entry`.
const SCT_V1: u8 = 0;
const CERTIFICATE_TIMESTAMP: u8 = 0;
const PRECERT_ENTRY: [u8; 2] = [0, 1];

/// DER tags of a SEQUENCE and of the TBS's `[3] EXPLICIT Extensions`.
const SEQUENCE: u8 = 0x30;
const EXTENSIONS: u8 = 0xa3;

/// One SCT of `leaf` must come from a log of `ct_log_keys` and verify over the
/// precertificate; `issuer_key` is the DER SubjectPublicKeyInfo of the leaf's issuer.
pub(super) fn check_embedded_timestamps(
    leaf: &X509Certificate<'_>,
    issuer_key: Vec<u8>,
    ct_log_keys: &[Windowed<PublicKey>],
) -> Result<(), String> {
    let certificate = format!(
        "the signing certificate (serial {})",
        leaf.raw_serial_as_string()
    );
    let extension = leaf
        .extensions()
        .iter()
        .find(|extension| extension.oid.to_id_string() == SCT_LIST)
        .ok_or_else(|| {
            format!(
                "{certificate} carries no signed certificate timestamp (extension {SCT_LIST}), and the trust root requires one from its CT logs"
            )
        })?;
    let ParsedExtension::SCT(timestamps) = extension.parsed_extension() else {
        return Err(format!(
            "{certificate}: its signed certificate timestamp list is unreadable"
        ));
    };
    let tbs = tbs_without_sct_list(leaf.tbs_certificate.as_ref())
        .map_err(|why| format!("{certificate}: {why}"))?;
    let issuer_key_hash = Sha256::digest(issuer_key);
    let mut refusals = Vec::new();
    for timestamp in timestamps {
        let log_id = hex::encode(timestamp.id.key_id);
        let named: Vec<&Windowed<PublicKey>> = ct_log_keys
            .iter()
            .filter(|key| key.item.fingerprint().strip_prefix("sha256:") == Some(log_id.as_str()))
            .collect();
        if named.is_empty() {
            refusals.push(format!("CT log {log_id} is not in the trust root"));
            continue;
        }
        // SCT timestamps are milliseconds since the epoch.
        let stamped = i64::try_from(timestamp.timestamp / 1000).unwrap_or(i64::MAX);
        let Some(key) = named
            .iter()
            .find(|key| key.valid.contains(stamped))
            .map(|key| &key.item)
        else {
            refusals.push(format!(
                "the SCT of CT log {log_id} is stamped {stamped}, outside the window its key has in the trust root"
            ));
            continue;
        };
        let signature = &timestamp.signature;
        if timestamp.version.0 != SCT_V1
            || (signature.hash_alg_id, signature.sign_alg_id) != key.tls_algorithms()
        {
            refusals.push(format!(
                "the SCT of CT log {log_id} is version {} signed with algorithms ({}, {}), not a v1 SCT with its key's ({}, {})",
                timestamp.version.0,
                signature.hash_alg_id,
                signature.sign_alg_id,
                key.tls_algorithms().0,
                key.tls_algorithms().1
            ));
            continue;
        }
        let Some(signed) = precertificate_timestamp(
            timestamp.timestamp,
            &issuer_key_hash,
            &tbs,
            timestamp.extensions.0,
        ) else {
            refusals.push(format!("the SCT of CT log {log_id} is too large to encode"));
            continue;
        };
        if key.verifies(&signed, signature.data) {
            return Ok(());
        }
        refusals.push(format!(
            "the SCT of CT log {log_id} does not verify over this certificate"
        ));
    }
    Err(format!(
        "{certificate} has no valid signed certificate timestamp from the trust root's CT logs: {}",
        refusals.join("; ")
    ))
}

/// What a CT log signs for a precertificate (RFC 6962 §3.2 `digitally-signed struct`).
fn precertificate_timestamp(
    timestamp: u64,
    issuer_key_hash: &[u8],
    tbs: &[u8],
    extensions: &[u8],
) -> Option<Vec<u8>> {
    let tbs_length = u32::try_from(tbs.len())
        .ok()
        .filter(|length| *length < 1 << 24)?;
    let extensions_length = u16::try_from(extensions.len()).ok()?;
    let mut signed = vec![SCT_V1, CERTIFICATE_TIMESTAMP];
    signed.extend_from_slice(&timestamp.to_be_bytes());
    signed.extend_from_slice(&PRECERT_ENTRY);
    signed.extend_from_slice(issuer_key_hash);
    signed.extend_from_slice(&tbs_length.to_be_bytes()[1..]);
    signed.extend_from_slice(tbs);
    signed.extend_from_slice(&extensions_length.to_be_bytes());
    signed.extend_from_slice(extensions);
    Some(signed)
}

/// The DER TBSCertificate `tbs` with the SCT list extension removed, every length
/// re-encoded.
fn tbs_without_sct_list(tbs: &[u8]) -> Result<Vec<u8>, String> {
    let unreadable = |what: &str| format!("its TBS certificate is unreadable ({what})");
    let tbs = element(tbs).ok_or_else(|| unreadable("the TBS"))?;
    if tbs.tag != SEQUENCE || !tbs.rest.is_empty() {
        return Err(unreadable("the TBS is not one SEQUENCE"));
    }
    let mut rebuilt = Vec::with_capacity(tbs.content.len());
    let mut removed = false;
    let mut cursor = tbs.content;
    while !cursor.is_empty() {
        let field = element(cursor).ok_or_else(|| unreadable("a field"))?;
        if field.tag == EXTENSIONS {
            let list = element(field.content).ok_or_else(|| unreadable("the extensions"))?;
            if list.tag != SEQUENCE || !list.rest.is_empty() {
                return Err(unreadable("the extensions are not one SEQUENCE"));
            }
            let mut kept = Vec::with_capacity(list.content.len());
            let mut extensions = list.content;
            while !extensions.is_empty() {
                let extension = element(extensions).ok_or_else(|| unreadable("an extension"))?;
                let oid = element(extension.content).ok_or_else(|| unreadable("an OID"))?;
                if oid.whole == SCT_LIST_OID_DER {
                    removed = true;
                } else {
                    kept.extend_from_slice(extension.whole);
                }
                extensions = extension.rest;
            }
            rebuilt.extend(encode(EXTENSIONS, &encode(SEQUENCE, &kept)));
        } else {
            rebuilt.extend_from_slice(field.whole);
        }
        cursor = field.rest;
    }
    if !removed {
        return Err(unreadable("no SCT list extension in the TBS"));
    }
    Ok(encode(SEQUENCE, &rebuilt))
}

/// One DER element read from the start of some bytes.
struct Element<'a> {
    tag: u8,
    content: &'a [u8],
    /// The element's whole encoding: tag, length and content.
    whole: &'a [u8],
    /// What follows it.
    rest: &'a [u8],
}

/// The DER element at the start of `bytes`. `None` if it is truncated or uses a multi-byte
/// tag (no TBS field does).
fn element(bytes: &[u8]) -> Option<Element<'_>> {
    let (&tag, rest) = bytes.split_first()?;
    if tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (digits, rest) = rest.split_at(count);
        let length = digits
            .iter()
            .fold(0usize, |length, digit| (length << 8) | usize::from(*digit));
        (length, rest)
    };
    if rest.len() < length {
        return None;
    }
    let header = bytes.len() - rest.len();
    let (content, after) = rest.split_at(length);
    Some(Element {
        tag,
        content,
        whole: &bytes[..header + length],
        rest: after,
    })
}

/// `tag` and `content` as one DER element.
fn encode(tag: u8, content: &[u8]) -> Vec<u8> {
    let length = content.len().to_be_bytes();
    let significant = length
        .iter()
        .position(|byte| *byte != 0)
        .unwrap_or(length.len());
    let mut encoded = vec![tag];
    if content.len() < 0x80 {
        encoded.push(length[length.len() - 1]);
    } else {
        let digits = &length[significant..];
        // At most 8 length bytes: 0x80 | 8 fits.
        encoded.push(0x80 | digits.len() as u8);
        encoded.extend_from_slice(digits);
    }
    encoded.extend_from_slice(content);
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_lengths_round_trip() {
        for size in [0, 1, 127, 128, 255, 256, 70_000] {
            let content = vec![7u8; size];
            let encoded = encode(SEQUENCE, &content);
            let read = element(&encoded).expect("an element");
            assert_eq!(
                (read.tag, read.content, read.whole, read.rest.len()),
                (SEQUENCE, &content[..], &encoded[..], 0)
            );
        }
        assert!(
            element(&[SEQUENCE, 0x82, 0x01]).is_none(),
            "a truncated length"
        );
        assert!(
            element(&[SEQUENCE, 0x05, 0x00]).is_none(),
            "a truncated content"
        );
    }

    #[test]
    fn the_sct_list_is_removed_and_the_rest_kept() {
        let extension = |oid: &[u8]| encode(SEQUENCE, &[oid, &encode(0x04, b"v")[..]].concat());
        let other_oid = encode(0x06, &[0x55, 0x1d, 0x0f]);
        let fields = |extensions: &[Vec<u8>]| {
            let serial = encode(0x02, &[1]);
            let list = encode(SEQUENCE, &extensions.concat());
            encode(SEQUENCE, &[serial, encode(EXTENSIONS, &list)].concat())
        };
        let with = fields(&[extension(&other_oid), extension(SCT_LIST_OID_DER)]);
        let without = fields(&[extension(&other_oid)]);
        assert_eq!(tbs_without_sct_list(&with), Ok(without.clone()));
        assert!(tbs_without_sct_list(&without).is_err(), "nothing to remove");
    }
}
