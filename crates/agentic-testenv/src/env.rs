//! etcd + kube-apiserver (+ the agent-sandbox controller, + a registry, + a node,
//! + kube-controller-manager) on loopback.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::OnceCell;

use crate::error::{Error, Result};
use crate::images::TestImages;
use crate::net::{BIND_ATTEMPTS, free_port, http_get_status, port_taken};
use crate::node::{Node, NodeBinaries, PodAccess};
use crate::pki::Pki;
use crate::registry::Registry;
use crate::supervisor::Supervisor;
use crate::wait_for;

/// Environment variable naming the directory of control-plane and node binaries: the last
/// line that `hack/testenv-tools.sh` (`make testenv`) prints. The agent-sandbox CRD manifests
/// are read from `$AGENTIC_TESTENV_BIN/../crds/agent-sandbox/`.
pub const BIN_DIR_ENV: &str = "AGENTIC_TESTENV_BIN";

const ETCD: &str = "etcd";
const APISERVER: &str = "kube-apiserver";
const CONTROLLER_MANAGER: &str = "kube-controller-manager";
/// The controllers a Deployment and the pods of a chart need: Deployments and ReplicaSets
/// create the pods, the garbage collector removes what an uninstall leaves to it, every
/// namespace gets its `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap that
/// token volumes project, and deleted namespaces go.
const CONTROLLERS: &str = "deployment-controller,replicaset-controller,\
garbage-collector-controller,serviceaccount-controller,serviceaccount-token-controller,\
root-ca-certificate-publisher-controller,namespace-controller";
const SANDBOX_CONTROLLER: &str = "agent-sandbox-controller";
const NODE_BINARIES: [&str; 5] = [
    "containerd",
    "containerd-shim-runc-v2",
    "kubelet",
    "kube-scheduler",
    "pause",
];
const FIELD_MANAGER: &str = "agentic-testenv";
/// The service network the API server allocates ClusterIPs from; nothing routes it but, with
/// [`TestEnvOptions::with_workloads`], the first address (the `kubernetes` Service).
const SERVICE_CIDR: &str = "10.0.0.0/24";
const KUBERNETES_SERVICE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 443);
const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

const ETCD_READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Generous: two cores may be busy compiling while the API server starts.
const APISERVER_READY_TIMEOUT: Duration = Duration::from_secs(90);
const CRD_ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(30);
const CONTROLLER_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Generous, like the API server's: it starts every informer before its first sync.
const CONTROLLER_MANAGER_READY_TIMEOUT: Duration = Duration::from_secs(90);

/// What [`TestEnv::start`] runs besides etcd and kube-apiserver.
#[allow(clippy::struct_excessive_bools)] // Independent choices a test makes.
#[derive(Debug, Clone, Default)]
pub struct TestEnvOptions {
    /// Run the agent-sandbox controller against the API server. It reconciles `Sandbox`
    /// objects into Pods and Services (which stay Pending: there are no nodes) and serves
    /// the conversion webhook of the agent-sandbox CRDs.
    pub with_agent_sandbox: bool,
    /// Run an OCI registry next to the control plane; see [`TestEnv::registry_addr`].
    pub with_registry: bool,
    /// Run a real node (containerd, runc, kubelet, kube-scheduler) so that pods are
    /// scheduled, pull their images and run; see [`TestEnv::images`]. Implies a registry:
    /// the node's images are pushed there. Needs root.
    pub with_node: bool,
    /// Make the cluster one that workloads such as the operator's chart run on: run
    /// kube-controller-manager (Deployments, ReplicaSets, garbage collection, ServiceAccounts
    /// and their tokens, namespace deletion), turn the `ServiceAccount` admission plugin on
    /// (pods get a token), and let pods on the node reach the API server through the
    /// `kubernetes` Service and the registry at [`TestEnv::pod_registry_addr`]. Implies
    /// [`TestEnvOptions::with_node`]. Both stay bound to loopback; see the `node` module.
    /// The `konveyor.io` CRDs are not installed: the chart or configuration under test
    /// installs them, as on a fresh cluster.
    pub with_workloads: bool,
    /// The directory of control-plane binaries; `None` reads [`BIN_DIR_ENV`].
    pub bin_dir: Option<PathBuf>,
}

