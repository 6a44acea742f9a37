//! `skill validate`, `skill push`, `skill inspect`, `skill pull`, `skill verify`, and the
//! hidden `skill fetch` of a git skill's init container.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};

#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// Validate skills against the Agent Skills specification
    ///
    /// Each path is a skill directory or its SKILL.md, checked by the rules the operator
    /// applies to every skill it reads.
    #[command(after_long_help = VALIDATE_AFTER)]
    Validate {
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        output: Output,
        /// Skill directories or SKILL.md files.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Pack skill directories into an OCI image and push it
    ///
    /// One directory goes at the image root; several each go into a top-level directory named
    /// after the skill. With --sign, the pushed digest is then signed with --key in cosign's
    /// `.sig` tag layout, next to the signatures already there, so `cosign verify --key` and
    /// `skill verify --key` accept it. Credentials come from the docker config, as docker
    /// finds them. Prints the signature, if any, then the pushed reference with its digest
    /// last.
    #[command(after_long_help = PUSH_AFTER)]
    Push {
        /// Reach the registry over plain HTTP.
        #[arg(long)]
        insecure: bool,
        /// Sign the pushed image with --key.
        #[arg(long, requires = "key")]
        sign: bool,
        /// The private key to sign with: cosign's (`cosign generate-key-pair`; its password in
        /// COSIGN_PASSWORD) or an unencrypted PKCS#8 ECDSA P-256 PEM.
        #[arg(long, value_name = "FILE", requires = "sign")]
        key: Option<PathBuf>,
        /// Skill directories to pack.
        #[arg(value_name = "DIR", required = true, value_parser = skill_dir)]
        dirs: Vec<PathBuf>,
        /// The image to push: REGISTRY/REPOSITORY:TAG.
        #[arg(value_name = "REFERENCE", value_parser = image_reference)]
        reference: String,
    },
    /// Show the skills and signatures of an image without pulling it
    ///
    /// Reads the image through the registry API, as the operator does: the digest the
    /// reference resolves to, each skill's subPath, frontmatter and findings, and the
    /// signatures attached to the image (in cosign's .sig tag or as referrers), listed without
    /// being verified: `skill verify` checks them. Nothing is written to disk. Credentials come
    /// from the docker config, as for push.
    #[command(after_long_help = INSPECT_AFTER)]
    Inspect {
        /// Reach the registry over plain HTTP.
        #[arg(long)]
        insecure: bool,
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        output: Output,
        /// The image: REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@DIGEST.
        #[arg(value_name = "REFERENCE", value_parser = image_reference)]
        reference: String,
    },
    /// Download the skills of an image into a directory
    ///
    /// One directory per skill, named after it (`DIR/<name>/SKILL.md`, …), written after every
    /// SKILL.md is validated as the operator does: an invalid skill writes nothing. Existing
    /// files are never replaced without --force. Credentials come from the docker config, as
    /// for push. Prints the image pinned by digest, then each skill written.
    #[command(after_long_help = PULL_AFTER)]
    Pull {
        /// Reach the registry over plain HTTP.
        #[arg(long)]
        insecure: bool,
        /// Replace files that already exist.
        #[arg(long)]
        force: bool,
        /// The image: REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@DIGEST.
        #[arg(value_name = "REFERENCE", value_parser = image_reference)]
        reference: String,
        /// Where the skill directories go; created when missing.
        #[arg(value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
    /// Verify the cosign signatures of an image offline
    ///
    /// Checks as the operator does: the digest the reference resolves to must be signed with
    /// one of the --key public keys, or keylessly by a certificate of the --ca-certs
    /// authorities naming the given identity, logged by a --rekor-key log. Both layouts cosign
    /// writes are read (the `.sig` tag, bundle referrers). Nothing is fetched from any Sigstore
    /// service. Prints who signed what.
    #[command(after_long_help = VERIFY_AFTER)]
    Verify {
        /// Reach the registry over plain HTTP.
        #[arg(long)]
        insecure: bool,
        /// A cosign public key (PEM) whose signatures count; repeat for several (rotation).
        #[arg(long = "key", value_name = "FILE")]
        keys: Vec<PathBuf>,
        /// Keyless: the certificate authorities (PEM) signing certificates must chain to.
        #[arg(long, value_name = "FILE", requires_all = ["rekor_key", "certificate_oidc_issuer"])]
        ca_certs: Option<PathBuf>,
        /// Keyless: the Rekor public keys (PEM) whose signed entry timestamps count.
        #[arg(long, value_name = "FILE", requires = "ca_certs")]
        rekor_key: Option<PathBuf>,
        /// Keyless: the signer's email or URI, exactly.
        #[arg(
            long,
            requires = "ca_certs",
            conflicts_with = "certificate_identity_regexp"
        )]
        certificate_identity: Option<String>,
        /// Keyless: a regular expression the signer's email or URI must match whole.
        #[arg(long, requires = "ca_certs")]
        certificate_identity_regexp: Option<String>,
        /// Keyless: the OIDC issuer named in the certificate, exactly.
        #[arg(long, requires = "ca_certs")]
        certificate_oidc_issuer: Option<String>,
        /// The image: REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@DIGEST.
        #[arg(value_name = "REFERENCE", value_parser = image_reference)]
        reference: String,
    },
    /// Fetch a git skill at exactly one commit into an empty directory
    ///
    /// What the init container of a run with a git skill runs. Credentials come from
    /// --credentials-dir (the files `username` and `password`, a mounted Secret) or from
    /// AGENTIC_GIT_USERNAME and AGENTIC_GIT_PASSWORD, never from the command line.
    #[command(hide = true, after_long_help = FETCH_AFTER)]
    Fetch {
        /// The repository URL (`spec.source`).
        #[arg(long)]
        url: String,
        /// The full commit id to deliver (`status.resolvedSource` after the `@`).
        #[arg(long)]
        commit: String,
        /// The skill's directory in the repository (`spec.subPath`).
        #[arg(long)]
        sub_path: Option<String>,
        /// Git host (HOST or HOST:PORT) to reach over plain http://; repeat for several.
        #[arg(long = "insecure-git-host", value_delimiter = ',')]
        insecure_git_hosts: Vec<String>,
        /// A directory holding the files `username` and `password` for HTTP basic auth.
        #[arg(long, env = "AGENTIC_GIT_CREDENTIALS_DIR", value_name = "DIR")]
        credentials_dir: Option<PathBuf>,
        /// Where the skill's files go: an existing, empty directory.
        #[arg(value_name = "DEST", value_parser = skill_dir)]
        dest: PathBuf,
    },
}

