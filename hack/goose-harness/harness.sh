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
#
# GOOSE_HARNESS_MODEL=gateway (tests/tests/credential_proxy_node.rs): goose talks to the run's
# Gateway as the pod contract gives it (KONVEYOR_LLM_ENDPOINT, KONVEYOR_LLM_API_KEY: with the
# credential proxy, its loopback address and a placeholder) instead of the scripted endpoint
# in this container. Beside goose, GET <endpoint>/v1/models?from=harness every second (so the
# endpoint sees which key the proxy adds while goose waits); afterwards it prints what the test looks for
# the key in: `harness-proxy-other-host: <wget's words>` (the proxy asked for another host),
# `harness-environ: <base64>` (/proc/1/environ) and `harness-mounts: <base64>` (a gzipped tar
# of every writable or mounted directory the agent has).
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
if [ "${GOOSE_HARNESS_MODEL:-}" = gateway ]; then
  endpoint=${KONVEYOR_LLM_ENDPOINT:?goose-harness: no KONVEYOR_LLM_ENDPOINT}
  (while :; do wget -q -O /dev/null "$endpoint/v1/models?from=harness" || true; sleep 1; done) &
  poller=$!
  OPENAI_HOST=$endpoint OPENAI_API_KEY=${KONVEYOR_LLM_API_KEY:-} \
    goose run --no-profile --with-builtin skills --system "$(cat "$system")" --text "$prompt" || status=$?
  kill "$poller" 2>/dev/null || true
  other=$(http_proxy=$endpoint wget -q -O /dev/null http://example.com/ 2>&1 || true)
  echo "harness-proxy-other-host: $other"
  echo "harness-environ: $(base64 </proc/1/environ | tr -d '\n')"
  echo "harness-mounts: $(tar -czf - -C / workspace tmp opt/skills run/konveyor 2>/dev/null | base64 | tr -d '\n')"
  exit "$status"
fi
# shellcheck disable=SC2086 # one argument per load
goose-fake-llm "$record" $loads -- \
  goose run --no-profile --with-builtin skills --system "$(cat "$system")" --text "$prompt" || status=$?

sed 's/^/fake-llm-request: /' "$record"
exit "$status"