/// A running control plane: etcd, kube-apiserver and optionally the agent-sandbox controller
/// and a [`Registry`], all on 127.0.0.1, with the `konveyor.io` and agent-sandbox CRDs
/// installed and established.
///
/// Without [`TestEnvOptions::with_node`] there are no nodes and no scheduler: Pods stay
/// Pending. With it, one node called `localhost` runs them for real (see the `node` module).
/// Unless [`TestEnvOptions::with_workloads`] asks for one, there is no controller-manager:
/// nothing garbage-collects owned objects, deleted namespaces stay Terminating, and
/// Deployments create no pods. The `ServiceAccount` admission plugin is then off, because no
/// namespace gets a `default` ServiceAccount and every Pod would be rejected; Pods are
/// therefore stored exactly as created, without a token volume. RBAC is enforced for
/// everyone but the admin of [`TestEnv::client`], who is in `system:masters`; ServiceAccount
/// tokens (TokenRequest) and impersonation work. No feature gates are set: `ImageVolume`,
/// which agent pods use to mount skills, is GA and locked on in Kubernetes 1.36.
///
/// Everything is stopped and the work directory removed when the value is dropped; see the
/// crate docs for what happens when it isn't.
pub struct TestEnv {
    config: kube::Config,
    kubeconfig_path: PathBuf,
    apiserver_url: String,
    /// Declared before the registry and the control plane, so it stops first.
    node: Option<Node>,
    registry: Option<Registry>,
    supervisor: Supervisor,
}

static SHARED: OnceCell<std::result::Result<TestEnv, String>> = OnceCell::const_new();
static SHARED_WITH_NODE: OnceCell<std::result::Result<TestEnv, String>> = OnceCell::const_new();

impl TestEnv {
    /// Starts a control plane and waits until it serves, with every CRD established.
    pub async fn start(options: TestEnvOptions) -> Result<TestEnv> {
        let started = Instant::now();
        let with_node = options.with_node || options.with_workloads;
        let bins = Binaries::locate(
            options.bin_dir.as_deref(),
            options.with_agent_sandbox,
            with_node,
            options.with_workloads,
        )?;
        let sandbox_crds = read_sandbox_crds(&bins.crd_dir)?;
        let registry = async {
            if options.with_registry || with_node {
                Registry::start().await.map(Some)
            } else {
                Ok(None)
            }
        };
        let (control_plane, registry) = tokio::join!(
            ControlPlane::start_on_free_ports(&bins, sandbox_crds, options.with_agent_sandbox),
            registry
        );
        let (control_plane, registry) = (control_plane?, registry?);
        let node = match (&bins.node, &registry) {
            (Some(node_bins), Some(registry)) => {
                let client =
                    kube::Client::try_from(control_plane.config.clone()).map_err(|error| {
                        Error::Kubeconfig {
                            path: control_plane.kubeconfig_path.clone(),
                            message: error.to_string(),
                        }
                    })?;
                let pod_access = options.with_workloads.then(|| PodAccess {
                    apiserver: control_plane.apiserver_addr,
                    kubernetes_service: KUBERNETES_SERVICE,
                    registry: registry.socket_addr(),
                });
                Some(
                    Node::start(
                        node_bins,
                        &client,
                        &control_plane.kubeconfig_path,
                        &registry.addr(),
                        pod_access.as_ref(),
                    )
                    .await?,
                )
            }
            _ => None,
        };
        tracing::info!(
            apiserver = %control_plane.apiserver_url,
            registry = registry.as_ref().map(Registry::addr),
            node = node.is_some(),
            workloads = options.with_workloads,
            elapsed = ?started.elapsed(),
            "test environment ready"
        );
        Ok(TestEnv {
            config: control_plane.config,
            kubeconfig_path: control_plane.kubeconfig_path,
            apiserver_url: control_plane.apiserver_url,
            registry,
            node,
            supervisor: control_plane.supervisor,
        })
    }

