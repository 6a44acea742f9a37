//! Registry credentials from docker config files and Kubernetes pull secrets.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::OciError;

/// Docker Hub answers to several names; docker config files usually key it by the v1 index.
const DOCKER_HUB_NAMES: [&str; 3] = ["docker.io", "index.docker.io", "registry-1.docker.io"];

/// `auth` values are written with and without padding in the wild.
const AUTH_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// How to authenticate to a registry. `Debug` never shows the credentials.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum RegistryAuth {
    /// No credentials.
    #[default]
    Anonymous,
    /// HTTP Basic credentials, also used for the token exchange of registries that ask for one.
    Basic { username: String, password: String },
}

impl fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryAuth::Anonymous => f.write_str("Anonymous"),
            RegistryAuth::Basic { .. } => f.write_str("Basic(<redacted>)"),
        }
    }
}

impl RegistryAuth {
    /// The credentials of the first config whose `auths` has an entry for `registry`
    /// (`host[:port]`), or anonymous access when none has. This is how the kubelet treats a
    /// pod's `imagePullSecrets`: the secrets are tried in order.
    pub fn from_docker_configs<'a>(
        configs: impl IntoIterator<Item = &'a DockerConfig>,
        registry: &str,
    ) -> RegistryAuth {
        configs
            .into_iter()
            .find_map(|config| config.auth_for(registry))
            .unwrap_or_default()
    }

    /// The credentials for `registry` in the user's docker config: `$DOCKER_CONFIG/config.json`,
    /// else `~/.docker/config.json`, as `docker` finds them: a `credHelpers` entry for the
    /// registry, else its `auths` entry, else the `credsStore`, each helper run as
    /// `docker-credential-<name> get`. Anonymous when the file or the entry is missing.
    ///
    /// For the command line only: the operator reads pull secrets, and, like the kubelet,
    /// never runs helpers.
    pub fn from_default_docker_config(registry: &str) -> Result<RegistryAuth, OciError> {
        let Some(path) = default_docker_config_path() else {
            return Ok(RegistryAuth::Anonymous);
        };
        Self::from_docker_config_file(&path, registry)
    }

    /// The credentials for `registry` in the docker config file at `path`, credential helpers
    /// included (see [`RegistryAuth::from_default_docker_config`]); anonymous when the file
    /// does not exist or has no entry for the registry.
    pub fn from_docker_config_file(path: &Path, registry: &str) -> Result<RegistryAuth, OciError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(RegistryAuth::Anonymous);
            }
            Err(error) => {
                return Err(OciError::Io {
                    path: path.display().to_string(),
                    message: error.to_string(),
                });
            }
        };
        let source_name = path.display().to_string();
        // Our own parser first: its errors name the entry and what is wrong with it.
        DockerConfig::parse(&bytes, &source_name)?;
        let invalid = |message: String| OciError::InvalidCredentials {
            source_name: source_name.clone(),
            message,
        };
        use docker_credential::{CredentialRetrievalError as Failed, DockerCredential};
        match docker_credential::get_credential_from_reader(bytes.as_slice(), registry) {
            Ok(DockerCredential::UsernamePassword(username, password)) => {
                Ok(RegistryAuth::Basic { username, password })
            }
            Ok(DockerCredential::IdentityToken(_)) => Err(invalid(format!(
                "the entry for {registry} is an identity token, which this tool cannot use; \
                 log in with a username and password"
            ))),
            Err(Failed::NoCredentialConfigured) => Ok(RegistryAuth::Anonymous),
            // The helper's standard output is left out: it may hold the secret.
            Err(Failed::HelperFailure { helper, stderr, .. }) => Err(invalid(format!(
                "the credential helper {helper} failed for {registry}: {}",
                stderr.trim()
            ))),
            Err(Failed::HelperCommunicationError) => Err(invalid(format!(
                "the credential helper for {registry} (credHelpers or credsStore) could not \
                 be run: is docker-credential-<name> on PATH?"
            ))),
            Err(other) => Err(invalid(format!("for {registry}: {other}"))),
        }
    }

    /// A digest of the credentials, to key what was obtained with them (tag resolutions,
    /// registry authorizations) without keeping the credentials themselves as the key.
    pub(crate) fn fingerprint(&self) -> [u8; 32] {
        let mut hash = Sha256::new();
        match self {
            RegistryAuth::Anonymous => hash.update(b"anonymous"),
            RegistryAuth::Basic { username, password } => {
                hash.update(b"basic\0");
                hash.update(username.len().to_le_bytes());
                hash.update(username.as_bytes());
                hash.update(password.as_bytes());
            }
        }
        hash.finalize().into()
    }

    pub(crate) fn to_client_auth(&self) -> oci_client::secrets::RegistryAuth {
        match self {
            RegistryAuth::Anonymous => oci_client::secrets::RegistryAuth::Anonymous,
            RegistryAuth::Basic { username, password } => {
                oci_client::secrets::RegistryAuth::Basic(username.clone(), password.clone())
            }
        }
    }
}

