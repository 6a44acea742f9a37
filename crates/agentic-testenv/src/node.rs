//! A real node: containerd (with runc and the CNI bridge plugin), kubelet and kube-scheduler,
//! so pods are scheduled, images pulled and mounted, and containers really run and exit.
//!
//! # Leaving nothing behind
//!
//! containerd and kubelet run inside a PID and mount namespace of their own, held open by a
//! `pause` process that is the namespace's init. When that process goes, the kernel kills
//! every process in the namespace (shims and containers included), and every mount made in
//! it (overlay snapshots, image volumes, pod volumes) goes with the namespace. Inside it,
//! `/run`, `/var/lib` and `/var/log` are fresh tmpfs mounts, so the paths kubelet and
//! containerd hard-code (`/var/lib/kubelet/device-plugins`, `/var/lib/cni`, `/run/containerd`,
//! `/var/log/containers`) never touch the host, and the kernel tunables kubelet sets
//! (`vm.overcommit_memory`, `kernel.panic`, ...) are shadowed by plain files.
//!
//! What does live in the host's namespaces is undone by a cleanup script that runs when the
//! node is dropped and, through the watchdog, however the owning process ends: the bridge
//! the pods are attached to, the iptables and ip6tables chains kubelet creates (only those
//! that were not there before), and the node's cgroups.
//!
//! # Network
//!
//! Pods get addresses on a bridge created for the node, `10.250.N.0/24` with the host at
//! `.1`. The bridge is no gateway and masquerades nothing, so pods reach nothing but each
//! other and the host's bridge address; the host's `ip_forward` is left alone. kubelet
//! serves on 127.0.0.1 only; the node is called `localhost`, so the API server reaches it
//! for logs through its `Hostname` address.
//!
//! With [`PodAccess`], pods also reach the API server and the registry, which stay bound to
//! loopback: a forwarder on the bridge address relays each (on the same port), pods get a
//! route to the `kubernetes` Service's address through the bridge, and one iptables rule
//! rewrites that address to the API server's forwarder, as kube-proxy would. The rule goes
//! with the cleanup script.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node as NodeObject;
use kube::api::{Api, Patch, PatchParams};
use rand::Rng as _;
use serde_json::json;

use crate::error::{Error, Result};
use crate::images::TestImages;
use crate::net::{Forwarder, free_port};
use crate::supervisor::Supervisor;
use crate::wait_for;

/// The node's name, and the address the API server reaches its kubelet at.
pub const NODE_NAME: &str = "localhost";

const CONTAINERD: &str = "containerd";
const KUBELET: &str = "kubelet";
const SCHEDULER: &str = "kube-scheduler";
const NAMESPACE_HOLDER: &str = "node-namespace";
const CNI_BIN_DIR: &str = "/usr/lib/cni";
const CNI_BRIDGE: &str = "/usr/lib/cni/bridge";
const RUNC: &str = "/usr/sbin/runc";
/// The taint kubelet registers the node with; the node lifecycle controller (which does not
/// run here) lifts it once the node is Ready.
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
/// The kernel tunables kubelet writes at start; inside the node's mount namespace each is a
/// plain file, so the host keeps its values.
const SHADOWED_SYSCTLS: [&str; 6] = [
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];

const NAMESPACE_TIMEOUT: Duration = Duration::from_secs(10);
const CONTAINERD_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Generous: two cores may be busy compiling while kubelet starts.
const NODE_READY_TIMEOUT: Duration = Duration::from_secs(90);

/// Sets up the namespace (run by the holder process, inside it), then becomes its init.
/// `$1` is the work directory, `$2` the pause binary.
const NAMESPACE_SCRIPT: &str = r#"
set -eu
dir=$1
pause=$2
# Mounts made from here on propagate inside the namespace (kubelet needs that for its pod
# volumes) and never to the host: unshare made every host mount private first.
mount --make-rshared /
for path in /run /var/lib /var/log; do
  mount -t tmpfs -o mode=0755 tmpfs "$path"
done
for sysctl in $(cat "$dir/sysctls"); do
  shadow="$dir/sysctl/$(echo "$sysctl" | tr / .)"
  cat "/proc/sys/$sysctl" > "$shadow"
  mount --bind "$shadow" "/proc/sys/$sysctl"