    /// Like [`TestEnv::shared`], with a real node as well ([`TestEnvOptions::with_node`]):
    /// pods run. Test binaries that write pod status by hand use [`TestEnv::shared`], where
    /// no kubelet competes with them.
    pub async fn shared_with_node() -> Result<&'static TestEnv> {
        Self::shared_in(&SHARED_WITH_NODE, true).await
    }

    /// One environment per test binary, with the agent-sandbox controller and a registry,
    /// started by the first caller and shared by every test after it. Give each test its own
    /// namespace ([`TestEnv::namespace`]) so tests can run in parallel.
    ///
    /// Statics are never dropped; the watchdog stops the processes and removes the work
    /// directory when the test binary exits. If starting fails, every caller gets the error.
    pub async fn shared() -> Result<&'static TestEnv> {
        Self::shared_in(&SHARED, false).await
    }

    async fn shared_in(
        cell: &'static OnceCell<std::result::Result<TestEnv, String>>,
        with_node: bool,
    ) -> Result<&'static TestEnv> {
        let outcome = cell
            .get_or_init(|| async {
                TestEnv::start(TestEnvOptions {
                    with_agent_sandbox: true,
                    with_registry: true,
                    with_node,
                    with_workloads: false,
                    bin_dir: None,
                })
                .await
                .map_err(|error| error.to_string())
            })
            .await;
        outcome
            .as_ref()
            .map_err(|message| Error::SharedStartFailed(message.clone()))
    }

    /// A new client for the cluster admin (`system:masters`), with `default` as its
    /// namespace.
    ///
    /// Each call builds a fresh client on the calling tokio runtime; every `#[tokio::test]`
    /// has a runtime of its own, and a client must not outlive the runtime it was made on.
    /// Must be called from within a tokio runtime.
    #[allow(clippy::expect_used)] // `start` proved the configuration, see below.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config.clone())
            // `start` built a client from this very configuration, so this can't fail.
            .expect("the test environment's client configuration was validated at start")
    }

    /// The client configuration behind [`TestEnv::client`], to build clients with other
    /// settings (for example an impersonated user).
    pub fn kube_config(&self) -> kube::Config {
        self.config.clone()
    }

    /// A kubeconfig file for the admin, with the credentials embedded, for `kubectl`, helm
    /// or a process under test.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// `https://127.0.0.1:PORT`.
    pub fn apiserver_url(&self) -> &str {
        &self.apiserver_url
    }

    /// The API server's `127.0.0.1:PORT`, for a proxy put in front of it.
    #[allow(clippy::expect_used)] // The URL was formatted from this very address.
    pub fn apiserver_addr(&self) -> SocketAddr {
        self.apiserver_url
            .trim_start_matches("https://")
            .parse()
            .expect("the API server's URL is https://127.0.0.1:PORT")
    }

    /// [`TestEnv::kube_config`] with the API server reached through `proxy`, a loopback
    /// proxy in front of [`TestEnv::apiserver_addr`].
    #[allow(clippy::expect_used)] // `https://` and a socket address always make a URI.
    pub fn kube_config_via(&self, proxy: SocketAddr) -> kube::Config {
        let mut config = self.config.clone();
        config.cluster_url = format!("https://{proxy}").parse().expect("a proxy's URL");
        config
    }

    /// `127.0.0.1:PORT` of the registry, if one was started.
    pub fn registry_addr(&self) -> Option<String> {
        self.registry.as_ref().map(Registry::addr)
    }

    /// `10.250.N.1:PORT`: the registry as pods on the node reach it, and containerd pulls
    /// from it, over plain HTTP; `None` without [`TestEnvOptions::with_workloads`]. Push
    /// images an operator pod resolves (skills) here.
    pub fn pod_registry_addr(&self) -> Option<String> {
        self.node.as_ref().and_then(Node::pod_registry_addr)
    }

    /// Creates a namespace named `<prefix>-<random suffix>` for one test and returns its name.
    pub async fn namespace(&self, prefix: &str) -> Result<String> {
        // generateName appends five characters; a namespace name is a DNS label (63).
        const MAX_PREFIX: usize = 63 - 1 - 5;
        let valid = prefix.len() <= MAX_PREFIX
            && prefix.starts_with(|c: char| c.is_ascii_lowercase())
            && prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid {
            return Err(Error::InvalidNamespacePrefix {
                prefix: prefix.to_owned(),
                max: MAX_PREFIX,
            });
        }
        let namespace = Namespace {
            metadata: ObjectMeta {
                generate_name: Some(format!("{prefix}-")),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let created = Api::<Namespace>::all(self.client())
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(Error::kube(format!("creating a namespace {prefix}-*")))?;
        created.metadata.name.ok_or_else(|| {
            Error::UnexpectedResponse(format!("the namespace {prefix}-* came back without a name"))
        })
    }

    /// Pids of every process this environment started (including watchdogs), for checks
    /// that nothing outlives it.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = self.supervisor.pids();
        if let Some(registry) = &self.registry {
            pids.extend(registry.pids());
        }
        if let Some(node) = &self.node {
            pids.extend(node.pids());
        }
        pids
    }

    /// The images pushed for the node (pause, busybox, the stub agent), pinned by digest;
    /// `None` without a node.
    pub fn images(&self) -> Option<&TestImages> {
        self.node.as_ref().map(Node::images)
    }

    /// This machine's address on the node's pod bridge (`10.250.N.1`): a server bound to it
    /// is reachable from pods, and from nowhere but this machine; `None` without a node.
    pub fn node_host_address(&self) -> Option<std::net::Ipv4Addr> {
        self.node.as_ref().map(Node::host_address)
    }

    /// The node's work directory (containerd's and kubelet's configuration, state and
    /// logs: `containerd.log`, `kubelet.log`, `kube-scheduler.log`); `None` without a node.
    pub fn node_dir(&self) -> Option<&Path> {
        self.node.as_ref().map(Node::dir)
    }

    /// The temporary directory holding certificates, etcd's data and the logs
    /// (`<name>.log`) of the control plane; removed when the environment stops.
    pub fn work_dir(&self) -> &Path {
        self.supervisor.dir()
    }

    /// The registry, if one was started.
    pub fn registry(&self) -> Option<&Registry> {
        self.registry.as_ref()
    }

    /// Stops kube-apiserver, keeps it down for `downtime`, starts it again on the same
    /// address with the same data (etcd keeps running), and waits until it is ready: an API
    /// server outage and restart, for fault tests. Watches see their connections drop and,
    /// after the restart, `410 Gone` for resource versions the new server has not seen.
    pub async fn restart_apiserver(&mut self, downtime: Duration) -> Result<()> {
        let command = self
            .supervisor
            .stop(APISERVER)
            .ok_or_else(|| Error::UnexpectedResponse("kube-apiserver is not running".to_owned()))?;
        tokio::time::sleep(downtime).await;
        self.supervisor.spawn(APISERVER, command)?;
        let client = self.client();
        wait_apiserver_ready(&mut self.supervisor, &client, &self.apiserver_url).await
    }
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("apiserver_url", &self.apiserver_url)
            .field("kubeconfig_path", &self.kubeconfig_path)
            .field("registry", &self.registry)
            .field("images", &self.images())
            .finish_non_exhaustive()
    }
}

