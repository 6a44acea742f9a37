#!/usr/bin/env bash
# Pushes the sample skills in config/samples/skills as OCI images to REGISTRY, where
# config/samples/skillcards.yaml expects them (after hack/render-samples.sh):
#
#   REGISTRY/konveyor-samples/java-upgrade:v1       one skill at the image root
#   REGISTRY/konveyor-samples/no-system-out:v1      one skill at the image root
#   REGISTRY/konveyor-samples/migration-skills:v1   quarkus-config/ and maven-deps/
#
# Usage: hack/push-samples.sh [--insecure] REGISTRY
#   --insecure  push over plain HTTP (a local registry without TLS)
#   REGISTRY    host[:port][/path] the pushing machine reaches the registry at
#
# The operator binary comes from $AGENTIC_OPERATOR when set, else `cargo run` builds it.
# Each pushed image is printed as `ref@sha256:...`.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
skills="$repo_root/config/samples/skills"

usage() {
    echo "usage: $0 [--insecure] REGISTRY" >&2
    exit 2
}

insecure=()
if [[ "${1:-}" == "--insecure" ]]; then
    insecure=(--insecure)
    shift
fi
[[ $# -eq 1 && -n "$1" ]] || usage
registry="${1%/}"

if [[ -n "${AGENTIC_OPERATOR:-}" ]]; then
    operator=("$AGENTIC_OPERATOR")
else
    operator=(cargo run --quiet --locked --manifest-path "$repo_root/Cargo.toml" -p agentic-operator --)
fi

push() { # <image name> <skill dir>...
    local image="$registry/konveyor-samples/$1:v1"
    shift
    # `skill push` validates every SKILL.md first and prints the pinned reference last.
    "${operator[@]}" skill push "${insecure[@]}" "$@" "$image" | tail -n1
}

push java-upgrade "$skills/java-upgrade"
push no-system-out "$skills/no-system-out"
push migration-skills "$skills/multi/quarkus-config" "$skills/multi/maven-deps"
