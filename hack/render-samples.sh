#!/usr/bin/env bash
# Prints the sample manifests in config/samples, in the order they depend on each other,
# with the placeholder `REGISTRY/` in image references replaced by REGISTRY/:
#
#   hack/render-samples.sh localhost:5000 | kubectl apply -n demo -f -
#
# Usage: hack/render-samples.sh REGISTRY
#   REGISTRY  host[:port][/path] the cluster (operator and kubelet) reaches the registry at
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
samples="$repo_root/config/samples"

if [[ $# -ne 1 || -z "$1" ]]; then
    echo "usage: $0 REGISTRY" >&2
    exit 2
fi
registry="${1%/}"
# The replacement goes into a sed expression: escape what sed would interpret.
escaped="$(printf '%s' "$registry" | sed 's/[\\|&]/\\&/g')"

for manifest in gateway.yaml skillcards.yaml agent.yaml agentrun.yaml; do
    echo "---"
    sed "s|REGISTRY/|$escaped/|g" "$samples/$manifest"
done