/// Where the binaries and manifests of `hack/testenv-tools.sh` are.
struct Binaries {
    etcd: PathBuf,
    apiserver: PathBuf,
    /// With [`TestEnvOptions::with_workloads`].
    controller_manager: Option<PathBuf>,
    sandbox_controller: PathBuf,
    crd_dir: PathBuf,
    node: Option<NodeBinaries>,
}

impl Binaries {
    fn locate(
        bin_dir: Option<&Path>,
        with_agent_sandbox: bool,
        with_node: bool,
        with_workloads: bool,
    ) -> Result<Binaries> {
        let bin_dir = match bin_dir {
            Some(dir) => dir.to_path_buf(),
            None => std::env::var_os(BIN_DIR_ENV)
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
                .ok_or(Error::BinDirUnset)?,
        };
        const HINT: &str =
            "run `make testenv` and set AGENTIC_TESTENV_BIN to the directory it prints";
        let require = |name: &'static str| {
            let path = bin_dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(Error::BinaryMissing {
                    name,
                    path,
                    hint: HINT,
                })
            }
        };
        let sandbox_controller = if with_agent_sandbox {
            require(SANDBOX_CONTROLLER)?
        } else {
            bin_dir.join(SANDBOX_CONTROLLER)
        };
        let node = if with_node {
            for name in NODE_BINARIES {
                require(name)?;
            }
            Some(NodeBinaries {
                containerd: bin_dir.join("containerd"),
                kubelet: bin_dir.join("kubelet"),
                scheduler: bin_dir.join("kube-scheduler"),
                pause: bin_dir.join("pause"),
                bin_dir: bin_dir.clone(),
            })
        } else {
            None
        };
        let controller_manager = if with_workloads {
            Some(require(CONTROLLER_MANAGER)?)
        } else {
            None
        };
        Ok(Binaries {
            node,
            controller_manager,
            etcd: require(ETCD)?,
            apiserver: require(APISERVER)?,
            sandbox_controller,
            crd_dir: bin_dir.join("..").join("crds").join("agent-sandbox"),
        })
    }
}