done
: > "$dir/namespace-ready"
exec "$pause"
"#;

/// Paths and addresses the node is configured with.
struct Layout {
    dir: PathBuf,
    bridge: String,
    /// The third octet of the node's `10.250.N.0/24`.
    subnet: u8,
    cgroup_root: String,
    kubelet_port: u16,
    kubelet_healthz_port: u16,
}

impl Layout {
    fn host_address(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 250, self.subnet, 1)
    }

    fn containerd_dir(&self) -> PathBuf {
        self.dir.join("containerd")
    }

    fn containerd_socket(&self) -> PathBuf {
        self.containerd_dir().join("containerd.sock")
    }
}

/// What pods on the node reach on this machine besides each other: what an operator running
/// as a pod needs.
pub(crate) struct PodAccess {
    /// The API server, on loopback.
    pub(crate) apiserver: SocketAddr,
    /// The `kubernetes` Service's ClusterIP and port, which kubelet gives every pod as
    /// `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`.
    pub(crate) kubernetes_service: SocketAddrV4,
    /// The registry, on loopback.
    pub(crate) registry: SocketAddr,
}

impl PodAccess {
    /// The iptables arguments (after `-t nat -A` or `-D`) of the rule that sends pods'
    /// connections to the `kubernetes` Service to the API server's forwarder.
    fn service_rule(&self, bridge: &str, host: Ipv4Addr) -> Vec<String> {
        let service = self.kubernetes_service;
        [
            "PREROUTING",
            "-i",
            bridge,
            "-d",
            &format!("{}/32", service.ip()),
            "-p",
            "tcp",
            "--dport",
            &service.port().to_string(),
            "-j",
            "DNAT",
            "--to-destination",
            &format!("{host}:{}", self.apiserver.port()),
        ]
        .map(str::to_owned)
        .to_vec()
    }
}

/// Binaries the node runs, all from the directory `hack/testenv-tools.sh` fills.
pub(crate) struct NodeBinaries {
    pub(crate) bin_dir: PathBuf,
    pub(crate) containerd: PathBuf,
    pub(crate) kubelet: PathBuf,
    pub(crate) scheduler: PathBuf,
    pub(crate) pause: PathBuf,
}

/// A running node; see the module docs. Dropping it stops everything and removes what it
/// created.
pub(crate) struct Node {
    supervisor: Supervisor,
    images: TestImages,
    host_address: Ipv4Addr,
    /// The API server's and the registry's, with [`PodAccess`].
    forwarders: Vec<Forwarder>,
}

