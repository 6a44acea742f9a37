#!/usr/bin/env bash
# The shared half of the install scripts of test tools built from the Go module proxy
# (hack/install-cosign.sh, hack/install-jaeger.sh): the cache directory keyed by version,
# the marker of a finished install, one build at a time, and the check of the module's
# pinned checksum. Sourced, not run.
#
# go_tool_begin TOOL VERSION MODULE MODULE_SUM
#   sets dir (the version's cache directory), bin (TOOL's binary in it), marker and work (an
#   empty build directory, removed on exit); prints the binary and exits when it is already
#   installed from MODULE_SUM.
# go_tool_finish
#   moves "$work/bin" into place, records the sum and prints the binary.

go_tool_installed() {
  [[ -x "$bin" && -f "$marker" && "$(cat "$marker")" == "$module_sum" ]]
}

go_tool_begin() {
  tool=$1 version=$2 module=$3 module_sum=$4
  local cache_dir="${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}"
  dir="$cache_dir/$tool/$version"
  bin="$dir/bin/$tool"
  # A finished install records the module sum it was built from; anything else (an
  # interrupted build, another pin under the same version) starts over.
  marker="$dir/.installed"
  if go_tool_installed; then
    echo "$bin"
    exit 0
  fi
  if ! command -v go >/dev/null; then
    echo "install-$tool: go is needed to build $module@$version from the Go module proxy" >&2
    exit 2
  fi
  # The module's go.mod may name a toolchain this machine's Go satisfies: never let it
  # trigger a download.
  export GOTOOLCHAIN=local

  mkdir -p "$cache_dir/$tool"
  # One build at a time per cache; a second caller waits and then finds the result.
  exec 9>"$cache_dir/$tool/.lock"
  flock 9
  if go_tool_installed; then
    echo "$bin"
    exit 0
  fi

  # The checksum database vouches for the module; this checks the pin, so a different
  # module served under the same version cannot slip in.
  local actual
  actual=$(go mod download -json "$module@$version" | sed -n 's/^\t"Sum": "\(.*\)",$/\1/p')
  if [[ "$actual" != "$module_sum" ]]; then
    echo "install-$tool: $module@$version has sum '$actual'; the pin is $module_sum" >&2
    exit 1
  fi
  rm -rf "$dir"
  work=$(mktemp -d "$cache_dir/$tool/.build.XXXXXX")
  # shellcheck disable=SC2064 # the directory is known now, and must go whatever happens
  trap "rm -rf '$work'" EXIT
}

go_tool_finish() {
  mkdir -p "$dir"
  mv "$work/bin" "$dir/bin"
  echo "$module_sum" >"$marker"
  echo "$bin"
}