/// Reads every `*.yaml` CRD manifest in `dir`, sorted by file name.
fn read_sandbox_crds(dir: &Path) -> Result<Vec<CustomResourceDefinition>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(Error::io("reading the agent-sandbox CRD directory", dir))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    if paths.is_empty() {
        return Err(Error::NoCrdManifests {
            path: dir.to_path_buf(),
        });
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).map_err(Error::io("reading", &path))?;
            let mut crd: CustomResourceDefinition =
                serde_saphyr::from_str(&text).map_err(|error| Error::CrdManifest {
                    path: path.clone(),
                    message: error.to_string(),
                })?;
            // Status belongs to the server; an applied one would be ignored at best.
            crd.status = None;
            Ok(crd)
        })
        .collect()
}

/// The processes and client configuration while the environment is being assembled.
struct ControlPlane {
    supervisor: Supervisor,
    config: kube::Config,
    kubeconfig_path: PathBuf,
    apiserver_url: String,
    apiserver_addr: SocketAddr,
}

impl ControlPlane {
    /// [`ControlPlane::start`], again on other ports when etcd or kube-apiserver found the
    /// port it was given taken.
    async fn start_on_free_ports(
        bins: &Binaries,
        sandbox_crds: Vec<CustomResourceDefinition>,
        with_agent_sandbox: bool,
    ) -> Result<ControlPlane> {
        let mut attempt = 1;
        loop {
            match Self::start(bins, sandbox_crds.clone(), with_agent_sandbox).await {
                Err(error) if attempt < BIND_ATTEMPTS && port_taken(&error) => {
                    tracing::debug!(attempt, %error, "a control-plane port was taken; retrying");
                    attempt += 1;
                }
                started => return started,
            }
        }
    }