impl Node {
    /// Pushes the test images to `registry`, starts the node against the API server of
    /// `client`/`kubeconfig`, and waits until the Node is Ready and schedulable. With
    /// `pod_access`, pods reach the API server and the registry too (see the module docs).
    pub(crate) async fn start(
        bins: &NodeBinaries,
        client: &kube::Client,
        kubeconfig: &Path,
        registry: &str,
        pod_access: Option<&PodAccess>,
    ) -> Result<Node> {
        for (name, path) in [("runc", RUNC), ("the CNI bridge plugin", CNI_BRIDGE)] {
            if !Path::new(path).is_file() {
                return Err(Error::BinaryMissing {
                    name,
                    path: path.into(),
                    hint: "run hack/install-node-packages.sh (make test does)",
                });
            }
        }
        let images = TestImages::push(registry, &bins.pause).await?;

        let id: u32 = rand::rng().random();
        let bridge = format!("agtn{id:08x}");
        let cgroup_root = format!("agentic-testenv-{id:08x}");
        let subnet = free_subnet()?;
        let preexisting_chains = iptables_chains();
        let host_address = Ipv4Addr::new(10, 250, subnet, 1);
        let service_rule = pod_access.map(|access| access.service_rule(&bridge, host_address));
        let cleanup = cleanup_script(
            &bridge,
            &cgroup_root,
            &preexisting_chains,
            service_rule.as_deref(),
        );
        let mut supervisor = Supervisor::with_cleanup("agentic-testenv-node-", cleanup)?;
        let layout = Layout {
            dir: supervisor.dir().to_path_buf(),
            bridge,
            subnet,
            cgroup_root,
            kubelet_port: free_port()?,
            kubelet_healthz_port: free_port()?,
        };

        create_bridge(&layout)?;
        create_cgroup_root(&layout.cgroup_root)?;
        let mut forwarders = Vec::new();
        if let Some(access) = pod_access {
            for target in [access.apiserver, access.registry] {
                let listen = SocketAddr::from((host_address, target.port()));
                forwarders.push(Forwarder::start(listen, target)?);
            }
        }
        if let Some(rule) = &service_rule {
            let mut args = vec!["-t", "nat", "-A"];
            args.extend(rule.iter().map(String::as_str));
            run("iptables", &args)?;
        }
        let pod_registry =
            pod_access.map(|access| format!("{host_address}:{}", access.registry.port()));
        write_configs(
            &layout,
            registry,
            pod_registry.as_deref(),
            pod_access.map(|access| *access.kubernetes_service.ip()),
            &images,
        )?;

        let holder_pid = start_namespace(&mut supervisor, &layout, bins).await?;
        let enter = |program: &Path| {
            let mut command = Command::new("nsenter");
            command
                .arg(format!("--target={holder_pid}"))
                .arg("--mount")
                .arg("--pid")
                .arg("--")
                .arg(program);
            // containerd finds its shim on PATH; the shim finds runc through the config.
            let path = std::env::var("PATH").unwrap_or_default();
            command.env("PATH", format!("{}:{path}", bins.bin_dir.display()));
            command
        };

        let mut containerd = enter(&bins.containerd);
        containerd
            .arg("--config")
            .arg(layout.containerd_dir().join("config.toml"));
        supervisor.spawn(CONTAINERD, containerd)?;
        let socket = layout.containerd_socket();
        wait_for(
            &mut supervisor,
            CONTAINERD,
            format!("containerd at {}", socket.display()),
            CONTAINERD_READY_TIMEOUT,
            || async { tokio::net::UnixStream::connect(&socket).await.is_ok() },
        )
        .await?;

        let mut kubelet = enter(&bins.kubelet);
        kubelet
            .arg(format!(
                "--config={}",
                layout.dir.join("kubelet.yaml").display()
            ))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!(
                "--root-dir={}",
                layout.dir.join("kubelet").display()
            ))
            .arg(format!("--hostname-override={NODE_NAME}"))
            .arg(format!("--node-ip={}", layout.host_address()))
            .arg("--v=1");
        supervisor.spawn(KUBELET, kubelet)?;

        let mut scheduler = Command::new(&bins.scheduler);
        scheduler
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--leader-elect=false")
            // Nothing needs its health or metrics endpoints: the tests see it schedule.
            .arg("--secure-port=0");
        supervisor.spawn(SCHEDULER, scheduler)?;

        let nodes = Api::<NodeObject>::all(client.clone());
        wait_for(
            &mut supervisor,
            KUBELET,
            format!("Node {NODE_NAME} (kubelet)"),
            NODE_READY_TIMEOUT,
            || async {
                nodes
                    .get_opt(NODE_NAME)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|node| node_ready(&node))
            },
        )
        .await?;
        supervisor.check_running(SCHEDULER)?;
        untaint(&nodes).await?;
        Ok(Node {
            supervisor,
            images,
            host_address,
            forwarders,
        })
    }

    /// `10.250.N.1:PORT`: the registry as pods (and containerd) reach it, with [`PodAccess`].
    pub(crate) fn pod_registry_addr(&self) -> Option<String> {
        self.forwarders
            .get(1)
            .map(|forwarder| forwarder.addr().to_string())
    }

    /// The images pushed for the node.
    pub(crate) fn images(&self) -> &TestImages {
        &self.images
    }

    /// The host's address on the pods' bridge: what a pod reaches this machine at.
    pub(crate) fn host_address(&self) -> Ipv4Addr {
        self.host_address
    }

    /// Pids of the node's processes (holder, containerd, kubelet, scheduler, watchdog).
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.supervisor.pids()
    }

    /// The node's work directory: configuration, containerd's and kubelet's state, logs.
    pub(crate) fn dir(&self) -> &Path {
        self.supervisor.dir()
    }
}

