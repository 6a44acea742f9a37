#!/usr/bin/env bash
# End-to-end test on a real cluster: what `make test` cannot cover without a kubelet and a
# container runtime. It
#
#   1. starts a registry container and a kind cluster (Kubernetes 1.36, image volumes on)
#      whose nodes pull from that registry over plain HTTP,
#   2. installs agent-sandbox from its release manifest,
#   3. builds the operator image (Dockerfile) and the stub agent (hack/stub-agent),
#   4. pushes the sample skills (hack/push-samples.sh) and the stub agent to the registry,
#   5. installs the chart, applies the samples (hack/render-samples.sh) and waits for the
#      AgentRun to succeed,
#   6. checks the stub agent's log: every skill file mounted under /opt/skills, the rule in
#      KONVEYOR_RULES, the delivery mode in HARNESS_SKILL_MODE,
#
# and removes the cluster and the registry on exit, pass or fail (E2E_KEEP=1 keeps them).
#
# Needs docker, kind (v0.33 or later), kubectl, helm 3 and cargo.
# Environment:
#   KIND_CLUSTER        cluster name (default agentic-e2e)
#   KIND_NODE_IMAGE     node image (default Kubernetes 1.36.4 for kind v0.33)
#   E2E_REGISTRY_PORT   host port of the registry (default 5001)
#   E2E_TIMEOUT         seconds to wait for the run (default 300)
#   E2E_KEEP            1 to keep the cluster and registry for debugging
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

cluster="${KIND_CLUSTER:-agentic-e2e}"
node_image="${KIND_NODE_IMAGE:-kindest/node:v1.36.4@sha256:099e049362a1526b2db71494e1947aae99bd16290d7c895f2b7ea312e3cbfaed}"
sandbox_version=v0.5.3
sandbox_manifest="https://github.com/kubernetes-sigs/agent-sandbox/releases/download/$sandbox_version/sandbox.yaml"
registry_image=registry:2.8.3
registry_container="$cluster-registry"
registry_port="${E2E_REGISTRY_PORT:-5001}"
timeout="${E2E_TIMEOUT:-300}"

# The host pushes to the published port; inside the cluster, nodes (containerd) and pods
# (the operator) reach the container by name on kind's Docker network.
registry_from_host="localhost:$registry_port"
registry_in_cluster="$registry_container:5000"

operator_image=agentic-operator:e2e
stub_image=agentic-stub-agent:v1
operator_namespace=agentic-operator-system
run_namespace=agentic-e2e
run_name=upgrade-to-21

log() { printf '\n==> %s\n' "$*" >&2; }
fail() {
    printf 'kind-e2e: FAIL: %s\n' "$*" >&2
    exit 1
}

for tool in docker kind kubectl helm cargo; do
    command -v "$tool" >/dev/null || fail "$tool is not on PATH"
done

kubeconfig="$(mktemp -t agentic-e2e-kubeconfig.XXXXXX)"
export KUBECONFIG="$kubeconfig"
workdir="$(mktemp -d -t agentic-e2e.XXXXXX)"

diagnose() {
    log "diagnostics"
    kubectl get skillcards,agents,agentruns,gateways,sandboxes,pods -n "$run_namespace" -o wide || true
    kubectl get agentruns,skillcards,agents -n "$run_namespace" -o yaml || true
    kubectl get events -n "$run_namespace" --sort-by=.lastTimestamp || true
    kubectl logs -n "$operator_namespace" deployment/agentic-operator --tail=200 || true
}

cleanup() {
    local status=$?
    if [[ $status -ne 0 ]]; then
        diagnose
    fi
    if [[ "${E2E_KEEP:-0}" == 1 ]]; then
        log "keeping cluster $cluster and registry $registry_container (KUBECONFIG=$kubeconfig)"
    else
        log "cleaning up"
        kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
        docker rm -f "$registry_container" >/dev/null 2>&1 || true
        rm -f "$kubeconfig"
    fi
    rm -rf "$workdir"
    exit "$status"
}
trap cleanup EXIT

log "registry $registry_container on $registry_from_host"
docker rm -f "$registry_container" >/dev/null 2>&1 || true
docker run -d --restart=no --name "$registry_container" \
    -p "127.0.0.1:$registry_port:5000" "$registry_image" >/dev/null