    async fn start(
        bins: &Binaries,
        mut sandbox_crds: Vec<CustomResourceDefinition>,
        with_agent_sandbox: bool,
    ) -> Result<ControlPlane> {
        let mut supervisor = Supervisor::new("agentic-testenv-")?;
        let dir = supervisor.dir().to_path_buf();
        let pki = Pki::generate()?;
        let write = |name: &str, contents: &str| -> Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, contents).map_err(Error::io("writing", &path))?;
            Ok(path)
        };
        let ca_file = write("ca.crt", &pki.ca_pem)?;
        let apiserver_cert = write("apiserver.crt", &pki.apiserver.cert_pem)?;
        let apiserver_key = write("apiserver.key", &pki.apiserver.key_pem)?;
        let sa_key = write("service-account.key", &pki.service_account_key_pem)?;
        let sa_public = write("service-account.pub", &pki.service_account_public_pem)?;

        // etcd: plain HTTP on loopback, no fsync: the data is thrown away anyway.
        let etcd_port = free_port()?;
        let etcd_peer_port = free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd_peer_url = format!("http://127.0.0.1:{etcd_peer_port}");
        let mut etcd = Command::new(&bins.etcd);
        etcd.arg("--name=testenv")
            .arg(format!("--data-dir={}", dir.join("etcd").display()))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls={etcd_peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={etcd_peer_url}"))
            .arg(format!("--initial-cluster=testenv={etcd_peer_url}"))
            .arg("--unsafe-no-fsync")
            .arg("--log-level=warn");
        supervisor.spawn(ETCD, etcd)?;
        let etcd_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, etcd_port));
        wait_for(
            &mut supervisor,
            ETCD,
            format!("etcd at {etcd_url}"),
            ETCD_READY_TIMEOUT,
            || async { http_get_status(etcd_addr, "/health").await == Some(200) },
        )
        .await?;

        let apiserver_port = free_port()?;
        let apiserver_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, apiserver_port));
        let apiserver_url = format!("https://{apiserver_addr}");
        let mut apiserver = Command::new(&bins.apiserver);
        apiserver
            .arg(format!("--etcd-servers={etcd_url}"))
            .arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--secure-port={apiserver_port}"))
            .arg(format!(
                "--cert-dir={}",
                dir.join("apiserver-certs").display()
            ))
            .arg(format!("--tls-cert-file={}", apiserver_cert.display()))
            .arg(format!(
                "--tls-private-key-file={}",
                apiserver_key.display()
            ))
            .arg(format!("--client-ca-file={}", ca_file.display()))
            .arg("--authorization-mode=RBAC")
            .arg(format!("--service-cluster-ip-range={SERVICE_CIDR}"))
            .arg(format!("--service-account-issuer={SERVICE_ACCOUNT_ISSUER}"))
            .arg(format!(
                "--service-account-key-file={}",
                sa_public.display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                sa_key.display()
            ))
            .arg("--allow-privileged=true")
            // The test node's kubelet serves on 127.0.0.1 only; the node is called
            // `localhost`, so its Hostname address reaches it.
            .arg("--kubelet-preferred-address-types=Hostname,InternalIP")
            .arg("--profiling=false")
            // Server-side sharded lists and watches (KEP-5866, alpha in 1.36), which the
            // operator's `--shard-watch=server` asks for.
            .arg("--feature-gates=ShardedListAndWatch=true");
        if bins.controller_manager.is_none() {
            // No controller-manager creates `default` ServiceAccounts; see the type docs.
            apiserver.arg("--disable-admission-plugins=ServiceAccount");
        }
        supervisor.spawn(APISERVER, apiserver)?;

        let kubeconfig_path = write("kubeconfig", &kubeconfig(&apiserver_url, &pki))?;
        let config = load_config(&kubeconfig_path).await?;
        let client = kube::Client::try_from(config.clone()).map_err(|error| Error::Kubeconfig {
            path: kubeconfig_path.clone(),
            message: error.to_string(),
        })?;
        wait_apiserver_ready(&mut supervisor, &client, &apiserver_url).await?;

        let webhook_port = free_port()?;
        if with_agent_sandbox {
            // Point the conversion webhooks at the controller on loopback: there is no
            // Service network to reach it through.
            let url = format!("https://127.0.0.1:{webhook_port}/convert");
            for crd in &mut sandbox_crds {
                if let Some(webhook) = crd
                    .spec
                    .conversion
                    .as_mut()
                    .and_then(|conversion| conversion.webhook.as_mut())
                {
                    webhook.client_config = Some(WebhookClientConfig {
                        url: Some(url.clone()),
                        ca_bundle: Some(ByteString(pki.ca_pem.clone().into_bytes())),
                        service: None,
                    });
                }
            }
        }
        // A cluster for workloads is a fresh one: the chart or configuration under test
        // installs the konveyor.io and trust policy CRDs, as it does for users.
        let our_crds = if bins.controller_manager.is_some() {
            Vec::new()
        } else {
            agentic_api::crds()
                .into_iter()
                .chain(agentic_api::trust_crds())
                .collect()
        };
        let crds: Vec<CustomResourceDefinition> =
            our_crds.into_iter().chain(sandbox_crds).collect();
        install_crds(&client, crds).await?;

        if with_agent_sandbox {
            let cert_dir = dir.join("agent-sandbox-webhook");
            std::fs::create_dir_all(&cert_dir).map_err(Error::io("creating", &cert_dir))?;
            for (name, contents) in [
                ("tls.crt", &pki.webhook.cert_pem),
                ("tls.key", &pki.webhook.key_pem),
            ] {
                let path = cert_dir.join(name);
                std::fs::write(&path, contents).map_err(Error::io("writing", &path))?;
            }
            let probe_port = free_port()?;
            let mut controller = Command::new(&bins.sandbox_controller);
            controller
                .arg(format!("--kubeconfig={}", kubeconfig_path.display()))
                .arg("--leader-elect=false")
                .arg("--extensions")
                .arg("--metrics-bind-address=0")
                .arg(format!(
                    "--health-probe-bind-address=127.0.0.1:{probe_port}"
                ))
                .arg(format!("--webhook-port={webhook_port}"))
                .arg(format!("--webhook-cert-dir={}", cert_dir.display()))
                .arg("--webhook-cert-name=tls.crt")
                .arg("--webhook-key-name=tls.key")
                // We made the certificates and pointed the CRDs at them.
                .arg("--manage-webhook-certs=false");
            supervisor.spawn(SANDBOX_CONTROLLER, controller)?;
            let probe_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, probe_port));
            let webhook_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, webhook_port));
            wait_for(
                &mut supervisor,
                SANDBOX_CONTROLLER,
                format!("the agent-sandbox controller (readyz on {probe_addr}, webhook on {webhook_addr})"),
                CONTROLLER_READY_TIMEOUT,
                || async {
                    http_get_status(probe_addr, "/readyz").await == Some(200)
                        && tokio::net::TcpStream::connect(webhook_addr).await.is_ok()
                },
            )
            .await?;
        }

        if let Some(binary) = &bins.controller_manager {
            let mut controller_manager = Command::new(binary);
            controller_manager
                .arg(format!("--kubeconfig={}", kubeconfig_path.display()))
                .arg(format!("--controllers={CONTROLLERS}"))
                .arg("--leader-elect=false")
                // Nothing needs its health or metrics endpoints: the tests see it work.
                .arg("--secure-port=0")
                .arg(format!(
                    "--service-account-private-key-file={}",
                    sa_key.display()
                ))
                .arg(format!("--root-ca-file={}", ca_file.display()))
                .arg("--profiling=false");
            supervisor.spawn(CONTROLLER_MANAGER, controller_manager)?;
            wait_controller_manager(&mut supervisor, &client).await?;
        }

        Ok(ControlPlane {
            supervisor,
            config,
            kubeconfig_path,
            apiserver_url,
            apiserver_addr,
        })
    }
}