/// Starts the process that holds the node's namespaces and returns its pid (the host's view
/// of the namespace's init), once it has set the namespace up.
async fn start_namespace(
    supervisor: &mut Supervisor,
    layout: &Layout,
    bins: &NodeBinaries,
) -> Result<u32> {
    let sysctls = layout.dir.join("sysctls");
    std::fs::write(&sysctls, SHADOWED_SYSCTLS.join("\n"))
        .map_err(Error::io("writing", &sysctls))?;
    let shadow_dir = layout.dir.join("sysctl");
    std::fs::create_dir_all(&shadow_dir).map_err(Error::io("creating", &shadow_dir))?;
    let mut holder = Command::new("unshare");
    holder
        .args([
            "--pid",
            "--fork",
            "--mount",
            "--propagation",
            "private",
            "--mount-proc",
        ])
        .args([
            "--",
            "/bin/sh",
            "-c",
            NAMESPACE_SCRIPT,
            "agentic-testenv-node",
        ])
        .arg(&layout.dir)
        .arg(&bins.pause);
    let unshare_pid = supervisor.spawn(NAMESPACE_HOLDER, holder)?;
    let ready = layout.dir.join("namespace-ready");
    wait_for(
        supervisor,
        NAMESPACE_HOLDER,
        "the node's mount and PID namespace".to_owned(),
        NAMESPACE_TIMEOUT,
        || async { ready.exists() },
    )
    .await?;
    // `unshare --fork` runs the script (now pause) as its only child.
    let children = format!("/proc/{unshare_pid}/task/{unshare_pid}/children");
    let listed = std::fs::read_to_string(&children).map_err(Error::io("reading", &children))?;
    listed
        .split_whitespace()
        .next()
        .and_then(|pid| pid.parse().ok())
        .ok_or_else(|| {
            Error::UnexpectedResponse(format!("{children} names no child of unshare: {listed:?}"))
        })
}

fn node_ready(node: &NodeObject) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|condition| condition.type_ == "Ready" && condition.status == "True")
        })
}

/// Lifts the not-ready taint, as the node lifecycle controller would.
async fn untaint(nodes: &Api<NodeObject>) -> Result<()> {
    let node = nodes
        .get(NODE_NAME)
        .await
        .map_err(Error::kube(format!("reading Node {NODE_NAME}")))?;
    let taints = node.spec.and_then(|spec| spec.taints).unwrap_or_default();
    if taints.iter().all(|taint| taint.key != NOT_READY_TAINT) {
        return Ok(());
    }
    let kept: Vec<_> = taints
        .into_iter()
        .filter(|taint| taint.key != NOT_READY_TAINT)
        .collect();
    let patch = json!({ "spec": { "taints": kept } });
    nodes
        .patch(NODE_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!(
            "lifting the {NOT_READY_TAINT} taint of Node {NODE_NAME}"
        )))?;
    Ok(())
}

/// Runs `program args...`, failing with its stderr.
fn run(program: &str, args: &[&str]) -> Result<String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(Error::io("running", program))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(Error::CommandFailed {
            command: format!("{program} {}", args.join(" ")),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

/// A `10.250.N.0/24` no interface of this machine has an address in.
fn free_subnet() -> Result<u8> {
    let addresses = run("ip", &["-o", "-4", "addr", "show"])?;
    let mut rng = rand::rng();
    for _ in 0..64 {
        let candidate: u8 = rng.random();
        if !addresses.contains(&format!(" 10.250.{candidate}.")) {
            return Ok(candidate);
        }
    }
    Err(Error::UnexpectedResponse(
        "no free 10.250.N.0/24 subnet for the test node's bridge".to_owned(),
    ))
}

fn create_bridge(layout: &Layout) -> Result<()> {
    let bridge = layout.bridge.as_str();
    run("ip", &["link", "add", bridge, "type", "bridge"])?;
    run(
        "ip",
        &[
            "addr",
            "add",
            &format!("{}/24", layout.host_address()),
            "dev",
            bridge,
        ],
    )?;
    run("ip", &["link", "set", bridge, "up"])?;
    Ok(())
}

/// The cgroup hierarchies of this machine (v1 controllers, named ones and the unified one).
fn cgroup_hierarchies() -> Vec<PathBuf> {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return Vec::new();
    };
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, path, kind) = (fields.next()?, fields.next()?, fields.next()?);
            matches!(kind, "cgroup" | "cgroup2").then(|| PathBuf::from(path))
        })
        .collect()
}

