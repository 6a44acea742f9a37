//! Keyless verification against real Sigstore public-good material
//! (`tests/data/sigstore-public-good`, origin in its README): a bundle Fulcio, Rekor and the
//! CT log really issued verifies offline, and each forged variant of it is refused.

use serde_json::Value;

use super::*;
use crate::requirement::{Identity, Pattern, Window, Windowed};

const ARTIFACT: &[u8] =
    include_bytes!("../../tests/data/sigstore-public-good/rfc8785-0.1.2-py3-none-any.whl");
const BUNDLE: &str =
    include_str!("../../tests/data/sigstore-public-good/rfc8785-0.1.2-py3-none-any.whl.sigstore");
const TRUSTED_ROOT: &str = include_str!("../../tests/data/sigstore-public-good/trusted_root.json");

const ISSUER: &str = "https://token.actions.githubusercontent.com";
const SUBJECT: &str =
    "https://github.com/trailofbits/rfc8785.py/.github/workflows/release.yml@refs/tags/v0.1.2";

/// The trust root of `trusted_root.json`, as Sigstore publishes it, after `edit`.
fn trust_root(edit: impl FnOnce(&mut Value)) -> TrustRoot {
    let mut root: Value = serde_json::from_str(TRUSTED_ROOT).expect("trusted_root.json");
    edit(&mut root);
    TrustRoot::from_trusted_root_json(&root.to_string(), "trusted_root.json")
        .expect("the trust root")
}

fn keyless(trust_root: TrustRoot, subject: &str) -> Keyless {
    Keyless {
        identities: vec![Identity {
            issuer: Pattern::Exact(ISSUER.to_string()),
            subject: Pattern::Exact(subject.to_string()),
        }],
        trust_root,
    }
}

