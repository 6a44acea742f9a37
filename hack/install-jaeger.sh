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

cache_dir="${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}"
dir="$cache_dir/jaeger/$version"
bin="$dir/bin/jaeger"

# A finished install records the module sum it was built from; anything else (an
# interrupted build, another pin under the same version) starts over.
marker="$dir/.installed"
if [[ -x "$bin" && -f "$marker" && "$(cat "$marker")" == "$module_sum" ]]; then
  echo "$bin"
  exit 0
fi

if ! command -v go >/dev/null; then
  echo "install-jaeger: go is needed to build $module@$version from the Go module proxy" >&2
  exit 2
fi
# Jaeger's go.mod names a toolchain line that this machine's Go satisfies: never let it
# trigger a download.
export GOTOOLCHAIN=local

mkdir -p "$cache_dir/jaeger"
# One build at a time per cache; a second caller waits and then finds the result.
exec 9>"$cache_dir/jaeger/.lock"
flock 9
if [[ -x "$bin" && -f "$marker" && "$(cat "$marker")" == "$module_sum" ]]; then
  echo "$bin"
  exit 0
fi

# The checksum database vouches for the module; this checks the pin, so a different
# module served under the same version cannot slip in.
actual=$(go mod download -json "$module@$version" | sed -n 's/^\t"Sum": "\(.*\)",$/\1/p')
if [[ "$actual" != "$module_sum" ]]; then
  echo "install-jaeger: $module@$version has sum '$actual'; the pin is $module_sum" >&2
  exit 1
fi

echo "install-jaeger: building $module/cmd/jaeger@$version into $dir (many minutes on 2 cores)" >&2
rm -rf "$dir"
work=$(mktemp -d "$cache_dir/jaeger/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
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
mkdir -p "$dir"
mv "$work/bin" "$dir/bin"
echo "$module_sum" >"$marker"
echo "$bin"