fn default_docker_config_path() -> Option<PathBuf> {
    match std::env::var_os("DOCKER_CONFIG") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir).join("config.json")),
        _ => std::env::var_os("HOME")
            .map(|home| PathBuf::from(home).join(".docker").join("config.json")),
    }
}

/// The `auths` of a docker config file, as found in `~/.docker/config.json` and in the
/// `.dockerconfigjson` key of a `kubernetes.io/dockerconfigjson` Secret.
///
/// `Debug` shows the registries only, never the credentials.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct DockerConfig {
    /// `(key as written, normalized host, credentials)`, in key order.
    entries: Vec<(String, String, RegistryAuth)>,
}

impl fmt::Debug for DockerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DockerConfig")
            .field(
                "registries",
                &self
                    .entries
                    .iter()
                    .map(|(key, _, _)| key)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, AuthEntry>,
}

#[derive(Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

impl DockerConfig {
    /// Parses a docker config. `source_name` (a secret's `namespace/name`, a file path) names
    /// the config in errors, which never quote its content.
    ///
    /// Entries with an `auth` (base64 `user:password`) or a `username`/`password` pair are
    /// kept; entries with neither (identity tokens, helper-only entries) are ignored.
    pub fn parse(bytes: &[u8], source_name: &str) -> Result<DockerConfig, OciError> {
        let invalid = |message: String| OciError::InvalidCredentials {
            source_name: source_name.to_string(),
            message,
        };
        // serde_json messages can quote the offending value, which may be a secret: report
        // only where and what kind of problem it is.
        let file: ConfigFile = serde_json::from_slice(bytes).map_err(|error| {
            invalid(format!(
                "not a docker config: {:?} error at line {} column {}",
                error.classify(),
                error.line(),
                error.column()
            ))
        })?;
        let mut entries = Vec::new();
        for (key, entry) in file.auths {
            let credentials = match (
                entry.auth.as_deref().map(str::trim),
                entry.username,
                entry.password,
            ) {
                (Some(encoded), _, _) if !encoded.is_empty() => {
                    let decoded = AUTH_BASE64
                        .decode(encoded)
                        .map_err(|_| invalid(format!("auths.{key:?}.auth is not base64")))?;
                    let decoded = String::from_utf8(decoded)
                        .map_err(|_| invalid(format!("auths.{key:?}.auth is not UTF-8")))?;
                    let Some((username, password)) = decoded.split_once(':') else {
                        return Err(invalid(format!(
                            "auths.{key:?}.auth is not of the form user:password"
                        )));
                    };
                    RegistryAuth::Basic {
                        username: username.to_string(),
                        password: password.to_string(),
                    }
                }
                (_, Some(username), Some(password)) if !username.is_empty() => {
                    RegistryAuth::Basic { username, password }
                }
                _ => continue,
            };
            entries.push((key.clone(), normalize_registry(&key), credentials));
        }
        Ok(DockerConfig { entries })
    }

    /// The credentials this config holds for `registry` (`host[:port]`, as in an image
    /// reference). Keys match the way docker matches them: `host`, `https://host`,
    /// `http://host` and `host/v1/`-style keys all name `host`; the Docker Hub names are
    /// interchangeable. An exact key wins over a normalized one.
    pub fn auth_for(&self, registry: &str) -> Option<RegistryAuth> {
        let wanted = normalize_registry(registry);
        self.entries
            .iter()
            .find(|(key, _, _)| key == registry)
            .or_else(|| self.entries.iter().find(|(_, host, _)| *host == wanted))
            .map(|(_, _, auth)| auth.clone())
    }
}