/// Verifies `bundle` (as JSON) over `artifact`, as a bundle's message signature is verified.
fn verify(keyless: &Keyless, bundle: &Value, artifact: &[u8]) -> Result<Signer, Refusal> {
    let material = &bundle["verificationMaterial"];
    let certificates: Vec<Vec<u8>> = material["x509CertificateChain"]["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| STANDARD.decode(c["rawBytes"].as_str().unwrap()).unwrap())
        .collect();
    let entries: Vec<BundleLogEntry> =
        serde_json::from_value(material["tlogEntries"].clone()).expect("the log entries");
    let signature = STANDARD
        .decode(bundle["messageSignature"]["signature"].as_str().unwrap())
        .unwrap();
    let signed = Signed::Message {
        message: artifact,
        signature: &signature,
    };
    verify_bundle_keyless(keyless, &signed, &certificates, &entries)
}

fn bundle() -> Value {
    serde_json::from_str(BUNDLE).expect("the bundle")
}

fn everything() -> TrustRoot {
    trust_root(|_| {})
}

#[test]
fn a_real_public_good_bundle_verifies_offline() {
    let signer = verify(&keyless(everything(), SUBJECT), &bundle(), ARTIFACT);
    assert_eq!(
        signer,
        Ok(Signer::Identity {
            issuer: ISSUER.to_string(),
            subject: SUBJECT.to_string(),
        })
    );
}

#[test]
fn forged_variants_of_the_real_bundle_are_refused() {
    let accepted = keyless(everything(), SUBJECT);
    let refused = |what: &str, result: Result<Signer, Refusal>| {
        assert!(result.is_err(), "{what}: {result:?}");
    };

    let mut artifact = ARTIFACT.to_vec();
    artifact[100] ^= 1;
    refused("another artifact", verify(&accepted, &bundle(), &artifact));

    let mut forged = bundle();
    let signature = forged["messageSignature"]["signature"].as_str().unwrap();
    let mut raw = STANDARD.decode(signature).unwrap();
    let last = raw.len() - 1;
    raw[last] ^= 1;
    forged["messageSignature"]["signature"] = Value::String(STANDARD.encode(raw));
    refused("an altered signature", verify(&accepted, &forged, ARTIFACT));

    let entry = || bundle()["verificationMaterial"]["tlogEntries"][0].clone();
    let with_entry = |entry: Value| {
        let mut forged = bundle();
        forged["verificationMaterial"]["tlogEntries"][0] = entry;
        forged
    };

    let mut later = entry();
    later["integratedTime"] = Value::String("1710888077".to_string());
    refused(
        "another integrated time",
        verify(&accepted, &with_entry(later), ARTIFACT),
    );

    let mut other_index = entry();
    other_index["logIndex"] = Value::String("79605084".to_string());
    refused(
        "another log index",
        verify(&accepted, &with_entry(other_index), ARTIFACT),
    );

    let mut altered_body = entry();
    let body = STANDARD
        .decode(altered_body["canonicalizedBody"].as_str().unwrap())
        .unwrap();
    let body = String::from_utf8(body).unwrap().replace(
        "c4e92e9ecc828bef2aa7dba1de8ac983511f7532a0df11c770d39099a25cf201",
        "c4e92e9ecc828bef2aa7dba1de8ac983511f7532a0df11c770d39099a25cf200",
    );
    altered_body["canonicalizedBody"] = Value::String(STANDARD.encode(body));
    refused(
        "a body that logs another hash",
        verify(&accepted, &with_entry(altered_body), ARTIFACT),
    );

    let mut no_promise = entry();
    no_promise
        .as_object_mut()
        .unwrap()
        .remove("inclusionPromise");
    refused(
        "no signed entry timestamp",
        verify(&accepted, &with_entry(no_promise), ARTIFACT),
    );

    refused(
        "another identity",
        verify(
            &keyless(everything(), &SUBJECT.replace("v0.1.2", "v0.1.3")),
            &bundle(),
            ARTIFACT,
        ),
    );

    // Only the certificate authority of 2021-2022, which did not issue the signing certificate.
    let retired = trust_root(|root| {
        root["certificateAuthorities"]
            .as_array_mut()
            .unwrap()
            .retain(|authority| authority["validFor"]["end"].is_string());
    });
    refused(
        "a trust root without the issuing authority",
        verify(&keyless(retired, SUBJECT), &bundle(), ARTIFACT),
    );
}

/// The log entry is of 2024-03-19 (1710888076), and the certificate and its SCT of that
/// minute: each of the trust root's windows must hold it.
#[test]
fn the_trust_roots_windows_are_kept() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit); 3] = [
        ("the Rekor key retired before the entry", |root| {
            root["tlogs"][0]["publicKey"]["validFor"]["end"] = "2024-01-01T00:00:00Z".into();
        }),
        (
            "the issuing authority retired before the signature",
            |root| {
                for authority in root["certificateAuthorities"].as_array_mut().unwrap() {
                    authority["validFor"]["end"] = "2024-01-01T00:00:00Z".into();
                }
            },
        ),
        ("the CT log's key retired before its SCT", |root| {
            for log in root["ctlogs"].as_array_mut().unwrap() {
                log["publicKey"]["validFor"]["end"] = "2024-01-01T00:00:00Z".into();
            }
        }),
    ];
    for (what, edit) in cases {
        let result = verify(&keyless(trust_root(edit), SUBJECT), &bundle(), ARTIFACT);
        assert!(result.is_err(), "{what}: {result:?}");
    }
    // A key whose window starts after the entry does not count either.
    let later = trust_root(|root| {
        root["tlogs"][0]["publicKey"]["validFor"]["start"] = "2025-01-01T00:00:00Z".into();
    });
    let result = verify(&keyless(later, SUBJECT), &bundle(), ARTIFACT);
    assert!(
        result
            .as_ref()
            .is_err_and(|why| why.reason == RefusalReason::LogEntryInvalid
                && why.message.contains("outside the window")),
        "{result:?}"
    );
}

#[test]
fn a_trusted_root_that_is_not_one_is_named() {
    for (json, expected) in [
        ("{", "not a Sigstore trusted root"),
        (
            r#"{"mediaType": "application/json"}"#,
            "is not a Sigstore trusted root",
        ),
        (
            r#"{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}"#,
            "lists no transparency log",
        ),
    ] {
        let error = TrustRoot::from_trusted_root_json(json, "policy/trustRoot")
            .expect_err(json)
            .to_string();
        assert!(
            error.starts_with("policy/trustRoot: ") && error.contains(expected),
            "{error}"
        );
    }
}

/// Certificate paths built here, each breaking one rule of RFC 5280 that a path validator
/// must check and that signatures and validity alone do not catch.
mod paths {
    use rcgen::{
        BasicConstraints, CertificateParams, CustomExtension, DnType, ExtendedKeyUsagePurpose,
        GeneralSubtree, IsCa, Issuer, KeyPair, KeyUsagePurpose, NameConstraints, SanType,
    };

    use super::*;

    /// 2026-01-01T12:00:00Z.
    const SIGNED_AT: i64 = 1_767_268_800;

    fn ca_params(name: &str, constraints: BasicConstraints) -> CertificateParams {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(constraints);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = rcgen::date_time_ymd(2025, 1, 1);
        params.not_after = rcgen::date_time_ymd(2030, 1, 1);
        params
    }

    fn leaf_params() -> CertificateParams {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf params");
        params.subject_alt_names = vec![SanType::Rfc822Name(
            "dev@example.com"
                .to_string()
                .try_into()
                .expect("an IA5 email"),
        )];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = rcgen::date_time_ymd(2026, 1, 1);
        params.not_after = rcgen::date_time_ymd(2026, 1, 2);
        params
    }

