//! Throw-away certificates: one CA signs the API server's and the webhook's serving
//! certificates and the admin's client certificate; a separate key signs service-account
//! tokens. All keys are ECDSA P-256, which kube-apiserver, client-go and rustls all accept.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

use crate::error::{Error, Result};

/// The user name of the admin client certificate.
pub(crate) const ADMIN_USER: &str = "agentic-testenv-admin";
/// The group that makes the admin a cluster superuser without any RBAC binding.
const ADMIN_GROUP: &str = "system:masters";

/// A PEM certificate and its PEM (PKCS#8) private key.
pub(crate) struct CertAndKey {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
}

/// Everything the control plane needs to speak TLS and sign tokens.
pub(crate) struct Pki {
    pub(crate) ca_pem: String,
    pub(crate) apiserver: CertAndKey,
    pub(crate) admin: CertAndKey,
    pub(crate) webhook: CertAndKey,
    /// Signs (private key) and verifies (public key) service-account tokens.
    pub(crate) service_account_key_pem: String,
    pub(crate) service_account_public_pem: String,
}

impl Pki {
    pub(crate) fn generate() -> Result<Pki> {
        let ca_key = generate_key("the CA key")?;
        let mut ca_params = CertificateParams::default();
        ca_params.distinguished_name = name("agentic-testenv-ca", None);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(cert_error("the CA"))?;

        let apiserver = leaf(
            &ca,
            "the API server certificate",
            "kube-apiserver",
            &[
                "127.0.0.1",
                "localhost",
                // The in-cluster names and the first service IP, as a real cluster has them.
                "10.0.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            Usage::Server,
        )?;
        let webhook = leaf(
            &ca,
            "the webhook certificate",
            "agent-sandbox-webhook",
            &["127.0.0.1", "localhost"],
            Usage::Server,
        )?;
        let admin = leaf(
            &ca,
            "the admin client certificate",
            ADMIN_USER,
            &[],
            Usage::Client { group: ADMIN_GROUP },
        )?;
        let service_account = generate_key("the service-account signing key")?;

        Ok(Pki {
            ca_pem: ca.pem(),
            apiserver,
            admin,
            webhook,
            service_account_key_pem: service_account.serialize_pem(),
            service_account_public_pem: service_account.public_key_pem(),
        })
    }
}

enum Usage {
    Server,
    Client { group: &'static str },
}

fn leaf(
    ca: &CertifiedIssuer<'_, KeyPair>,
    what: &'static str,
    common_name: &str,
    subject_alt_names: &[&str],
    usage: Usage,
) -> Result<CertAndKey> {
    let key = generate_key(what)?;
    let names: Vec<String> = subject_alt_names.iter().map(|s| (*s).to_owned()).collect();
    let mut params = CertificateParams::new(names).map_err(cert_error(what))?;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    match usage {
        Usage::Server => {
            params.distinguished_name = name(common_name, None);
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        }
        Usage::Client { group } => {
            // Kubernetes reads the user from CN and the groups from O.
            params.distinguished_name = name(common_name, Some(group));
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        }
    }
    let cert = params.signed_by(&key, ca).map_err(cert_error(what))?;
    Ok(CertAndKey {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    if let Some(organization) = organization {
        name.push(DnType::OrganizationName, organization);
    }
    name
}

fn generate_key(what: &'static str) -> Result<KeyPair> {
    KeyPair::generate().map_err(cert_error(what))
}

fn cert_error(what: &'static str) -> impl FnOnce(rcgen::Error) -> Error {
    move |source| Error::Certificate { what, source }
}