/// Waits until kube-controller-manager has given the `default` namespace what every pod
/// there needs: its ServiceAccount and the CA bundle its token volume projects.
async fn wait_controller_manager(supervisor: &mut Supervisor, client: &kube::Client) -> Result<()> {
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), "default");
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), "default");
    wait_for(
        supervisor,
        CONTROLLER_MANAGER,
        "kube-controller-manager (ServiceAccount default/default and ConfigMap \
         default/kube-root-ca.crt)"
            .to_owned(),
        CONTROLLER_MANAGER_READY_TIMEOUT,
        || async {
            matches!(accounts.get_opt("default").await, Ok(Some(_)))
                && matches!(config_maps.get_opt("kube-root-ca.crt").await, Ok(Some(_)))
        },
    )
    .await
}

/// Waits until kube-apiserver answers `/readyz`, failing early with its log if it exits.
async fn wait_apiserver_ready(
    supervisor: &mut Supervisor,
    client: &kube::Client,
    url: &str,
) -> Result<()> {
    wait_for(
        supervisor,
        APISERVER,
        format!("kube-apiserver at {url}/readyz"),
        APISERVER_READY_TIMEOUT,
        || async {
            let request = http::Request::get("/readyz").body(Vec::new());
            match request {
                Ok(request) => client.request_text(request).await.is_ok(),
                Err(_) => false,
            }
        },
    )
    .await
}