/// kubelet refuses a `cgroupRoot` that does not exist in every hierarchy.
fn create_cgroup_root(root: &str) -> Result<()> {
    for hierarchy in cgroup_hierarchies() {
        let path = hierarchy.join(root);
        std::fs::create_dir_all(&path).map_err(Error::io("creating the cgroup", &path))?;
    }
    Ok(())
}

/// The tools kubelet makes its `KUBE-*` chains with: it makes them for IPv6 too.
const IPTABLES_TOOLS: [&str; 2] = ["iptables", "ip6tables"];

/// The `tool/table/chain` of every iptables and ip6tables chain named `KUBE-*`.
fn iptables_chains() -> Vec<String> {
    let mut chains = Vec::new();
    for tool in IPTABLES_TOOLS {
        for table in ["filter", "nat", "mangle"] {
            let Ok(rules) = run(tool, &["-t", table, "-S"]) else {
                continue;
            };
            for line in rules.lines() {
                if let Some(chain) = line.strip_prefix("-N ")
                    && chain.starts_with("KUBE-")
                {
                    chains.push(format!("{tool}/{table}/{chain}"));
                }
            }
        }
    }
    chains
}

/// Undoes what the node did in the host's namespaces; runs after every node process is gone.
/// `service_rule` is the nat rule of [`PodAccess`], when one was added.
fn cleanup_script(
    bridge: &str,
    cgroup_root: &str,
    keep_chains: &[String],
    service_rule: Option<&[String]>,
) -> String {
    let mut script = String::new();
    let _ = writeln!(script, "ip link del {bridge} 2>/dev/null");
    if let Some(rule) = service_rule {
        let _ = writeln!(script, "iptables -t nat -D {} 2>/dev/null", rule.join(" "));
    }
    let _ = writeln!(script, "keep=' {} '", keep_chains.join(" "));
    let _ = writeln!(script, "tools='{}'", IPTABLES_TOOLS.join(" "));
    script.push_str(
        r#"for tool in $tools; do
  command -v "$tool" >/dev/null || continue
  for table in filter nat mangle; do
    for chain in $("$tool" -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p'); do
      case "$keep" in *" $tool/$table/$chain "*) continue ;; esac
      # A chain can only go once no rule jumps to it (kubelet hooks INPUT and OUTPUT).
      "$tool" -t "$table" -S 2>/dev/null | grep -e "-j $chain\( \|$\)" | sed 's/^-A /-D /' |
        while read -r rule; do eval "$tool -t $table $rule" 2>/dev/null; done
      "$tool" -t "$table" -F "$chain" 2>/dev/null
      "$tool" -t "$table" -X "$chain" 2>/dev/null
    done
  done
done
"#,
    );
    // Containers may take a moment to be gone after their namespace's init died, and a
    // cgroup can only be removed once empty: retry for a few seconds.
    let _ = writeln!(script, "root={cgroup_root}");
    script.push_str(
        r#"tries=0
while [ $tries -lt 50 ]; do
  left=
  for hierarchy in $(awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/self/mounts); do
    [ -d "$hierarchy/$root" ] || continue
    find "$hierarchy/$root" -depth -type d -exec rmdir {} + 2>/dev/null
    [ -d "$hierarchy/$root" ] && left=1
  done
  [ -z "$left" ] && break
  sleep 0.1
  tries=$((tries + 1))
done
[ -z "$left" ]
"#,
    );
    script
}

