#!/usr/bin/env bash
# `make run`: a local control plane, registry and node (agentic-testenv), the sample skills
# and objects, and the operator in the foreground. The sample AgentRun's pod really runs the
# stub agent (hack/stub-agent), and this script prints its log once the run has ended.
# Ctrl-C stops everything.
#
# Writes .dev/kubeconfig and .dev/registry; the kubectl built with the control plane is
# .dev/bin/kubectl.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
dev="$repo_root/.dev"

AGENTIC_TESTENV_BIN="$(hack/testenv-tools.sh | tail -n1)"
export AGENTIC_TESTENV_BIN
hack/install-registry.sh
hack/install-node-packages.sh

echo "building the operator and the test environment..." >&2
cargo build --quiet --locked -p agentic-operator -p agentic-testenv
target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
operator="$target_dir/debug/agentic-operator"
testenv="$target_dir/debug/agentic-testenv"

mkdir -p "$dev/bin"
ln -sf "$AGENTIC_TESTENV_BIN/kubectl" "$dev/bin/kubectl"
rm -f "$dev/ready" "$dev/node-ready"

testenv_pid=""
cleanup() {
    if [[ -n "$testenv_pid" ]] && kill -0 "$testenv_pid" 2>/dev/null; then
        kill -TERM "$testenv_pid"
        wait "$testenv_pid" || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$testenv" up --dir "$dev" --with-agent-sandbox --with-node > "$dev/testenv.log" 2>&1 &
testenv_pid=$!
for _ in $(seq 1 120); do
    [[ -f "$dev/ready" ]] && break
    kill -0 "$testenv_pid" 2>/dev/null || { cat "$dev/testenv.log" >&2; exit 1; }
    sleep 1
done
[[ -f "$dev/ready" ]] || { echo "the control plane did not become ready; see $dev/testenv.log" >&2; exit 1; }
[[ -f "$dev/node-ready" ]] || { echo "the node did not become ready; see $dev/testenv.log" >&2; exit 1; }

export KUBECONFIG="$dev/kubeconfig"
registry="$(cat "$dev/registry")"
kubectl="$dev/bin/kubectl"

AGENTIC_OPERATOR="$operator" hack/push-samples.sh --insecure "$registry"
"$kubectl" create namespace demo --dry-run=client -o yaml | "$kubectl" apply --server-side -f - >/dev/null
hack/render-samples.sh "$registry" | "$kubectl" apply --server-side -n demo -f -

cat >&2 <<MSG

The control plane runs at $("$kubectl" config view -o jsonpath='{.clusters[0].cluster.server}'), the registry at $registry.
In another shell:

  export KUBECONFIG=$dev/kubeconfig PATH=$dev/bin:\$PATH
  kubectl get skillcards,agents,agentruns,gateways -n demo
  kubectl describe agentrun -n demo
  kubectl get sandboxes,pods -n demo

The node's pods (the sample run's stub agent) print what they see: its log follows here
once the run has ended. Ctrl-C stops everything.

MSG
"$operator" run --insecure-registry "$registry" --health-addr 127.0.0.1:8081 \
    --metrics-addr 127.0.0.1:8080 &
operator_pid=$!
trap 'kill -TERM "$operator_pid" 2>/dev/null; wait "$operator_pid" || true; cleanup' EXIT

# Follow the sample run to its end, then show what its agent saw.
run="$("$kubectl" get agentruns -n demo -o jsonpath='{.items[0].metadata.name}')"
for _ in $(seq 1 180); do
    phase="$("$kubectl" get agentrun -n demo "$run" -o jsonpath='{.status.phase}' 2>/dev/null || true)"
    [[ "$phase" == Succeeded || "$phase" == Failed ]] && break
    kill -0 "$operator_pid" 2>/dev/null || break
    sleep 1
done
if [[ "$phase" == Succeeded || "$phase" == Failed ]]; then
    pod="$("$kubectl" get agentrun -n demo "$run" -o jsonpath='{.status.sandboxName}')"
    echo >&2
    echo "AgentRun $run: $phase. The log of its pod $pod:" >&2
    "$kubectl" logs -n demo "$pod" -c agent >&2 || true
    echo >&2
    echo "The operator keeps running; Ctrl-C stops everything." >&2
fi
wait "$operator_pid"