const VALIDATE_AFTER: &str = "\
Exit status:
  0  every skill is valid
  1  a skill is invalid
  2  a usage or I/O error

Examples:
  # Two skill directories, findings as text
  agentic-operator skill validate skills/java-upgrade skills/maven-deps

  # Findings as JSON, for a script
  agentic-operator skill validate --output json skills/java-upgrade/SKILL.md";

const PUSH_AFTER: &str = "\
Exit status:
  0  pushed (and signed)
  1  packing, pushing or signing failed
  2  a usage error, or a key that cannot sign

Examples:
  # One skill at the image root
  agentic-operator skill push skills/java-upgrade registry.example.com/skills/java-upgrade:1.0

  # Two skills in one image, signed with a cosign key
  COSIGN_PASSWORD=... agentic-operator skill push --sign --key cosign.key \\
      skills/java-upgrade skills/maven-deps registry.example.com/skills/java:1.0";

const INSPECT_AFTER: &str = "\
Exit status:
  0  every skill is valid
  1  a skill is invalid, or the image cannot be read
  2  a usage error

Examples:
  agentic-operator skill inspect registry.example.com/skills/java:1.0
  agentic-operator skill inspect --output json registry.example.com/skills/java@sha256:...";

const PULL_AFTER: &str = "\
Exit status:
  0  written
  1  a skill is invalid, or the image cannot be read or written
  2  a usage error

