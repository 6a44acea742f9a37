#!/bin/sh
# A stand-in for an agent harness, for end-to-end tests and `make run`: prints what the
# sandbox gives an agent (the skills under /opt/skills and the environment that describes
# them), then exits. The tests read these lines from the pod log:
#
#   skill-file: <path>               every file under /opt/skills, sorted, relative to it
#   skill-sha256: <sha256>  <path>   its SHA-256, to compare byte for byte
#   file-base64: <path> <base64>     the skills manifest, params.json and every file named in
#                                    STUB_PRINT_FILES (space-separated paths), whole
#   write-opt-skills: <result>       whether creating a file in /opt/skills worked
#   write-skill: <name> <result>     whether creating a file in /opt/skills/<name> worked
#   write-dir: <dir> <result>        the same for every directory in STUB_PROBE_DIRS
#   KONVEYOR_RULES=... / HARNESS_SKILL_MODE=... / KONVEYOR_PROMPT=... /
#   KONVEYOR_INSTRUCTIONS=... / KONVEYOR_GIT_AUTHOR_NAME=... / KONVEYOR_GIT_AUTHOR_EMAIL=...
#                                    (<unset> when not set)
#
# STUB_LISTEN_PORT, when set, is a TCP port it accepts connections on while it runs (busybox
# httpd), like a harness's ACP endpoint: the pod turns Ready and the run's ACPReady Listening.
# STUB_EXIT_CODE (default 0) is the exit code; STUB_TERMINATION_MESSAGE, when set, is
# written to /dev/termination-log first. STUB_SLEEP_SECONDS, when set, is how long it sleeps
# before exiting, like an agent at work; SIGTERM ends the sleep at once (exit 143), as PID 1
# gets no default signal handling.
set -eu

skills_dir=/opt/skills

echo "stub-agent: skills under $skills_dir"
if [ -d "$skills_dir" ]; then
    # ConfigMap volumes (inline skills) present files as symlinks into hidden `..data`
    # directories: list the links, which read like the files.
    files="$(cd "$skills_dir" && find . \( -type f -o -type l \) ! -path '*/..*' | sed 's|^\./||' | sort)"
    for file in $files; do
        echo "skill-file: $file"
    done
    for file in $files; do
        echo "skill-sha256: $(cd "$skills_dir" && sha256sum "$file")"
    done
    # shellcheck disable=SC2086 # STUB_PRINT_FILES is a list of paths
    for file in "$skills_dir/.konveyor-skills.json" /run/konveyor/params.json ${STUB_PRINT_FILES-}; do
        if [ -f "$file" ]; then
            echo "file-base64: $file $(base64 -w 0 "$file")"
        fi
    done
    probe() { # <label> <directory>
        if touch "$2/.stub-agent-probe" 2>/tmp/stub-agent-probe.err; then
            echo "$1 allowed"
        else
            echo "$1 refused: $(cat /tmp/stub-agent-probe.err)"
        fi
    }
    probe "write-opt-skills:" "$skills_dir"
    for dir in "$skills_dir"/*/; do
        dir="${dir%/}"
        [ -d "$dir" ] && probe "write-skill: $(basename "$dir")" "$dir"
    done
    for dir in ${STUB_PROBE_DIRS-}; do
        probe "write-dir: $dir" "$dir"
    done
else
    echo "stub-agent: $skills_dir does not exist"
fi
echo "KONVEYOR_RULES=${KONVEYOR_RULES-<unset>}"
echo "HARNESS_SKILL_MODE=${HARNESS_SKILL_MODE-<unset>}"
echo "KONVEYOR_PROMPT=${KONVEYOR_PROMPT-<unset>}"
echo "KONVEYOR_INSTRUCTIONS=${KONVEYOR_INSTRUCTIONS-<unset>}"
echo "KONVEYOR_GIT_AUTHOR_NAME=${KONVEYOR_GIT_AUTHOR_NAME-<unset>}"
echo "KONVEYOR_GIT_AUTHOR_EMAIL=${KONVEYOR_GIT_AUTHOR_EMAIL-<unset>}"
if [ -n "${STUB_LISTEN_PORT-}" ]; then
    mkdir -p /tmp/stub-agent-www
    httpd -p "$STUB_LISTEN_PORT" -h /tmp/stub-agent-www
    echo "stub-agent: listening on port $STUB_LISTEN_PORT"
fi
if [ -n "${STUB_TERMINATION_MESSAGE-}" ]; then
    printf '%s' "$STUB_TERMINATION_MESSAGE" > /dev/termination-log
fi
if [ -n "${STUB_SLEEP_SECONDS-}" ]; then
    echo "stub-agent: sleeping ${STUB_SLEEP_SECONDS}s"
    trap 'echo "stub-agent: terminated"; exit 143' TERM
    sleep "$STUB_SLEEP_SECONDS" &
    wait $!
fi
echo "stub-agent: done"
exit "${STUB_EXIT_CODE:-0}"