/// containerd's, the CNI network's and kubelet's configuration, and the registry's
/// plain-HTTP host entries: at `registry` and, with [`PodAccess`], at `pod_registry`, the
/// address pods reach it at; pods then get a route to `kubernetes_service` through the host.
fn write_configs(
    layout: &Layout,
    registry: &str,
    pod_registry: Option<&str>,
    kubernetes_service: Option<Ipv4Addr>,
    images: &TestImages,
) -> Result<()> {
    let write = |path: PathBuf, contents: String| -> Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(Error::io("creating", parent))?;
        }
        std::fs::write(&path, contents).map_err(Error::io("writing", &path))
    };
    let dir = &layout.dir;
    let containerd_dir = layout.containerd_dir();
    let certs_dir = containerd_dir.join("certs.d");
    let cni_conf_dir = dir.join("cni-conf");

    for registry in std::iter::once(registry).chain(pod_registry) {
        write(
            certs_dir.join(registry).join("hosts.toml"),
            format!(
                "server = \"http://{registry}\"\n\n[host.\"http://{registry}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
            ),
        )?;
    }
    let routes: Vec<serde_json::Value> = kubernetes_service
        .map(|service| json!({ "dst": format!("{service}/32"), "gw": layout.host_address() }))
        .into_iter()
        .collect();

    write(
        cni_conf_dir.join("10-agentic-testenv.conflist"),
        serde_json::to_string_pretty(&json!({
            "cniVersion": "1.0.0",
            "name": "agentic-testenv",
            "plugins": [{
                "type": "bridge",
                "bridge": layout.bridge,
                "isGateway": false,
                "ipMasq": false,
                "hairpinMode": false,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{
                        "subnet": format!("10.250.{}.0/24", layout.subnet),
                        "rangeStart": format!("10.250.{}.10", layout.subnet),
                    }]],
                    "routes": routes,
                    "dataDir": dir.join("cni-ipam"),
                },
            }],
        }))
        .map_err(|error| Error::UnexpectedResponse(error.to_string()))?,
    )?;

    let toml_path = |path: &Path| format!("{:?}", path.display().to_string());
    write(
        containerd_dir.join("config.toml"),
        format!(
            r#"version = 3
root = {root}
state = {state}
# Plugins that would write outside the node's directories or need what this machine lacks.
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.nri.v1.nri",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
]
required_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = {socket}

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{pause}"
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = {certs}

[plugins."io.containerd.cri.v1.runtime"]
  # Without CAP_SYS_RESOURCE runc cannot give the pause container a score below ours.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = {cni_conf}
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"#,
            root = toml_path(&containerd_dir.join("root")),
            state = toml_path(&containerd_dir.join("state")),
            socket = toml_path(&layout.containerd_socket()),
            pause = images.pause,
            certs = toml_path(&certs_dir),
            cni_bin = CNI_BIN_DIR,
            cni_conf = toml_path(&cni_conf_dir),
            runc = RUNC,
        ),
    )?;

    // JSON is YAML, and kubelet reads either.
    write(
        dir.join("kubelet.yaml"),
        serde_json::to_string_pretty(&json!({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": "127.0.0.1",
            "port": layout.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": layout.kubelet_healthz_port,
            // Only the API server (and tests) on this machine reach it.
            "authentication": { "anonymous": { "enabled": true }, "webhook": { "enabled": false } },
            "authorization": { "mode": "AlwaysAllow" },
            "containerRuntimeEndpoint": format!("unix://{}", layout.containerd_socket().display()),
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": format!("/{}", layout.cgroup_root),
            // This machine kind has cgroup v1 (hybrid) and swap settings kubelet would refuse.
            "failCgroupV1": false,
            "failSwapOn": false,
            // No CAP_SYS_RESOURCE here: kubelet could not lower its own score.
            "oomScoreAdj": 0,
            "podLogsDir": dir.join("pod-logs"),
            "resolvConf": "",
            "serializeImagePulls": false,
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            // A busy development disk must not make the node evict test pods.
            "evictionHard": {
                "memory.available": "50Mi",
                "nodefs.available": "1%",
                "nodefs.inodesFree": "1%",
                "imagefs.available": "1%",
            },
            "syncFrequency": "10s",
            "fileCheckFrequency": "10s",
            "nodeStatusUpdateFrequency": "5s",
            "shutdownGracePeriod": "0s",
        }))
        .map_err(|error| Error::UnexpectedResponse(error.to_string()))?,
    )?;
    Ok(())
}
