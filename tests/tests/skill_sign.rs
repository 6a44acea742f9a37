//! `skill push --sign --key` against a real registry: what it signs, `cosign verify` (COSIGN_BIN,
//! offline: no transparency log) accepts, with cosign's own encrypted key and with a PKCS#8
//! key; a second signing adds to the first; a key that cannot sign stops the push;
//! `skill inspect` lists the signatures attached, unverified.

use std::path::Path;

use agentic_integration_tests::{
    COSIGN_TEST_PASSWORD, cli, cli_with_env, cosign, cosign_output, pem_fingerprint, stderr,
    stdout, write_skill,
};
use agentic_testenv::Registry;

/// Runs `skill verify --key PUBLIC REFERENCE`, which must accept the image and name the key.
fn assert_skill_verify_names(public: &Path, reference: &str) {
    let out = cli(&[
        "skill",
        "verify",
        "--insecure",
        "--key",
        &public.display().to_string(),
        reference,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let fingerprint = pem_fingerprint(&std::fs::read_to_string(public).expect("a public key"));
    assert!(
        stdout(&out).contains(&format!("signed by key {fingerprint}")),
        "{}",
        stdout(&out)
    );
}

/// `skill push --insecure --sign --key KEY` with COSIGN_PASSWORD set to `password`.
fn push_signed(
    key: &Path,
    skill: &Path,
    reference: &str,
    password: Option<&str>,
) -> std::process::Output {
    let env: Vec<(&str, &str)> = password
        .map(|p| ("COSIGN_PASSWORD", p))
        .into_iter()
        .collect();
    cli_with_env(
        &[
            "skill",
            "push",
            "--insecure",
            "--sign",
            "--key",
            &key.display().to_string(),
            &skill.display().to_string(),
            reference,
        ],
        &env,
    )
}

/// Whether `cosign verify --key PUBLIC` accepts `image`, offline.
fn cosign_verifies(dir: &Path, public: &Path, image: &str) -> bool {
    cosign_output(
        dir,
        &[
            "verify",
            "--key",
            &public.display().to_string(),
            "--insecure-ignore-tlog=true",
            "--allow-http-registry",
            image,
        ],
    )
    .status
    .success()
}

#[tokio::test]
async fn skill_push_sign_writes_what_cosign_verify_accepts() {
    let registry = Registry::start().await.expect("the test registry starts");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let skill = write_skill(dir, "signed-skill", "A skill signed as it is pushed.");
    let reference = format!("{}/skills/signed:1", registry.addr());
    let out = cli(&[
        "skill",
        "push",
        "--insecure",
        &skill.display().to_string(),
        &reference,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        inspected_signatures(&reference),
        Vec::<String>::new(),
        "pushed without --sign"
    );
    for name in ["a", "other"] {
        cosign(dir, &["generate-key-pair", "--output-key-prefix", name]);
    }
    // A PKCS#8 key, as `openssl genpkey` writes one.
    let pkcs8 = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("a key");
    std::fs::write(dir.join("p.pem"), pkcs8.serialize_pem()).expect("p.pem");
    std::fs::write(dir.join("p.pub"), pkcs8.public_key_pem()).expect("p.pub");
    let (a_pub, p_pub, other_pub) = (dir.join("a.pub"), dir.join("p.pub"), dir.join("other.pub"));

    // cosign's encrypted key, its password from COSIGN_PASSWORD.
    let out = push_signed(
        &dir.join("a.key"),
        &skill,
        &reference,
        Some(COSIGN_TEST_PASSWORD),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let pinned = text
        .lines()
        .last()
        .expect("the pushed reference")
        .to_owned();
    let (_, digest) = pinned.rsplit_once('@').expect("pinned by digest");
    let by_digest = format!("{}/skills/signed@{digest}", registry.addr());
    let a_fingerprint = pem_fingerprint(&std::fs::read_to_string(&a_pub).expect("a.pub"));
    assert!(
        text.contains(&format!("with key {a_fingerprint}")) && text.contains("(1 in the tag)"),
        "{text}"
    );
    assert!(
        cosign_verifies(dir, &a_pub, &by_digest),
        "cosign verify --key a.pub"
    );
    assert!(
        cosign_verifies(dir, &a_pub, &reference),
        "cosign verify of the tag"
    );
    assert!(
        !cosign_verifies(dir, &other_pub, &by_digest),
        "cosign verify with a key that did not sign must fail"
    );
    assert_skill_verify_names(&a_pub, &reference);
    let listed = inspected_signatures(&reference);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let text = stdout(&cli(&["skill", "inspect", "--insecure", &reference]));
    assert!(
        text.contains(&format!("{}  key signature in the .sig tag", listed[0])),
        "{text}"
    );

    // Signed again, with the PKCS#8 key: the same image, a second signature next to the first.
    let out = push_signed(&dir.join("p.pem"), &skill, &reference, None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).lines().last(),
        Some(pinned.as_str()),
        "the same image"
    );
    assert!(stdout(&out).contains("(2 in the tag)"), "{}", stdout(&out));
    assert!(
        cosign_verifies(dir, &p_pub, &by_digest),
        "cosign verify --key p.pub"
    );
    assert!(
        cosign_verifies(dir, &a_pub, &by_digest),
        "the first signature is kept"
    );
    assert!(!cosign_verifies(dir, &other_pub, &by_digest));
    assert_skill_verify_names(&p_pub, &reference);
    let both = inspected_signatures(&reference);
    assert_eq!(both.len(), 2, "{both:?}");
    assert_eq!(both[0], listed[0], "the first signature is listed first");
}

/// The digests of the signatures `skill inspect --output json` lists for `reference`, each
/// checked to be a key signature from the .sig tag.
fn inspected_signatures(reference: &str) -> Vec<String> {
    let out = cli(&[
        "skill",
        "inspect",
        "--insecure",
        "--output",
        "json",
        reference,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let inspection: serde_json::Value =
        serde_json::from_str(&stdout(&out)).expect("skill inspect prints JSON");
    let signatures = inspection["signatures"]
        .as_array()
        .unwrap_or_else(|| panic!("a signatures list: {inspection}"));
    signatures
        .iter()
        .map(|signature| {
            assert_eq!(signature["kind"], "key", "{signature}");
            assert_eq!(signature["foundIn"], "the .sig tag", "{signature}");
            signature["digest"].as_str().expect("a digest").to_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_key_that_cannot_sign_stops_the_push_before_anything_is_pushed() {
    let registry = Registry::start().await.expect("the test registry starts");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let skill = write_skill(dir, "unsigned-skill", "Never pushed unsigned.");
    cosign(dir, &["generate-key-pair", "--output-key-prefix", "a"]);
    let reference = format!("{}/skills/refused:1", registry.addr());
    let key = dir.join("a.key");
    let out = push_signed(&key, &skill, &reference, Some("not-the-password"));
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let why = stderr(&out);
    assert!(
        why.contains(&format!(
            "--key {}: cannot be decrypted: wrong COSIGN_PASSWORD",
            key.display()
        )),
        "{why}"
    );
    let out = push_signed(&key, &skill, &reference, None);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("set COSIGN_PASSWORD"),
        "{}",
        stderr(&out)
    );
    let out = push_signed(&dir.join("a.pub"), &skill, &reference, None);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("not a PRIVATE KEY"),
        "{}",
        stderr(&out)
    );

    // Nothing was pushed: the tag does not exist.
    let out = cli(&["skill", "inspect", "--insecure", &reference]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not found") || stderr(&out).contains("NotFound"),
        "{}",
        stderr(&out)
    );

    // --sign without --key, and --key without --sign, are usage errors.
    let (key, skill) = (key.display().to_string(), skill.display().to_string());
    let out = cli(&["skill", "push", "--insecure", "--sign", &skill, &reference]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = cli(&[
        "skill",
        "push",
        "--insecure",
        "--key",
        &key,
        &skill,
        &reference,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
