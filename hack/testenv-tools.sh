#!/usr/bin/env bash
# Builds, once, the binaries the test control plane runs (kube-apiserver, etcd,
# kube-controller-manager, the agent-sandbox controller), the test node's (containerd with
# its runc shim and ctr, kubelet, kube-scheduler, and the pause program of its sandbox
# image) and the clients tests drive them with (kubectl, helm) from the Go module proxy,
# plus the agent-sandbox CRD manifests, into a cache outside the repository:
#
#   ${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}/testenv/<key>/bin
#   ${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}/testenv/<key>/crds/agent-sandbox/*.yaml
#
# The key names the versions (read from hack/tools/*/go.mod) plus a digest of the
# build recipe (this script and hack/tools), so changing either builds a fresh
# directory; Go's build cache makes such a rebuild mostly a relink. A build goes to a
# temporary directory that is renamed into place when complete: an interrupted
# build never leaves a half-filled cache. Progress goes to stderr; the last line
# of stdout is the bin directory (export it as AGENTIC_TESTENV_BIN).
#
# kube-apiserver, kube-controller-manager and kubectl report the k8s.io/kubernetes release
# they come from; helm reports its own release and, like a release build, takes that
# Kubernetes version as its default for `helm template` and `helm lint`.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$repo_root/hack/tools"
cache_root="${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}/testenv"

# Never let a go.mod `toolchain` line trigger a toolchain download.
export GOTOOLCHAIN=local
# Two cores are shared with everyone else: two packages compile at a time. No VCS
# stamping: the main modules here are wrappers, and git may not be usable (CI, ownership).
build_flags=(-p 2 -trimpath -buildvcs=false)

log() { printf 'testenv-tools: %s\n' "$*" >&2; }

module_version() { # <tool dir> <module path>
    go -C "$tools/$1" list -m -f '{{.Version}}' "$2"
}

k8s_version="$(module_version kubernetes k8s.io/kubernetes)"
etcd_version="$(module_version etcd go.etcd.io/etcd/server/v3)"
sandbox_version="$(module_version agent-sandbox sigs.k8s.io/agent-sandbox)"
helm_version="$(module_version helm helm.sh/helm/v3)"
containerd_version="$(module_version containerd github.com/containerd/containerd/v2)"

recipe_digest="$(
    cd "$repo_root" &&
        cat hack/testenv-tools.sh hack/tools/*/go.mod hack/tools/*/go.sum hack/tools/*/main.go |
        sha256sum | cut -c1-8
)"
key="k8s-${k8s_version}_etcd-${etcd_version}_sandbox-${sandbox_version}_helm-${helm_version}"
key+="_containerd-${containerd_version}_${recipe_digest}"
target="$cache_root/$key"

binaries=(kube-apiserver kube-controller-manager kubectl etcd agent-sandbox-controller helm
    containerd containerd-shim-runc-v2 ctr kubelet kube-scheduler pause)
complete() { # whether $target has every binary
    local binary
    for binary in "${binaries[@]}"; do
        [[ -x "$target/bin/$binary" ]] || return 1
    done
}

if complete; then
    log "cached: $target"
    echo "$target/bin"
    exit 0
fi

mkdir -p "$cache_root"
# One build at a time per cache; a second caller waits and then finds the result.
exec 9>"$cache_root/.lock"
if ! flock -n 9; then
    log "another build holds $cache_root/.lock; waiting for it"
    flock 9
fi
if complete; then
    log "cached: $target"
    echo "$target/bin"
    exit 0
fi

# Builds that were killed outright (the lock is ours, so none is running) leave these.
rm -rf "$cache_root"/.building-*
staging="$(mktemp -d "$cache_root/.building-$key.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$staging/bin" "$staging/crds/agent-sandbox"

build() { # <tool dir> <package> <output name> [ldflags] [build tags]
    local started=$SECONDS
    log "building $3 ($2)"
    go -C "$tools/$1" build "${build_flags[@]}" -tags "${5:-}" -ldflags "-s -w ${4:-}" \
        -o "$staging/bin/$3" "$2"
    log "built $3 in $((SECONDS - started))s"
}

release_commit() { # <tool dir> <module path> <version>; empty when the proxy does not say
    go -C "$tools/$1" mod download -json "$2@$3" |
        sed -n 's/.*"Hash": "\([0-9a-f]*\)".*/\1/p' | head -n1
}