Examples:
  # Into ./java-upgrade/, ./maven-deps/, ...
  agentic-operator skill pull registry.example.com/skills/java:1.0

  # Into skills/, replacing what is there
  agentic-operator skill pull --force registry.example.com/skills/java:1.0 skills";

const VERIFY_AFTER: &str = "\
Exit status:
  0  verified
  1  unsigned, not validly signed, or unreadable
  2  a usage error

Examples:
  # Signed with a cosign key (or its rotated successor)
  agentic-operator skill verify --key cosign.pub --key cosign-next.pub \\
      registry.example.com/skills/java:1.0

  # Keyless, under a trust root of your own
  agentic-operator skill verify --ca-certs fulcio.pem --rekor-key rekor.pub \\
      --certificate-identity ci@example.com --certificate-oidc-issuer https://issuer.example.com \\
      registry.example.com/skills/java:1.0";

const FETCH_AFTER: &str = "\
Exit status:
  0  written
  1  fetching or checking failed
  2  a usage error";

/// Where `skill push --sign` reads the password of cosign's encrypted keys, as cosign does.
const COSIGN_PASSWORD_ENV: &str = "COSIGN_PASSWORD";

/// Environment variables `skill fetch` reads credentials from when no --credentials-dir is
/// given.
const USERNAME_ENV: &str = "AGENTIC_GIT_USERNAME";
const PASSWORD_ENV: &str = "AGENTIC_GIT_PASSWORD";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

