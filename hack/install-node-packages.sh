#!/usr/bin/env bash
# Installs what the test node takes from Debian when it is missing: runc (the OCI
# runtime containerd's shim runs), the CNI plugins (bridge, host-local, loopback), a
# static busybox (the test images' userland), git (the test git server: `git daemon`
# and `git http-backend`), and what the test image of the operator is built with: `strip`
# and `ldd` (binutils, libc-bin), the CA bundle its base image, distroless, carries, and
# ssh-keygen (openssh-client) and gpg (gnupg), which sign the SSH- and GPG-signed commits of
# agentic-trust's and the control-plane tests.
# Quiet and quick when all are there.
set -euo pipefail

# package -> a file it installs
declare -A packages=(
    [runc]=/usr/sbin/runc
    [containernetworking-plugins]=/usr/lib/cni/bridge
    [busybox-static]=/bin/busybox
    [git]=/usr/bin/git
    [binutils]=/usr/bin/strip
    [libc-bin]=/usr/bin/ldd
    [ca-certificates]=/etc/ssl/certs/ca-certificates.crt
    [openssh-client]=/usr/bin/ssh-keygen
    [gnupg]=/usr/bin/gpg
)

log() { printf 'install-node-packages: %s\n' "$*" >&2; }

missing=()
for package in "${!packages[@]}"; do
    [[ -e "${packages[$package]}" ]] || missing+=("$package")
done
((${#missing[@]} == 0)) && exit 0

sudo=()
if [[ "$(id -u)" != 0 ]]; then
    sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they don't know the packages yet.
if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then
    log "refreshing apt package lists"
    "${sudo[@]}" apt-get update -qq >&2
fi
log "installing ${missing[*]}"
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2

for package in "${missing[@]}"; do
    [[ -x "${packages[$package]}" ]] || { log "${packages[$package]} is still missing after installing $package"; exit 1; }
done
log "installed ${missing[*]}"
