#!/bin/sh
# A stand-in for an agent harness, for end-to-end tests: prints what the sandbox gives an
# agent (the skills under /opt/skills and the environment that describes them) and exits 0.
# hack/kind-e2e.sh reads these lines from the pod log.
set -eu

skills_dir=/opt/skills

echo "stub-agent: skills under $skills_dir"
if [ -d "$skills_dir" ]; then
    # One line per file, sorted, relative to the skills directory. ConfigMap volumes (inline
    # skills) present files as symlinks into hidden `..data` directories: list the links.
    (cd "$skills_dir" && find . \( -type f -o -type l \) ! -path '*/..*' | sed 's|^\./||' | sort |
        sed 's|^|skill-file: |')
else
    echo "stub-agent: $skills_dir does not exist"
fi
echo "KONVEYOR_RULES=${KONVEYOR_RULES-<unset>}"
echo "HARNESS_SKILL_MODE=${HARNESS_SKILL_MODE-<unset>}"
echo "stub-agent: done"
