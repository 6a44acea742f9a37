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
#
# Two containers (docs/pod-contract.md#the-runtime-in-its-own-container,
# tests/tests/runtime_container_node.rs): `goose-harness runtime` is the Agent's
# `spec.runtime.command`: it links the skills into its own $HOME, points goose at the Gateway
# and execs `goose serve` on 127.0.0.1:$KONVEYOR_RUNTIME_ACP_PORT; beside it a probe prints
# what the runtime can see (`runtime-id:`, `runtime-environ:`, `runtime-mounts:` as above,
# `runtime-harness-files:` and `runtime-processes:`) once the harness has written
# /workspace/shared.txt, to which it appends a line. GOOSE_HARNESS_MODEL=runtime makes the
# `agent` container the harness of that runtime: it keeps a credential in a 0700 home of its
# own, writes /workspace/shared.txt group-writable, drives one ACP session over HTTP
# (initialize, session/new, session/prompt with the prompt and instructions) and prints
# `harness-acp-stop: <stopReason>`, `harness-id:`, `harness-environ:` and, once the runtime's
# probe is done, `harness-shared: <base64 of shared.txt>`.
set -eu

skills_dir=${KONVEYOR_SKILLS_DIR:-/opt/skills}

# goose's provider from the Gateway's variables, as the pod contract gives them.
gateway_provider() {
  export GOOSE_PROVIDER=openai GOOSE_MODEL=fake-model GOOSE_DISABLE_KEYRING=1 \
    GOOSE_TELEMETRY_OFF=1 GOOSE_MODE=auto \
    OPENAI_HOST="${KONVEYOR_LLM_ENDPOINT:?goose-harness: no KONVEYOR_LLM_ENDPOINT}" \
    OPENAI_API_KEY="${KONVEYOR_LLM_API_KEY:-}"
}

# Within `seconds`, until `file` holds `text`; fails after.
wait_for_text() {
  file=$1 text=$2 seconds=$3
  while ! grep -q -- "$text" "$file" 2>/dev/null; do
    seconds=$((seconds - 1))
    [ "$seconds" -gt 0 ] || return 1
    sleep 1
  done
}

if [ "${1:-}" = runtime ]; then
  mkdir -p "$HOME/.agents/skills"
  rules=",${KONVEYOR_RULES:-},"
  for dir in "$skills_dir"/*/; do
    name=$(basename "$dir")
    case "$rules" in
      *",$name,"*) ;;
      *) ln -s "$skills_dir/$name" "$HOME/.agents/skills/$name" ;;
    esac
  done
  (
    wait_for_text /workspace/shared.txt harness 300 || exit 1
    echo "runtime-id: $(id -u):$(id -g)"
    echo "runtime-environ: $(base64 </proc/1/environ | tr -d '\n')"
    echo "runtime-mounts: $(tar -czf - -C / workspace tmp home/runtime opt/skills run 2>/dev/null | base64 | tr -d '\n')"
    # shellcheck disable=SC2012 # ls's own words for paths that must be missing
    echo "runtime-harness-files: $(ls -d /etc/harness-credentials /run/konveyor/params.json 2>&1 | tr '\n' ' ')"
    echo "runtime-processes: $(for p in /proc/[0-9]*; do stat -c %u "$p"; done | sort -u | tr '\n' ' ')"
    echo "from the runtime" >>/workspace/shared.txt
    : >/workspace/runtime-done
  ) &
  gateway_provider
  cd /workspace
  exec goose serve --host 127.0.0.1 --port "${KONVEYOR_RUNTIME_ACP_PORT:?}" \
    --with-builtin skills --dangerously-unauthenticated
fi

if [ "${GOOSE_HARNESS_MODEL:-}" = runtime ]; then
  umask 002
  echo "harness-id: $(id -u):$(id -g)"
  mkdir -m 700 /tmp/harness-home
  printf '%s\n' "${GIT_TOKEN:-}" >/tmp/harness-home/.git-credentials
  echo "from the harness" >/workspace/shared.txt
  url="http://127.0.0.1:${KONVEYOR_RUNTIME_ACP_PORT:?}/acp"
  # BODY [CONNECTION [SESSION]]: the answer on stdout, the response headers in /tmp/acp-headers
  post() {
    wget -S -q -O - --header 'Content-Type: application/json' \
      ${2:+--header "acp-connection-id: $2"} ${3:+--header "acp-session-id: $3"} \
      --post-data "$1" "$url" 2>/tmp/acp-headers
  }
  # FILE CONNECTION [SESSION]: goose's answers and notifications (server-sent events) into FILE
  listen() {
    wget -q -O "$1" --header 'Accept: text/event-stream' --header "acp-connection-id: $2" \
      ${3:+--header "acp-session-id: $3"} "$url" &
    sleep 1
  }
  tries=60
  until post '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}' >/tmp/acp-init; do
    tries=$((tries - 1))
    [ "$tries" -gt 0 ] || { echo "goose-harness: the runtime never answered on $url" >&2; exit 1; }
    sleep 1
  done
  connection=$(sed -n 's/^ *[Aa]cp-[Cc]onnection-[Ii]d: *//p' /tmp/acp-headers | tr -d '\r')
  # goose answers a connection's requests on the connection's stream, a session's on the
  # session's.
  listen /tmp/acp-connection "$connection"
  post '{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/workspace","mcpServers":[]}}' "$connection" >/dev/null
  wait_for_text /tmp/acp-connection '"id":2,' 120 || { cat /tmp/acp-connection >&2; exit 1; }
  session=$(sed -n 's/.*"id":2,"result":{"sessionId":"\([^"]*\)".*/\1/p' /tmp/acp-connection)
  [ -n "$session" ] || { cat /tmp/acp-connection >&2; exit 1; }
  listen /tmp/acp-session "$connection" "$session"
  text=$(printf '%s %s' "${KONVEYOR_PROMPT:-}" "${KONVEYOR_INSTRUCTIONS:-}" | tr -d '"\\\n')
  post "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"$session\",\"prompt\":[{\"type\":\"text\",\"text\":\"$text\"}]}}" "$connection" "$session" >/dev/null
  wait_for_text /tmp/acp-session '"id":3,' 240 || { cat /tmp/acp-session >&2; exit 1; }
  stop=$(sed -n 's/.*"id":3,"result":{.*"stopReason":"\([^"]*\)".*/\1/p' /tmp/acp-session)
  echo "harness-acp-updates: $(grep -o '"sessionUpdate":"[a-z_]*"' /tmp/acp-session | cut -d'"' -f4 | sort -u | tr '\n' ' ')"
  echo "harness-acp-stop: $stop"
  wait_for_text /workspace/shared.txt runtime 300 || exit 1
  while [ ! -e /workspace/runtime-done ]; do sleep 1; done
  echo "harness-environ: $(base64 </proc/1/environ | tr -d '\n')"
  echo "harness-shared: $(base64 </workspace/shared.txt | tr -d '\n')"
  [ "$stop" = end_turn ]
  exit
fi
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