    /// A root made from `root`, the intermediates of `middles` under it in turn, and a leaf
    /// from `leaf` under the last: the path checked as the bundle's chain (the intermediates
    /// sent with the leaf), under a trust root of the root alone.
    fn check_path(
        root: CertificateParams,
        middles: Vec<CertificateParams>,
        leaf: CertificateParams,
    ) -> Result<Vec<u8>, Refusal> {
        let root_key = KeyPair::generate().expect("a key");
        let root_cert = root.self_signed(&root_key).expect("the root");
        let mut issuer = Issuer::new(root, root_key);
        let mut chain = Vec::new();
        for middle in middles {
            let key = KeyPair::generate().expect("a key");
            let cert = middle.signed_by(&key, &issuer).expect("an intermediate");
            chain.insert(0, cert.der().to_vec());
            issuer = Issuer::new(middle, key);
        }
        let leaf_key = KeyPair::generate().expect("a key");
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).expect("the leaf");
        let trust_root = TrustRoot {
            certificate_authorities: vec![Windowed {
                item: root_cert.der().to_vec(),
                valid: Window::default(),
            }],
            ..TrustRoot::default()
        };
        let (_, parsed) = X509Certificate::from_der(leaf_cert.der()).expect("the leaf parses");
        verify_chain(
            leaf_cert.der(),
            &parsed,
            &chain,
            &trust_root,
            ASN1Time::from_timestamp(SIGNED_AT).expect("a time"),
        )
    }

    fn check(
        root: CertificateParams,
        middle: CertificateParams,
        leaf: CertificateParams,
    ) -> Result<Vec<u8>, Refusal> {
        check_path(root, vec![middle], leaf)
    }

    /// `leaf` under a sound root and intermediate.
    fn check_leaf(leaf: CertificateParams) -> Result<Vec<u8>, Refusal> {
        check(
            ca_params("root", BasicConstraints::Unconstrained),
            ca_params("intermediate", BasicConstraints::Unconstrained),
            leaf,
        )
    }

    /// A refusal of the certificate path, saying `expected`.
    fn refused(result: Result<Vec<u8>, Refusal>, expected: &str) {
        match result {
            Err(why) => {
                assert!(
                    why.message.contains(expected),
                    "expected {expected:?} in {why:?}"
                );
                assert!(
                    matches!(
                        why.reason,
                        RefusalReason::UntrustedCertificate | RefusalReason::OverLimit
                    ),
                    "{why:?}"
                );
            }
            Ok(_) => panic!("expected a refusal with {expected:?}"),
        }
    }

    #[test]
    fn a_sound_path_holds() {
        let result = check_leaf(leaf_params());
        assert!(result.is_ok(), "{result:?}");
    }

    #[test]
    fn a_path_length_constraint_is_kept() {
        refused(
            check_path(
                ca_params("root", BasicConstraints::Unconstrained),
                vec![
                    ca_params("intermediate", BasicConstraints::Constrained(0)),
                    ca_params("below it", BasicConstraints::Unconstrained),
                ],
                leaf_params(),
            ),
            "path length",
        );
    }

    #[test]
    fn an_issuer_must_be_allowed_to_sign_certificates() {
        let mut middle = ca_params("intermediate", BasicConstraints::Unconstrained);
        middle.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        refused(
            check(
                ca_params("root", BasicConstraints::Unconstrained),
                middle,
                leaf_params(),
            ),
            "not allowed to sign certificates",
        );
    }

    #[test]
    fn name_constraints_are_kept() {
        let mut root = ca_params("root", BasicConstraints::Unconstrained);
        root.name_constraints = Some(NameConstraints {
            permitted_subtrees: vec![GeneralSubtree::DnsName("good.example".to_string())],
            excluded_subtrees: Vec::new(),
        });
        let mut leaf = leaf_params();
        leaf.subject_alt_names = vec![SanType::DnsName(
            "evil.example".try_into().expect("a DNS name"),
        )];
        refused(
            check(
                root,
                ca_params("intermediate", BasicConstraints::Unconstrained),
                leaf,
            ),
            "name constraints",
        );
    }

    #[test]
    fn an_unknown_critical_extension_is_refused() {
        let mut leaf = leaf_params();
        let mut extension =
            CustomExtension::from_oid_content(&[1, 3, 6, 1, 4, 1, 99999, 1], vec![0x05, 0x00]);
        extension.set_criticality(true);
        leaf.custom_extensions = vec![extension];
        refused(check_leaf(leaf), "critical extension");
    }

    #[test]
    fn a_leaf_must_be_for_code_signing() {
        let mut leaf = leaf_params();
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        refused(check_leaf(leaf), "code signing");
    }
}
