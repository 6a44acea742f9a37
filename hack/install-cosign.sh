#!/usr/bin/env bash
# Builds sigstore's cosign from the Go module proxy, pinned by version and module checksum,
# into ${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}/cosign/<version>/bin/cosign, and
# prints the binary's path as the last stdout line. The signature tests of agentic-trust
# (crates/agentic-trust/tests) sign images in the test registry with it, through COSIGN_BIN.
# Progress goes to stderr so callers can use `| tail -n1`.
#
# Upgrading cosign is one line: set the version and the `h1:` sum that
# `go mod download -json github.com/sigstore/cosign/v3@<version>` prints.
set -euo pipefail

version=v3.1.3
module_sum=h1:001JQRI/PJ/5T+g/kJ1KTvKFbb322+fomc+pHDZ/6sg=
module=github.com/sigstore/cosign/v3

cache_dir="${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}"
dir="$cache_dir/cosign/$version"
bin="$dir/bin/cosign"

# A finished install records the module sum it was built from; anything else (an
# interrupted build, another pin under the same version) starts over.
marker="$dir/.installed"
if [[ -x "$bin" && -f "$marker" && "$(cat "$marker")" == "$module_sum" ]]; then
  echo "$bin"
  exit 0
fi

if ! command -v go >/dev/null; then
  echo "install-cosign: go is needed to build $module@$version from the Go module proxy" >&2
  exit 2
fi
# cosign's go.mod asks for Go 1.26.0, which this machine's Go satisfies: never let a
# toolchain line trigger a download.
export GOTOOLCHAIN=local

mkdir -p "$cache_dir/cosign"
# One build at a time per cache; a second caller waits and then finds the result.
exec 9>"$cache_dir/cosign/.lock"
flock 9
if [[ -x "$bin" && -f "$marker" && "$(cat "$marker")" == "$module_sum" ]]; then
  echo "$bin"
  exit 0
fi

# The checksum database vouches for the module; this checks the pin, so a different
# module served under the same version cannot slip in.
actual=$(go mod download -json "$module@$version" | sed -n 's/^\t"Sum": "\(.*\)",$/\1/p')
if [[ "$actual" != "$module_sum" ]]; then
  echo "install-cosign: $module@$version has sum '$actual'; the pin is $module_sum" >&2
  exit 1
fi

echo "install-cosign: building $module/cmd/cosign@$version into $dir (several minutes on 2 cores)" >&2
rm -rf "$dir"
work=$(mktemp -d "$cache_dir/cosign/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Two cores are shared: two packages compile at a time.
GOBIN="$work/bin" go install -p 2 -trimpath -buildvcs=false "$module/cmd/cosign@$version"
# The binary must run before the install counts as done.
reported=$("$work/bin/cosign" version 2>&1)
if [[ "$reported" != *"$version"* && "$reported" != *"${version#v}"* ]]; then
  echo "install-cosign: the built cosign reports '$reported'; expected $version" >&2
  exit 1
fi
mkdir -p "$dir"
mv "$work/bin" "$dir/bin"
echo "$module_sum" >"$marker"
echo "$bin"
