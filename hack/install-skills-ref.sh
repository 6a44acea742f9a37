#!/usr/bin/env bash
# Installs the reference Agent Skills validator (skills-ref, command `agentskills`) into a
# cached virtualenv and prints the executable's path as the last stdout line. The Rust
# differential test (crates/agentic-skill/tests/differential.rs) runs it through
# AGENTSKILLS_BIN. Progress goes to stderr so callers can use `| tail -n1`.
set -euo pipefail

version=0.1.1
cache_dir="${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}"
venv="$cache_dir/skills-ref-$version"
bin="$venv/bin/agentskills"

# A finished install leaves a marker; without it (interrupted pip, partial venv) start over.
marker="$venv/.installed"
if [[ -x "$bin" && -f "$marker" ]]; then
  echo "$bin"
  exit 0
fi

python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null 2>&1; then
  echo "install-skills-ref: $python not found; install Python 3.10 or later" >&2
  exit 2
fi

echo "install-skills-ref: creating $venv" >&2
rm -rf "$venv"
mkdir -p "$cache_dir"
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "skills-ref==$version" >&2
# The command must work before the install counts as done.
"$bin" --help >/dev/null
touch "$marker"
echo "$bin"
