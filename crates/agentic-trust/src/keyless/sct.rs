//! Signed certificate timestamps (SCTs) embedded in a signing certificate (RFC 6962 §3.3):
//! a certificate-transparency log's promise that it logged the certificate. Checked only
//! when the trust root names CT logs; then one SCT of a named log must verify.
//!
//! The log signed the *precertificate*: the certificate's TBS without the SCT list
//! extension, with the SHA-256 of the issuer's key (RFC 6962 §3.2). That TBS is rebuilt here
//! by removing the extension from the DER. Fulcio issues directly, so the issuer is the CA
//! that signed the leaf; precertificates from a separate precertificate-signing CA are not
//! supported (their SCTs fail to verify, which refuses the certificate).

use der::asn1::{AnyRef, ObjectIdentifier};
use der::{Decode as _, Encode as _, Reader as _, SliceReader, Tag, TagNumber, Tagged as _};
use sha2::{Digest as _, Sha256};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::ParsedExtension;

use crate::keys::PublicKey;
use crate::refusal::{Refusal, RefusalReason};
use crate::requirement::Windowed;

/// The SCT list extension.
const SCT_LIST: &str = "1.3.6.1.4.1.11129.2.4.2";
/// The same, to find it in the TBS.
const SCT_LIST_OID: ObjectIdentifier = ObjectIdentifier::new_unwrap(SCT_LIST);
/// RFC 6962's SCT version v1, signature type `certificate_timestamp`, entry type
/// `precert_entry`.
const SCT_V1: u8 = 0;
const CERTIFICATE_TIMESTAMP: u8 = 0;
const PRECERT_ENTRY: [u8; 2] = [0, 1];

/// The tag of the TBS's `[3] EXPLICIT Extensions`.
const EXTENSIONS: Tag = Tag::ContextSpecific {
    constructed: true,
    number: TagNumber::N3,
};

/// One SCT of `leaf` must come from a log of `ct_log_keys` and verify over the
/// precertificate; `issuer_key` is the DER SubjectPublicKeyInfo of the leaf's issuer.
pub(super) fn check_embedded_timestamps(
    leaf: &X509Certificate<'_>,
    issuer_key: Vec<u8>,
    ct_log_keys: &[Windowed<PublicKey>],
) -> Result<(), Refusal> {
    let certificate = format!(
        "the signing certificate (serial {})",
        leaf.raw_serial_as_string()
    );
    let extension = leaf
        .extensions()
        .iter()
        .find(|extension| extension.oid.to_id_string() == SCT_LIST)
        .ok_or_else(|| {
            Refusal::new(RefusalReason::UntrustedCertificate, format!(
                "{certificate} carries no signed certificate timestamp (extension {SCT_LIST}), and the trust root requires one from its CT logs"
            ))
        })?;
    let ParsedExtension::SCT(timestamps) = extension.parsed_extension() else {
        return Err(Refusal::new(
            RefusalReason::UntrustedCertificate,
            format!("{certificate}: its signed certificate timestamp list is unreadable"),
        ));
    };
    let tbs = tbs_without_sct_list(leaf.tbs_certificate.as_ref())
        .map_err(|refusal| refusal.within(&certificate))?;
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
    Err(Refusal::new(
        RefusalReason::UntrustedCertificate,
        format!(
            "{certificate} has no valid signed certificate timestamp from the trust root's CT logs: {}",
            refusals.join("; ")
        ),
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
/// re-encoded (by the `der` crate).
fn tbs_without_sct_list(tbs: &[u8]) -> Result<Vec<u8>, Refusal> {
    fn unreadable(what: &str) -> impl Fn(der::Error) -> Refusal + '_ {
        move |error| {
            Refusal::new(
                RefusalReason::Malformed,
                format!("its TBS certificate is unreadable ({what}: {error})"),
            )
        }
    }
    let tbs = AnyRef::from_der(tbs).map_err(unreadable("the TBS"))?;
    if tbs.tag() != Tag::Sequence {
        return Err(Refusal::new(
            RefusalReason::Malformed,
            "its TBS certificate is not a SEQUENCE",
        ));
    }
    let mut rebuilt = Vec::with_capacity(tbs.value().len());
    let mut removed = false;
    let mut fields = SliceReader::new(tbs.value()).map_err(unreadable("the fields"))?;
    while !fields.is_finished() {
        let field: AnyRef<'_> = fields.decode().map_err(unreadable("a field"))?;
        if field.tag() != EXTENSIONS {
            field
                .encode_to_vec(&mut rebuilt)
                .map_err(unreadable("a field"))?;
            continue;
        }
        let list = AnyRef::from_der(field.value()).map_err(unreadable("the extensions"))?;
        let mut kept = Vec::with_capacity(list.value().len());
        let mut extensions =
            SliceReader::new(list.value()).map_err(unreadable("the extensions"))?;
        while !extensions.is_finished() {
            let extension: AnyRef<'_> = extensions.decode().map_err(unreadable("an extension"))?;
            let oid: ObjectIdentifier = SliceReader::new(extension.value())
                .and_then(|mut reader| reader.decode())
                .map_err(unreadable("an extension's OID"))?;
            if oid == SCT_LIST_OID {
                removed = true;
            } else {
                extension
                    .encode_to_vec(&mut kept)
                    .map_err(unreadable("an extension"))?;
            }
        }
        let list = AnyRef::new(Tag::Sequence, &kept).map_err(unreadable("the extensions"))?;
        let list = list.to_der().map_err(unreadable("the extensions"))?;
        AnyRef::new(EXTENSIONS, &list)
            .and_then(|field| field.encode_to_vec(&mut rebuilt))
            .map_err(unreadable("the extensions"))?;
    }
    if !removed {
        return Err(Refusal::new(
            RefusalReason::Malformed,
            "its TBS certificate holds no SCT list extension",
        ));
    }
    AnyRef::new(Tag::Sequence, &rebuilt)
        .and_then(|tbs| tbs.to_der())
        .map_err(unreadable("the TBS"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `content` as one DER element of `tag`.
    fn encode(tag: Tag, content: &[u8]) -> Vec<u8> {
        AnyRef::new(tag, content)
            .and_then(|element| element.to_der())
            .expect("an element")
    }

    #[test]
    fn the_sct_list_is_removed_and_the_rest_kept() {
        let oid = |oid: &str| ObjectIdentifier::new_unwrap(oid).to_der().expect("an OID");
        let extension = |oid: Vec<u8>| {
            encode(
                Tag::Sequence,
                &[oid, encode(Tag::OctetString, b"v")].concat(),
            )
        };
        let fields = |extensions: &[Vec<u8>]| {
            let serial = encode(Tag::Integer, &[1]);
            let list = encode(Tag::Sequence, &extensions.concat());
            encode(Tag::Sequence, &[serial, encode(EXTENSIONS, &list)].concat())
        };
        let key_usage = extension(oid("2.5.29.15"));
        // Long enough that lengths take more than one byte before and after the removal.
        let big = encode(
            Tag::Sequence,
            &[oid("2.5.29.14"), encode(Tag::OctetString, &[7; 300])].concat(),
        );
        let with = fields(&[key_usage.clone(), extension(oid(SCT_LIST)), big.clone()]);
        let without = fields(&[key_usage, big]);
        assert_eq!(tbs_without_sct_list(&with), Ok(without.clone()));
        assert!(tbs_without_sct_list(&without).is_err(), "nothing to remove");
        assert!(
            tbs_without_sct_list(&with[..with.len() - 1]).is_err(),
            "truncated"
        );
    }
}
