#!/usr/bin/env bash
# Installs the reference Agent Skills validator (skills-ref, command `agentskills`) into a
# cached virtualenv and prints the executable's path as the last stdout line. The Rust
# differential test (crates/agentic-skill/tests/differential.rs) runs it through
# AGENTSKILLS_BIN. Progress goes to stderr so callers can use `| tail -n1`.
set -euo pipefail

version=0.1.1
# strictyaml decides the reference verdicts on YAML; pin it so they cannot drift.
requirements=("skills-ref==$version" "strictyaml==1.7.3")
cache_dir="${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}"
venv="$cache_dir/skills-ref-$version"
bin="$venv/bin/agentskills"

# A finished install records what it installed; anything else (an interrupted pip, other
# pins) starts over.
marker="$venv/.installed"
if [[ -x "$bin" && -f "$marker" && "$(cat "$marker")" == "${requirements[*]}" ]]; then
  echo "$bin"
  exit 0
fi

python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "install-skills-ref: skills-ref $version needs Python 3.11 or later as $python (set PYTHON to choose another)" >&2
  exit 2
fi

echo "install-skills-ref: installing ${requirements[*]} into $venv" >&2
rm -rf "$venv"
mkdir -p "$cache_dir"
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${requirements[@]}" >&2
# The command must work before the install counts as done.
"$bin" --help >/dev/null
echo "${requirements[*]}" >"$marker"
echo "$bin"