/// `https://Host:5000/v1/` → `host:5000`; Docker Hub names → `index.docker.io`.
fn normalize_registry(key: &str) -> String {
    let without_scheme = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = without_scheme
        .split('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if DOCKER_HUB_NAMES.contains(&host.as_str()) {
        DOCKER_HUB_NAMES[1].to_string()
    } else {
        host
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(username: &str, password: &str) -> RegistryAuth {
        RegistryAuth::Basic {
            username: username.into(),
            password: password.into(),
        }
    }

    #[test]
    fn matches_the_key_forms_docker_writes() {
        let config = DockerConfig::parse(
            br#"{"auths": {
                "https://registry.example.com/v1/": {"auth": "YWxpY2U6czNjcmV0"},
                "http://plain.example:5000": {"username": "bob", "password": "pw"},
                "https://index.docker.io/v1/": {"auth": "aHViOmh1Yi1wdw=="},
                "helper-only.example": {"identitytoken": "t"}
            }}"#,
            "test",
        )
        .unwrap();
        assert_eq!(
            config.auth_for("registry.example.com"),
            Some(basic("alice", "s3cret"))
        );
        assert_eq!(
            config.auth_for("plain.example:5000"),
            Some(basic("bob", "pw"))
        );
        assert_eq!(config.auth_for("docker.io"), Some(basic("hub", "hub-pw")));
        assert_eq!(
            config.auth_for("plain.example"),
            None,
            "the port is part of the host"
        );
        assert_eq!(config.auth_for("helper-only.example"), None);
        assert_eq!(config.auth_for("other.example"), None);
    }

    #[test]
    fn exact_key_wins_over_normalized_key() {
        let config = DockerConfig::parse(
            br#"{"auths": {"https://r.example": {"auth": "YTph"}, "r.example": {"auth": "Yjpi"}}}"#,
            "test",
        )
        .unwrap();
        assert_eq!(config.auth_for("r.example"), Some(basic("b", "b")));
    }

    #[test]
    fn first_secret_with_an_entry_wins() {
        let unrelated =
            DockerConfig::parse(br#"{"auths": {"other.example": {"auth": "eDp5"}}}"#, "one")
                .unwrap();
        let first = DockerConfig::parse(
            br#"{"auths": {"r.example": {"auth": "Zmlyc3Q6MQ"}}}"#,
            "two",
        )
        .unwrap();
        let second = DockerConfig::parse(
            br#"{"auths": {"r.example": {"auth": "c2Vjb25kOjI="}}}"#,
            "three",
        )
        .unwrap();
        let configs = [unrelated, first, second];
        assert_eq!(
            RegistryAuth::from_docker_configs(&configs, "r.example"),
            basic("first", "1")
        );
        assert_eq!(
            RegistryAuth::from_docker_configs(&configs, "none.example"),
            RegistryAuth::Anonymous
        );
    }

    #[test]
    fn errors_and_debug_never_show_credentials() {
        let secret = "hunter2-very-secret";
        let not_base64 = format!(r#"{{"auths": {{"r.example": {{"auth": "{secret}!!"}}}}}}"#);
        let wrong_type = format!(r#"{{"auths": {{"r.example": {{"auth": ["{secret}"]}}}}}}"#);
        for input in [not_base64, wrong_type] {
            let error = DockerConfig::parse(input.as_bytes(), "ns/pull-secret").unwrap_err();
            assert_eq!(error.reason(), "InvalidCredentials");
            let shown = format!("{error} {error:?}");
            assert!(shown.contains("ns/pull-secret"), "{shown}");
            assert!(!shown.contains(secret), "{shown}");
        }
        let config = DockerConfig::parse(
            format!(r#"{{"auths": {{"r.example": {{"username": "u", "password": "{secret}"}}}}}}"#)
                .as_bytes(),
            "test",
        )
        .unwrap();
        let auth = config.auth_for("r.example").unwrap();
        let shown = format!("{config:?} {auth:?}");
        assert!(shown.contains("r.example"), "{shown}");
        assert!(!shown.contains(secret), "{shown}");
    }

    #[test]
    fn reads_a_docker_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        assert_eq!(
            RegistryAuth::from_docker_config_file(&path, "r.example").unwrap(),
            RegistryAuth::Anonymous,
            "a missing file means anonymous"
        );
        std::fs::write(
            &path,
            br#"{"auths": {"r.example": {"auth": "dTpw"}}, "credsStore": "desktop"}"#,
        )
        .unwrap();
        assert_eq!(
            RegistryAuth::from_docker_config_file(&path, "r.example").unwrap(),
            basic("u", "p")
        );
        std::fs::write(&path, b"{not json").unwrap();
        assert_eq!(
            RegistryAuth::from_docker_config_file(&path, "r.example")
                .unwrap_err()
                .reason(),
            "InvalidCredentials"
        );
    }
}
