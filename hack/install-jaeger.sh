#!/usr/bin/env bash
# Builds Jaeger (the all-in-one `cmd/jaeger`, an OpenTelemetry-collector-based binary) from
# the Go module proxy, pinned by version and module checksum, into
# ${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}/jaeger/<version>/bin/jaeger, and prints
# the binary's path as the last stdout line. The tracing tests use it as the user's trace
# collector (OTLP/HTTP in, HTTP query API out), through JAEGER_BIN.
# Progress goes to stderr so callers can use `| tail -n1`.
#
# Jaeger's go.mod has a replace directive, so `go install <pkg>@<version>` refuses it: the
# build goes through a throwaway module that requires Jaeger as a tool. Upgrading is one
# line: set the version and the `h1:` sum that
# `go mod download -json github.com/jaegertracing/jaeger@<version>` prints.
set -euo pipefail

version=v1.75.0
module_sum=h1:OWj6uKRJ8QaH+AVypRwqINGi3Q/WOchbEfp53FJK0Xk=
module=github.com/jaegertracing/jaeger

# shellcheck source=hack/lib/go-tool.sh
source "$(dirname "$0")/lib/go-tool.sh"
go_tool_begin jaeger "$version" "$module" "$module_sum"

echo "install-jaeger: building $module/cmd/jaeger@$version into $dir (many minutes on 2 cores)" >&2
(
  cd "$work"
  go mod init agentic-operator.invalid/jaeger-tool >/dev/null 2>&1
  go get -tool "$module/cmd/jaeger@$version" >&2
  # Two cores are shared: two packages compile at a time. The version variable is what
  # Jaeger's own release build sets; `jaeger version` prints it.
  go build -p 2 -trimpath -buildvcs=false \
    -ldflags "-X $module/internal/version.latestVersion=$version" \
    -o "$work/bin/jaeger" "$module/cmd/jaeger"
)
# The binary must run, and must be built from the pinned module (its build info names the
# module of the package built as `mod`), before the install counts as done.
built_from=$(go version -m "$work/bin/jaeger" | awk -v m="$module" '$1 == "mod" && $2 == m { print $3, $4 }')
if [[ "$built_from" != "$version $module_sum" ]]; then
  echo "install-jaeger: the built jaeger is from '$built_from'; expected $version $module_sum" >&2
  exit 1
fi
"$work/bin/jaeger" version >/dev/null 2>&1 || {
  echo "install-jaeger: the built jaeger does not run" >&2
  exit 1
}
go_tool_finish
