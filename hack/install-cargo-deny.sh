#!/usr/bin/env bash
# Builds cargo-deny from crates.io, pinned by version and its own Cargo.lock (`--locked`), into
# ${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}/cargo-deny/<version>/bin/cargo-deny, and
# prints the binary's path as the last stdout line. `make lint` checks the dependency graph's
# licenses, bans and sources with it (deny.toml). Progress goes to stderr so callers can use
# `| tail -n1`.
#
# Upgrading cargo-deny is one line: the version below.
set -euo pipefail

version=0.20.2

cache_dir="${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}"
dir="$cache_dir/cargo-deny/$version"
bin="$dir/bin/cargo-deny"

# A finished install records its version; anything else (an interrupted build) starts over.
marker="$dir/.installed"
if [[ -x "$bin" && -f "$marker" && "$(cat "$marker")" == "$version" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache_dir/cargo-deny"
# One build at a time per cache; a second caller waits and then finds the result.
exec 9>"$cache_dir/cargo-deny/.lock"
flock 9
if [[ -x "$bin" && -f "$marker" && "$(cat "$marker")" == "$version" ]]; then
  echo "$bin"
  exit 0
fi

echo "install-cargo-deny: building cargo-deny $version into $dir (a few minutes on 2 cores)" >&2
rm -rf "$dir"
work=$(mktemp -d "$cache_dir/cargo-deny/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
# cargo-deny's release profile is fat LTO in one codegen unit, for its published binaries:
# several times the build for a check that takes seconds. The defaults build it in parallel.
CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
  CARGO_TARGET_DIR="$work/target" \
  cargo install --locked --quiet --version "$version" --root "$work/root" cargo-deny >&2
# The binary must run before the install counts as done.
reported=$("$work/root/bin/cargo-deny" --version)
if [[ "$reported" != "cargo-deny $version" ]]; then
  echo "install-cargo-deny: the build reports '$reported', not cargo-deny $version" >&2
  exit 1
fi
mkdir -p "$dir/bin"
mv "$work/root/bin/cargo-deny" "$bin"
echo "$version" >"$marker"
echo "$bin"
