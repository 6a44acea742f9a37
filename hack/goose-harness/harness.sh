#!/bin/sh
# The goose test image's entrypoint (crates/agentic-testenv/src/goose.rs builds the image,
# tests/tests/goose_node.rs runs it): a harness that lays the run's skills out for goose as
# docs/pod-contract.md recommends and runs one headless `goose run` against the scripted
# endpoint goose-fake-llm (tests/goose-fake-llm), all on 127.0.0.1.
#
# - each `type: skill` skill gets its own link ~/.agents/skills/<name> -> /opt/skills/<name>
#   (per-skill links: goose#11402 stops following a linked discovery root);
# - each rule (KONVEYOR_RULES) is not a goose skill: its SKILL.md goes into goose's system
#   prompt (`--system`), as rules are always in the prompt;
# - goose runs in /workspace with HOME under /tmp, both writable emptyDirs of the pod, with
#   its `skills` extension alone (`--no-profile --with-builtin skills`);
# - a write into each linked skill is tried first and its outcome printed as
#   `skill-write: <name> refused|allowed` (the mounts must be read-only);
# - afterwards every request goose made is printed as a line `fake-llm-request: <json>`,
#   and the harness exits with goose's exit code.
#
# GOOSE_HARNESS_LOADS: what the scripted model loads with `load_skill`, in turn,
# space-separated (`<skill>` or `<skill>/<supporting file>`).
set -eu

skills_dir=${KONVEYOR_SKILLS_DIR:-/opt/skills}
mode=${HARNESS_SKILL_MODE:-native}
if [ "$mode" != native ]; then
  echo "goose-harness: HARNESS_SKILL_MODE=$mode: this harness lets goose discover skills (native) only" >&2
  exit 1
fi
loads=${GOOSE_HARNESS_LOADS:?goose-harness: set GOOSE_HARNESS_LOADS to what the model loads}

export HOME=/tmp/goose-home
mkdir -p "$HOME/.agents/skills"
system=/tmp/goose-harness-system.md
record=/tmp/goose-harness-requests.jsonl
: >"$system"
: >"$record"

rules=",${KONVEYOR_RULES:-},"
for dir in "$skills_dir"/*/; do
  name=$(basename "$dir")
  [ -f "$skills_dir/$name/SKILL.md" ] || continue
  case "$rules" in
    *",$name,"*)
      {
        printf 'Rule %s, always in force:\n\n' "$name"
        cat "$skills_dir/$name/SKILL.md"
        printf '\n\n'
      } >>"$system"
      ;;
    *)
      ln -s "$skills_dir/$name" "$HOME/.agents/skills/$name"
      if (: >"$HOME/.agents/skills/$name/.goose-harness-write") 2>/dev/null; then
        echo "skill-write: $name allowed"
      else
        echo "skill-write: $name refused"
      fi
      ;;
  esac
done

prompt="${KONVEYOR_PROMPT:-}

${KONVEYOR_INSTRUCTIONS:-}"

# goose's provider: OpenAI's API at OPENAI_HOST, which goose-fake-llm sets to itself. No
# keyring, no telemetry, no approval prompts, no default extensions: nothing leaves the pod.
export GOOSE_PROVIDER=openai GOOSE_MODEL=fake-model OPENAI_API_KEY=unused \
  GOOSE_DISABLE_KEYRING=1 GOOSE_TELEMETRY_OFF=1 GOOSE_MODE=auto
cd /workspace
status=0
# shellcheck disable=SC2086 # one argument per load
goose-fake-llm "$record" $loads -- \
  goose run --no-profile --with-builtin skills --system "$(cat "$system")" --text "$prompt" || status=$?

sed 's/^/fake-llm-request: /' "$record"
exit "$status"