# The release commit and date, so /version and `kubectl version` report what a
# release build reports.
k8s_commit="$(release_commit kubernetes k8s.io/kubernetes "$k8s_version")"
k8s_date="$(go -C "$tools/kubernetes" list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)"
k8s_minor="${k8s_version#v1.}"
k8s_minor="${k8s_minor%%.*}"
k8s_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
    k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$k8s_date"
    [[ -n "$k8s_commit" ]] && k8s_ldflags+=" -X $pkg.gitCommit=$k8s_commit"
done

started=$SECONDS
build etcd . etcd
build agent-sandbox sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller agent-sandbox-controller \
    "-X sigs.k8s.io/agent-sandbox/internal/version.gitVersion=$sandbox_version"
# helm's release Makefile sets the same variables: its version, and the Kubernetes
# version `helm template`/`helm lint` assume without --kube-version (else 1.20).
helm_commit="$(release_commit helm helm.sh/helm/v3 "$helm_version")"
helm_ldflags="-X helm.sh/helm/v3/internal/version.version=$helm_version"
helm_ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
[[ -n "$helm_commit" ]] && helm_ldflags+=" -X helm.sh/helm/v3/internal/version.gitCommit=$helm_commit"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    helm_ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
build helm helm.sh/helm/v3/cmd/helm helm "$helm_ldflags"
build kubernetes k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$k8s_ldflags"
# These share most packages with kube-apiserver, so they link mostly from the build cache.
build kubernetes k8s.io/kubernetes/cmd/kubectl kubectl "$k8s_ldflags"
build kubernetes k8s.io/kubernetes/cmd/kube-scheduler kube-scheduler "$k8s_ldflags"
build kubernetes k8s.io/kubernetes/cmd/kubelet kubelet "$k8s_ldflags"
build kubernetes k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager "$k8s_ldflags"

# containerd as its release Makefile builds it: no snapshotters that need kernel
# headers or tools this machine lacks, the version stamped, and a static shim.
containerd_ldflags="-X github.com/containerd/containerd/v2/version.Version=$containerd_version"
containerd_tags="no_btrfs,no_devmapper,no_zfs"
build containerd github.com/containerd/containerd/v2/cmd/containerd containerd \
    "$containerd_ldflags" "$containerd_tags"
build containerd github.com/containerd/containerd/v2/cmd/ctr ctr "$containerd_ldflags" "$containerd_tags"
CGO_ENABLED=0 build containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
    containerd-shim-runc-v2 "$containerd_ldflags" "$containerd_tags"
# Static, so the sandbox image needs nothing but this file.
CGO_ENABLED=0 build pause . pause

# The controller's module ships its CRDs; take every one it has.
sandbox_dir="$(go -C "$tools/agent-sandbox" list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)"
crds=("$sandbox_dir"/k8s/crds/*.yaml)
if [[ ! -e "${crds[0]}" ]]; then
    log "no CRD manifests under $sandbox_dir/k8s/crds"
    exit 1
fi
cp "${crds[@]}" "$staging/crds/agent-sandbox/"
chmod -R u+w "$staging/crds"
log "copied ${#crds[@]} agent-sandbox CRD manifests"

# Only a copy of this build with a binary deleted by hand can be in the way.
rm -rf "$target"
mv -T "$staging" "$target"
trap - EXIT
log "built everything in $((SECONDS - started))s: $target"
# Older builds are a quarter of a gigabyte each; processes still running from one keep
# their open binaries.
for old in "$cache_root"/k8s-*; do
    if [[ "$old" != "$target" && -d "$old" ]]; then
        log "removing the older build $old"
        rm -rf "$old"
    fi
done
echo "$target/bin"