pub fn run(command: SkillCommand) -> ExitCode {
    match command {
        SkillCommand::Validate { output, paths } => validate(output, &paths),
        SkillCommand::Push {
            insecure,
            sign: _,
            key,
            dirs,
            reference,
        } => push(&dirs, &reference, insecure, key.as_deref()),
        SkillCommand::Inspect {
            insecure,
            output,
            reference,
        } => inspect(&reference, insecure, output),
        SkillCommand::Pull {
            insecure,
            force,
            reference,
            dir,
        } => match pull(&reference, insecure, force, &dir) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::FAILURE
            }
        },
        SkillCommand::Verify {
            insecure,
            keys,
            ca_certs,
            rekor_key,
            certificate_identity,
            certificate_identity_regexp,
            certificate_oidc_issuer,
            reference,
        } => {
            let keyless = ca_certs.map(|ca_certs| KeylessFlags {
                ca_certs,
                rekor_key,
                identity: certificate_identity,
                identity_regexp: certificate_identity_regexp,
                issuer: certificate_oidc_issuer,
            });
            verify(&reference, insecure, &keys, keyless)
        }
        SkillCommand::Fetch {
            url,
            commit,
            sub_path,
            insecure_git_hosts,
            credentials_dir,
            dest,
        } => {
            let request = FetchRequest {
                url: &url,
                commit: &commit,
                sub_path: sub_path.as_deref(),
                insecure_git_hosts,
                credentials_dir: credentials_dir.as_deref(),
            };
            match fetch(&request, &dest) {
                Ok(name) => {
                    println!("{name} at {commit} written to {}", dest.display());
                    ExitCode::SUCCESS
                }
                Err(message) => {
                    eprintln!("error: {message}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

struct FetchRequest<'a> {
    url: &'a str,
    commit: &'a str,
    sub_path: Option<&'a str>,
    insecure_git_hosts: Vec<String>,
    credentials_dir: Option<&'a Path>,
}

/// Fetches the commit, checks that what was read is that commit and a valid skill, and writes
/// it below `dest`. Returns the skill's frontmatter name.
fn fetch(request: &FetchRequest<'_>, dest: &Path) -> Result<String, String> {
    let not_empty = std::fs::read_dir(dest)
        .map_err(|e| format!("{}: {e}", dest.display()))?
        .next()
        .is_some();
    if not_empty {
        return Err(format!("{} is not empty", dest.display()));
    }
    let auth = fetch_auth(request.credentials_dir)?;
    let options = agentic_git::GitOptions {
        insecure_hosts: request.insecure_git_hosts.clone(),
        ..agentic_git::GitOptions::default()
    };
    let source = agentic_git::SourceUrl::parse(request.url, &options.insecure_hosts)
        .map_err(|e| e.to_string())?;
    let fetched = agentic_git::fetch_commit(&source, request.commit, &auth, &options)
        .map_err(|e| e.to_string())?;
    let skill = fetched
        .skill(request.sub_path, &options.limits)
        .map_err(|e| e.to_string())?;
    // fetch_commit reads the object with the id asked for, and gix checks every object
    // against its id; this says so once more, where the pod's promise is kept.
    if fetched.commit() != request.commit || skill.commit != request.commit {
        return Err(format!(
            "asked for commit {} but read {}",
            request.commit,
            fetched.commit()
        ));
    }
    fetched
        .write_skill(&skill, dest)
        .map_err(|e| e.to_string())?;
    Ok(skill
        .report
        .frontmatter
        .as_ref()
        .map(|f| f.name.clone())
        .unwrap_or_default())
}

/// HTTP credentials: the files `username` and `password` of `dir`, else the environment,
/// else none. Half a pair is a mistake, not anonymous access.
fn fetch_auth(dir: Option<&Path>) -> Result<agentic_git::GitAuth, String> {
    let (username, password) = match dir {
        Some(dir) => {
            let read = |key: &str| {
                let path = dir.join(key);
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
            };
            (Some(read("username")?), Some(read("password")?))
        }
        None => (
            std::env::var(USERNAME_ENV).ok(),
            std::env::var(PASSWORD_ENV).ok(),
        ),
    };
    match (username, password) {
        (Some(username), Some(password)) => Ok(agentic_git::GitAuth::Basic { username, password }),
        (None, None) => Ok(agentic_git::GitAuth::Anonymous),
        _ => Err(format!(
            "credentials need both {USERNAME_ENV} and {PASSWORD_ENV}"
        )),
    }
}

/// A `skill push` or `skill fetch` directory: one that exists, so a typo is a usage error like any other.
fn skill_dir(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    if path.is_dir() {
        Ok(path)
    } else {
        Err("not a directory".to_string())
    }
}

/// A `skill push` reference, checked before anything is packed.
fn image_reference(text: &str) -> Result<String, String> {
    agentic_oci::image_registry(text)
        .map(|_| text.to_string())
        .map_err(|e| e.to_string())
}

fn validate(output: Output, paths: &[PathBuf]) -> ExitCode {
    let mut reports = Vec::new();
    for path in paths {
        match agentic_skill::validate_path(path) {
            Ok(report) => reports.push(agentic_skill::PathReport::new(path, report)),
            Err(e) => {
                eprintln!("error: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        }
    }
    match output {
        Output::Text => print!("{}", agentic_skill::render_text(&reports)),
        Output::Json => match serde_json::to_string_pretty(&reports) {
            Ok(json) => println!("{json}"),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
    }
    if reports.iter().all(|r| r.valid) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Runs `work` on a fresh runtime with the docker config's credentials for `reference`'s
/// registry and one client for all its requests (with `insecure`, plain HTTP to it).
fn with_registry<T>(
    reference: &str,
    insecure: bool,
    work: impl AsyncFnOnce(
        agentic_oci::RegistryAuth,
        agentic_oci::RegistryClient,
    ) -> Result<T, agentic_oci::OciError>,
) -> Result<T, String> {
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("starting the async runtime: {e}"))?;
    let result = runtime.block_on(async {
        let registry = agentic_oci::image_registry(reference)?;
        let auth = agentic_oci::RegistryAuth::from_default_docker_config(&registry)?;
        let client = agentic_oci::RegistryClient::new(agentic_oci::RegistryOptions {
            insecure_registries: if insecure { vec![registry] } else { Vec::new() },
            ..agentic_oci::RegistryOptions::default()
        })?;
        work(auth, client).await
    });
    result.map_err(|e| {
        // Speaking HTTPS to a plain-HTTP registry fails as a broken connection.
        if !insecure && matches!(e, agentic_oci::OciError::RegistryUnavailable { .. }) {
            format!("{e}\nhint: if the registry serves plain HTTP, pass --insecure")
        } else {
            e.to_string()
        }
    })
}

fn push(dirs: &[PathBuf], reference: &str, insecure: bool, key: Option<&Path>) -> ExitCode {
    // The key is read before anything is pushed: a key that cannot sign is a usage error.
    let signing_key = match key.map(read_signing_key).transpose() {
        Ok(signing_key) => signing_key,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let pushed = with_registry(reference, insecure, async |auth, client| {
        let image = agentic_oci::pack_skills(dirs)?;
        let pushed = client.push_image(&image, reference, &auth).await?;
        let Some(signing_key) = &signing_key else {
            return Ok((pushed, Ok(None)));
        };
        let image = agentic_oci::ResolvedImage::from_pinned(&pushed)?;
        let signed = agentic_trust::sign_image(&client, &auth, &image, signing_key).await;
        Ok((pushed, signed.map(Some)))
    });
    let (pushed, signed) = match pushed {
        Ok(pushed) => pushed,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };
    match signed {
        Ok(Some(signature)) => println!(
            "signed {} with key {}: signature {} ({} in the tag)",
            signature.tag,
            signing_key
                .as_ref()
                .map(|k| k.public_key().fingerprint())
                .unwrap_or_default(),
            signature.signature_digest,
            signature.signatures
        ),
        Ok(None) => {}
        Err(error) => {
            eprintln!("error: pushed {pushed} but did not sign it: {error}");
            return ExitCode::FAILURE;
        }
    }
    println!("{pushed}");
    ExitCode::SUCCESS
}

/// The `--key` of `skill push --sign`, opened with COSIGN_PASSWORD when cosign encrypted it.
fn read_signing_key(path: &Path) -> Result<agentic_trust::SigningKey, String> {
    let pem = read_text(path).map_err(|e| format!("--key {e}"))?;
    let password = std::env::var(COSIGN_PASSWORD_ENV).ok();
    agentic_trust::SigningKey::from_pem(&pem, &path.display().to_string(), password.as_deref())
        .map_err(|e| format!("--key {e}"))
}

/// The keyless flags of `skill verify`.
struct KeylessFlags {
    ca_certs: PathBuf,
    rekor_key: Option<PathBuf>,
    identity: Option<String>,
    identity_regexp: Option<String>,
    issuer: Option<String>,
}

fn read_text(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The requirement `skill verify`'s flags describe.
fn verify_requirement(
    keys: &[PathBuf],
    keyless: Option<KeylessFlags>,
) -> Result<agentic_trust::Requirement, String> {
    let mut requirement = agentic_trust::Requirement::default();
    for path in keys {
        let key =
            agentic_trust::PublicKey::from_pem(&read_text(path)?, &path.display().to_string())
                .map_err(|e| e.to_string())?;
        requirement.keys.push(key);
    }
    if let Some(flags) = keyless {
        let missing = |flag: &str| format!("keyless verification needs {flag}");
        let rekor = flags.rekor_key.ok_or_else(|| missing("--rekor-key"))?;
        let issuer = flags
            .issuer
            .ok_or_else(|| missing("--certificate-oidc-issuer"))?;
        let subject = match (flags.identity, flags.identity_regexp) {
            (Some(exact), _) => agentic_trust::Pattern::Exact(exact),
            (None, Some(regex)) => {
                agentic_trust::Pattern::regex(&regex, "--certificate-identity-regexp")
                    .map_err(|e| e.to_string())?
            }
            (None, None) => {
                return Err(missing(
                    "--certificate-identity or --certificate-identity-regexp",
                ));
            }
        };
        let trust_root = agentic_trust::TrustRoot::from_pem(
            &read_text(&flags.ca_certs)?,
            &read_text(&rekor)?,
            "",
        )
        .map_err(|e| e.to_string())?;
        requirement.keyless = Some(agentic_trust::Keyless {
            identities: vec![agentic_trust::Identity {
                issuer: agentic_trust::Pattern::Exact(issuer),
                subject,
            }],
            trust_root,
        });
    }
    if requirement.is_empty() {
        return Err("give --key, or the keyless flags (--ca-certs, --rekor-key, --certificate-oidc-issuer and an identity)".to_string());
    }
    Ok(requirement)
}

fn verify(
    reference: &str,
    insecure: bool,
    keys: &[PathBuf],
    keyless: Option<KeylessFlags>,
) -> ExitCode {
    let requirement = match verify_requirement(keys, keyless) {
        Ok(requirement) => requirement,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let verified = with_registry(reference, insecure, async |auth, client| {
        let resolved = client.resolve_digest(reference, &auth).await?;
        let verdict = agentic_trust::verify_image(&client, &auth, &resolved, &requirement).await;
        Ok((resolved, verdict))
    });
    let (resolved, verdict) = match verified {
        Ok(read) => read,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };
    let image = &resolved.repository_with_digest;
    let why = match verdict {
        agentic_trust::ImageVerdict::Verified(verified) => {
            let signer = match &verified.signer {
                agentic_trust::Signer::Key { fingerprint } => format!("key {fingerprint}"),
                agentic_trust::Signer::Identity { issuer, subject } => {
                    format!("identity {subject} (issuer {issuer})")
                }
            };
            println!(
                "{image}: verified\n  signed by {signer}\n  signature {} (from {})",
                verified.signature_digest,
                layout_name(verified.layout)
            );
            return ExitCode::SUCCESS;
        }
        agentic_trust::ImageVerdict::Unsigned => "unsigned".to_string(),
        agentic_trust::ImageVerdict::Invalid(refusal) => format!(
            "not validly signed: {} ({})",
            refusal.message, refusal.reason
        ),
        agentic_trust::ImageVerdict::Unavailable { why } => {
            format!("the signatures could not be read: {why}")
        }
    };
    eprintln!("error: {image}: {why}");
    ExitCode::FAILURE
}

/// Where a signature was found, in words.
fn layout_name(layout: agentic_trust::Layout) -> &'static str {
    match layout {
        agentic_trust::Layout::Tag => "the .sig tag",
        agentic_trust::Layout::Referrers => "the referrers API",
        agentic_trust::Layout::ReferrersTag => "the referrers fallback tag",
        agentic_trust::Layout::Commit => "the commit's gpgsig header",
    }
}

/// A signature `skill inspect` found attached to the image, not verified: `skill verify`
/// checks it against keys or a trust root.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct InspectedSignature {
    /// The simple-signing layer's or referrer manifest's digest, as a SkillCard's
    /// `status.verification` names it.
    digest: String,
    /// `key`, `certificate` (keyless) or `bundle` (a Sigstore bundle).
    kind: &'static str,
    /// Where it was found.
    found_in: &'static str,
}

impl From<agentic_trust::AttachedSignature> for InspectedSignature {
    fn from(attached: agentic_trust::AttachedSignature) -> Self {
        InspectedSignature {
            digest: attached.digest,
            kind: match attached.kind {
                agentic_trust::SignatureKind::Key => "key",
                agentic_trust::SignatureKind::Certificate => "certificate",
                agentic_trust::SignatureKind::Bundle => "bundle",
            },
            found_in: layout_name(attached.layout),
        }
    }
}

/// What `skill inspect` found for one skill of an image.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct InspectedSkill {
    /// The directory to name in a SkillCard's `spec.subPath`; none for an image-root skill.
    sub_path: Option<String>,
    valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    /// The errors (an invalid skill, or why it could not be read) and warnings.
    findings: Vec<String>,
}

/// What `skill inspect` found in an image.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Inspection {
    /// The image pinned by digest, as a SkillCard's `status.resolvedImage` would be.
    image: String,
    skills: Vec<InspectedSkill>,
    /// The signatures attached to the image, unverified.
    signatures: Vec<InspectedSignature>,
    /// Why the signatures could not be listed, when they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    signatures_unreadable: Option<String>,
}

/// The image `reference` pinned by digest, and the `subPath` of each skill it holds (`None`
/// for a skill at the image root).
async fn skills_of_image(
    reference: &str,
    auth: &agentic_oci::RegistryAuth,
    client: &agentic_oci::RegistryClient,
) -> Result<(agentic_oci::ResolvedImage, Vec<Option<String>>), agentic_oci::OciError> {
    let resolved = client.resolve_digest(reference, auth).await?;
    let listing = client.list_skills(&resolved, auth).await?;
    let sub_paths = if listing.root {
        vec![None]
    } else {
        listing.directories.into_iter().map(Some).collect()
    };
    Ok((resolved, sub_paths))
}

fn inspect(reference: &str, insecure: bool, output: Output) -> ExitCode {
    let inspected = with_registry(reference, insecure, async |auth, client| {
        let (resolved, sub_paths) = skills_of_image(reference, &auth, &client).await?;
        let mut skills = Vec::new();
        for sub_path in sub_paths {
            let read = client
                .fetch_skill(&resolved, sub_path.as_deref(), &auth)
                .await;
            skills.push(inspected_skill(sub_path, read));
        }
        let (signatures, signatures_unreadable) =
            match agentic_trust::attached_signatures(&client, &auth, &resolved).await {
                Ok(attached) => (attached.into_iter().map(Into::into).collect(), None),
                Err(why) => (Vec::new(), Some(why.to_string())),
            };
        Ok(Inspection {
            image: resolved.repository_with_digest.clone(),
            skills,
            signatures,
            signatures_unreadable,
        })
    });
    let inspection = match inspected {
        Ok(inspection) => inspection,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };
    match output {
        Output::Text => print!("{}", render_inspection(&inspection)),
        Output::Json => match serde_json::to_string_pretty(&inspection) {
            Ok(json) => println!("{json}"),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        },
    }
    let all_valid = !inspection.skills.is_empty() && inspection.skills.iter().all(|s| s.valid);
    if all_valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn inspected_skill(
    sub_path: Option<String>,
    read: Result<agentic_oci::SkillContent, agentic_oci::OciError>,
) -> InspectedSkill {
    match read {
        Ok(content) => {
            let frontmatter = content.report.frontmatter.as_ref();
            InspectedSkill {
                sub_path,
                valid: true,
                name: frontmatter.map(|f| f.name.clone()),
                description: frontmatter.map(|f| f.description.clone()),
                findings: content
                    .report
                    .warnings
                    .iter()
                    .map(|w| format!("warning: {}", w.message))
                    .collect(),
            }
        }
        Err(error) => InspectedSkill {
            sub_path,
            valid: false,
            name: None,
            description: None,
            findings: vec![format!("{}: {error}", error.reason())],
        },
    }
}

fn render_inspection(inspection: &Inspection) -> String {
    use std::fmt::Write as _;
    let mut text = format!("{}\n", inspection.image);
    if inspection.skills.is_empty() {
        text.push_str("  no SKILL.md at the image root or in a top-level directory\n");
    }
    for skill in &inspection.skills {
        let place = skill.sub_path.as_deref().map_or_else(
            || "(image root)".to_string(),
            |dir| format!("subPath {dir}"),
        );
        let verdict = if skill.valid { "valid" } else { "invalid" };
        let _ = writeln!(
            text,
            "  {}  {place}  {verdict}",
            skill.name.as_deref().unwrap_or("-")
        );
        if let Some(description) = &skill.description {
            let _ = writeln!(text, "    {description}");
        }
        for finding in &skill.findings {
            let _ = writeln!(text, "    {finding}");
        }
    }
    match (
        &inspection.signatures_unreadable,
        inspection.signatures.as_slice(),
    ) {
        (Some(why), _) => {
            let _ = writeln!(text, "  signatures could not be listed: {why}");
        }
        (None, []) => text.push_str("  unsigned: no signature in the .sig tag or as a referrer\n"),
        (None, signatures) => {
            text.push_str("  signatures (not verified here: `skill verify` checks them):\n");
            for signature in signatures {
                let _ = writeln!(
                    text,
                    "    {}  {} signature in {}",
                    signature.digest, signature.kind, signature.found_in
                );
            }
        }
    }
    text
}

/// The skills of an image as `skill pull` read them: each with its name and files, or the
/// findings of the invalid ones.
struct Pulled {
    image: String,
    skills: Vec<(String, Vec<agentic_oci::SkillFile>)>,
    invalid: Vec<String>,
}

/// Reads every skill of `reference`, then writes them below `dir`; returns what to print.
fn pull(reference: &str, insecure: bool, force: bool, dir: &Path) -> Result<String, String> {
    let pulled = with_registry(reference, insecure, async |auth, client| {
        let (resolved, sub_paths) = skills_of_image(reference, &auth, &client).await?;
        let mut pulled = Pulled {
            image: resolved.repository_with_digest.clone(),
            skills: Vec::new(),
            invalid: Vec::new(),
        };
        for sub_path in sub_paths {
            let place = sub_path.as_deref().map_or_else(
                || "(image root)".to_string(),
                |dir| format!("subPath {dir}"),
            );
            match client
                .pull_skill(&resolved, sub_path.as_deref(), &auth)
                .await
            {
                Ok((content, files)) => {
                    let name = content
                        .report
                        .frontmatter
                        .as_ref()
                        .map(|f| f.name.clone())
                        .unwrap_or_default();
                    pulled.skills.push((name, files));
                }
                Err(error) if error.is_content_verdict() => pulled
                    .invalid
                    .push(format!("{place}: {}: {error}", error.reason())),
                Err(error) => return Err(error),
            }
        }
        Ok(pulled)
    })?;
    if !pulled.invalid.is_empty() {
        return Err(format!(
            "{}: nothing written; invalid skills:\n  {}",
            pulled.image,
            pulled.invalid.join("\n  ")
        ));
    }
    if pulled.skills.is_empty() {
        return Err(format!(
            "{}: no SKILL.md at the image root or in a top-level directory",
            pulled.image
        ));
    }
    write_pulled(&pulled, dir, force)
}

/// Writes the pulled skills below `dir`, after checking that no file is in the way (unless
/// `force`); files are created anew, so an existing symlink is replaced, never followed.
fn write_pulled(pulled: &Pulled, dir: &Path, force: bool) -> Result<String, String> {
    use std::fmt::Write as _;
    let io_error = |path: &Path, error: std::io::Error| format!("{}: {error}", path.display());
    let targets: Vec<(PathBuf, &agentic_oci::SkillFile)> = pulled
        .skills
        .iter()
        .flat_map(|(name, files)| {
            files
                .iter()
                .map(move |file| (dir.join(name).join(&file.path), file))
        })
        .collect();
    let existing: Vec<String> = targets
        .iter()
        .filter(|(path, _)| path.symlink_metadata().is_ok())
        .map(|(path, _)| path.display().to_string())
        .collect();
    if !existing.is_empty() && !force {
        return Err(format!(
            "{} file(s) already exist; pass --force to replace them: {}",
            existing.len(),
            existing.join(", ")
        ));
    }
    for (path, file) in &targets {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
        }
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(path, e)),
        }
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(if file.executable { 0o755 } else { 0o644 });
        }
        let mut out = options.open(path).map_err(|e| io_error(path, e))?;
        std::io::Write::write_all(&mut out, &file.bytes).map_err(|e| io_error(path, e))?;
    }
    let mut text = format!("{}\n", pulled.image);
    for (name, files) in &pulled.skills {
        let _ = writeln!(
            text,
            "  {name}  {} file(s)  {}",
            files.len(),
            dir.join(name).display()
        );
    }
    Ok(text)
}