log "kind cluster $cluster ($node_image)"
cat >"$workdir/kind.yaml" <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
# Skills are mounted as image volumes (beta and on by default from 1.35; explicit here).
featureGates:
  ImageVolume: true
# Registry hosts come from /etc/containerd/certs.d, written below.
containerdConfigPatches:
  - |-
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "/etc/containerd/certs.d"
EOF
kind create cluster --name "$cluster" --image "$node_image" --config "$workdir/kind.yaml" \
    --kubeconfig "$kubeconfig" --wait 120s
docker network connect kind "$registry_container" 2>/dev/null || true
for node in $(kind get nodes --name "$cluster"); do
    docker exec "$node" mkdir -p "/etc/containerd/certs.d/$registry_in_cluster"
    docker exec -i "$node" sh -c "cat > /etc/containerd/certs.d/$registry_in_cluster/hosts.toml" <<EOF
server = "http://$registry_in_cluster"

[host."http://$registry_in_cluster"]
  capabilities = ["pull", "resolve"]
EOF
done

log "agent-sandbox $sandbox_version"
kubectl apply --server-side -f "$sandbox_manifest"
kubectl -n agent-sandbox-system rollout status deployment/agent-sandbox-controller --timeout=180s

log "building $operator_image and $stub_image"
docker build -t "$operator_image" "$repo_root"
docker build -t "$registry_from_host/$stub_image" "$repo_root/hack/stub-agent"
kind load docker-image "$operator_image" --name "$cluster"

log "pushing the stub agent and the sample skills to $registry_from_host"
docker push "$registry_from_host/$stub_image"
"$repo_root/hack/push-samples.sh" --insecure "$registry_from_host"

log "installing the chart"
helm install agentic-operator "$repo_root/charts/agentic-operator" \
    --namespace "$operator_namespace" --create-namespace \
    --set image.repository="${operator_image%%:*}" \
    --set image.tag="${operator_image##*:}" \
    --set image.pullPolicy=Never \
    --set "insecureRegistries[0]=$registry_in_cluster" \
    --set 'logLevel=info\,agentic_operator=debug' \
    --wait --timeout 180s

log "applying the samples in namespace $run_namespace"
kubectl create namespace "$run_namespace"
"$repo_root/hack/render-samples.sh" "$registry_in_cluster" |
    kubectl apply --server-side -n "$run_namespace" -f -

log "waiting up to ${timeout}s for AgentRun $run_name"
phase=""
deadline=$((SECONDS + timeout))
while ((SECONDS < deadline)); do
    phase="$(kubectl get agentrun "$run_name" -n "$run_namespace" -o jsonpath='{.status.phase}')"
    [[ "$phase" == Succeeded || "$phase" == Failed ]] && break
    sleep 3
done
[[ "$phase" == Succeeded ]] || fail "AgentRun $run_name ended in phase '${phase:-none}', want Succeeded"

log "checking the stub agent's log"
sandbox="$(kubectl get agentrun "$run_name" -n "$run_namespace" -o jsonpath='{.status.sandboxName}')"
[[ -n "$sandbox" ]] || fail "AgentRun $run_name has no status.sandboxName"
kubectl logs -n "$run_namespace" "pod/$sandbox" >"$workdir/agent.log"
cat "$workdir/agent.log"

expect_line() {
    grep -qxF -- "$1" "$workdir/agent.log" || fail "the agent log lacks the line: $1"
}
expect_line "skill-file: java-upgrade/SKILL.md"
expect_line "skill-file: java-upgrade/references/removed-apis.md"
expect_line "skill-file: no-system-out/SKILL.md"
expect_line "skill-file: quarkus-config/SKILL.md"
expect_line "skill-file: maven-deps/SKILL.md"
expect_line "skill-file: commit-summary/SKILL.md"
expect_line "KONVEYOR_RULES=no-system-out"
expect_line "HARNESS_SKILL_MODE=native"
expect_line "stub-agent: done"

skills="$(kubectl get agentrun "$run_name" -n "$run_namespace" -o jsonpath='{range .status.skills[*]}{.name}{"\n"}{end}' | sort | paste -sd, -)"
[[ "$skills" == "commit-summary,java-upgrade,maven-deps,no-system-out,quarkus-config" ]] ||
    fail "AgentRun status.skills is '$skills'"

log "PASS"