/// A kubeconfig for the admin with every credential embedded. JSON is valid YAML, and
/// client-go, kubectl and kube-rs all read it.
fn kubeconfig(server: &str, pki: &Pki) -> String {
    let encode = |pem: &str| BASE64.encode(pem);
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "agentic-testenv",
            "cluster": {
                "server": server,
                "certificate-authority-data": encode(&pki.ca_pem),
            },
        }],
        "users": [{
            "name": crate::pki::ADMIN_USER,
            "user": {
                "client-certificate-data": encode(&pki.admin.cert_pem),
                "client-key-data": encode(&pki.admin.key_pem),
            },
        }],
        "contexts": [{
            "name": "agentic-testenv",
            "context": {
                "cluster": "agentic-testenv",
                "user": crate::pki::ADMIN_USER,
                "namespace": "default",
            },
        }],
        "current-context": "agentic-testenv",
    })
    .to_string()
}

async fn load_config(path: &Path) -> Result<kube::Config> {
    let error = |message: String| Error::Kubeconfig {
        path: path.to_path_buf(),
        message,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| error(e.to_string()))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| error(e.to_string()))
}

/// Server-side applies every CRD and waits until all are Established.
async fn install_crds(client: &kube::Client, crds: Vec<CustomResourceDefinition>) -> Result<()> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::with_capacity(crds.len());
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(crd))
            .await
            .map_err(Error::kube(format!(
                "applying CustomResourceDefinition {name}"
            )))?;
        names.push(name);
    }
    let established = names.iter().map(|name| wait_established(&api, name));
    futures::future::try_join_all(established).await?;
    Ok(())
}

/// Polls the CRD called `name` until its `Established` condition is `True`.
async fn wait_established(api: &Api<CustomResourceDefinition>, name: &str) -> Result<()> {
    let deadline = Instant::now() + CRD_ESTABLISHED_TIMEOUT;
    loop {
        let crd = api.get(name).await.map_err(Error::kube(format!(
            "reading CustomResourceDefinition {name}"
        )))?;
        let established = crd
            .status
            .and_then(|status| status.conditions)
            .unwrap_or_default()
            .iter()
            .any(|condition| condition.type_ == "Established" && condition.status == "True");
        if established {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::CrdNotEstablished {
                name: name.to_owned(),
                timeout: CRD_ESTABLISHED_TIMEOUT,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
