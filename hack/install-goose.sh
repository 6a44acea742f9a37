#!/usr/bin/env bash
# Installs upstream's goose binary (the agent runtime Konveyor's harness runs) from the npm
# registry package @aaif/goose-binary-linux-x64, pinned by version and sha512 integrity, into
# ${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}/goose/<version>/, and prints the binary's
# path as the last stdout line. The goose differential test
# (crates/agentic-skill/tests/goose.rs) runs it through GOOSE_BIN, and the previous pin
# through GOOSE_PREVIOUS_BIN. Progress goes to stderr so callers can use `| tail -n1`.
#
#   hack/install-goose.sh             # the current pin
#   hack/install-goose.sh previous    # the previous pin, so the tests can tell what changed
#
# Upgrading goose is one line: move the current pin to `previous` and set the new one, with
# the integrity `npm view @aaif/goose-binary-linux-x64@<version> dist.integrity` prints.
set -euo pipefail

package=@aaif/goose-binary-linux-x64
current=(1.52.0 sha512-2aPCG0HuLUI1cafcez1s1nLlTsNMx7AHWnmAOS/6S9xqmcvY+oXsQA5SUHin1Sf5uphK6pcOCLmgygJ6YQIDaQ==)
previous=(1.50.0 sha512-bfAr6wUCHdm7aFkXuvQXgkUdJGT2C1lwVhutHTmJ5DRoo7m7UZYrD8Qu/iIQwXCtJUhmISyeCLHYNoXVxBcIAw==)

case "${1:-current}" in
  current) pin=("${current[@]}") ;;
  previous) pin=("${previous[@]}") ;;
  *)
    echo "install-goose: unknown pin '$1'; use 'current' or 'previous'" >&2
    exit 2
    ;;
esac
version=${pin[0]}
integrity=${pin[1]}

cache_dir="${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}"
dir="$cache_dir/goose/$version"
bin="$dir/bin/goose"

# A finished install records the integrity it verified; anything else (an interrupted
# download, another pin under the same version) starts over.
marker="$dir/.installed"
if [[ -x "$bin" && -f "$marker" && "$(cat "$marker")" == "$integrity" ]]; then
  echo "$bin"
  exit 0
fi

if ! command -v npm >/dev/null; then
  echo "install-goose: npm is needed to fetch $package@$version from the npm registry" >&2
  exit 2
fi

echo "install-goose: installing $package@$version into $dir" >&2
rm -rf "$dir"
mkdir -p "$dir"
work=$(mktemp -d "$cache_dir/goose/.download.XXXXXX")
trap 'rm -rf "$work"' EXIT

npm pack --silent --pack-destination "$work" "$package@$version" >/dev/null
tarball=("$work"/*.tgz)
if [[ ${#tarball[@]} -ne 1 || ! -f ${tarball[0]} ]]; then
  echo "install-goose: npm pack left no single tarball in $work" >&2
  exit 1
fi
# npm checks the registry's own integrity; this checks the pin, so a republished or
# substituted tarball cannot slip in under the same version.
actual="sha512-$(openssl dgst -sha512 -binary "${tarball[0]}" | base64 -w0)"
if [[ "$actual" != "$integrity" ]]; then
  echo "install-goose: $package@$version has integrity $actual; the pin is $integrity" >&2
  exit 1
fi

tar -xzf "${tarball[0]}" -C "$work"
mkdir -p "$dir/bin"
mv "$work/package/bin/goose" "$bin"
chmod 0755 "$bin"
# The binary must run before the install counts as done.
reported=$("$bin" --version)
if [[ "$reported" != *"$version"* ]]; then
  echo "install-goose: $bin reports version '$reported'; expected $version" >&2
  exit 1
fi
echo "$integrity" >"$marker"
echo "$bin"
