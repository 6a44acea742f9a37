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

# shellcheck source=hack/lib/go-tool.sh
source "$(dirname "$0")/lib/go-tool.sh"
go_tool_begin cosign "$version" "$module" "$module_sum"

echo "install-cosign: building $module/cmd/cosign@$version into $dir (several minutes on 2 cores)" >&2
# Two cores are shared: two packages compile at a time.
GOBIN="$work/bin" go install -p 2 -trimpath -buildvcs=false "$module/cmd/cosign@$version"
# The binary must run before the install counts as done.
reported=$("$work/bin/cosign" version 2>&1)
if [[ "$reported" != *"$version"* && "$reported" != *"${version#v}"* ]]; then
  echo "install-cosign: the built cosign reports '$reported'; expected $version" >&2
  exit 1
fi
go_tool_finish
