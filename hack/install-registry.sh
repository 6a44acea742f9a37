#!/usr/bin/env bash
# Installs the OCI registry the tests run (Debian's `docker-registry`, CNCF
# distribution 2.8) when /usr/bin/docker-registry is missing. Quiet and quick
# when it is already there.
set -euo pipefail

registry_bin=/usr/bin/docker-registry
[[ -x "$registry_bin" ]] && exit 0

log() { printf 'install-registry: %s\n' "$*" >&2; }

sudo=()
if [[ "$(id -u)" != 0 ]]; then
    sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
apt_install=("${sudo[@]}" apt-get install -y -qq --no-install-recommends docker-registry)

# Refresh the package lists only when they don't know the package yet.
if ! apt-cache show docker-registry >/dev/null 2>&1; then
    log "refreshing apt package lists"
    "${sudo[@]}" apt-get update -qq >&2
fi
log "installing docker-registry"
"${apt_install[@]}" >&2

# The package starts a system-wide registry on :5000 where an init system runs;
# tests start their own on a free port and don't need it.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker-registry 2>/dev/null; then
    "${sudo[@]}" systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi

[[ -x "$registry_bin" ]] || { log "$registry_bin is still missing after the install"; exit 1; }
log "installed $("$registry_bin" --version 2>/dev/null || echo "$registry_bin")"
