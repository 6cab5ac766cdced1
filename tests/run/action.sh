#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The GitHub Action's path, on this machine: the steps of action.yml, as
# a shell script (action_steps.py) with GITHUB_PATH, GITHUB_ENV,
# GITHUB_OUTPUT and RUNNER_TEMP as a runner gives them, build and install
# uroce from SOURCE; then, as a later step would, with the PATH and
# environment they exported, an unmodified perftest pair through
# `uroce run` (as UROCE_TEST_USER when root).  The tune step runs with
# tune=false: a test does not change this host's sysctls.
#
#   action.sh --source DIR --port TCP_PORT
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

[[ ${1:-} == --source && ${3:-} == --port ]] || uroce_die "usage: action.sh --source DIR --port P"
src=$2 port=$4
python3 -c 'import yaml' 2>/dev/null || { echo "SKIP: python3-yaml missing"; exit 77; }
runner=$(mktemp -d "${TMPDIR:-/tmp}/uroce-runner.XXXXXX")
trap 'rm -rf "$runner"' EXIT
chmod 755 "$runner"
mkdir "$runner/temp"
chmod 755 "$runner/temp"
: >"$runner/path"; : >"$runner/env"; : >"$runner/output"

python3 "$here/action_steps.py" "$src/action.yml" "$src" tune=false \
	>"$runner/steps.sh" || uroce_die "cannot turn action.yml into a script"
(
	cd "$runner" &&
	env RUNNER_TEMP="$runner/temp" GITHUB_PATH="$runner/path" \
	    GITHUB_ENV="$runner/env" GITHUB_OUTPUT="$runner/output" \
	    PATH="$PATH" bash "$runner/steps.sh"
) >"$runner/steps.log" 2>&1
rc=$?
if ((rc != 0)); then
	uroce_print_log "the action's steps" "$runner/steps.log"
	uroce_die "the action's steps failed: $(uroce_rc_text $rc)"
fi
grep -E '^:::|^(ok|warn|FAIL) ' "$runner/steps.log"

# what a later step sees
while read -r dir; do PATH=$dir:$PATH; done <"$runner/path"
while IFS='=' read -r k v; do export "$k=$v"; done <"$runner/env"
grep -q "^prefix=$runner/temp/uroce\$" "$runner/output" ||
	uroce_die "no prefix output: $(cat "$runner/output")"
tool=$(command -v uroce) || uroce_die "uroce is not on the PATH the action exported"
[[ $tool == "${UROCE_PREFIX:-}/bin/uroce" ]] || uroce_die "uroce is $tool, not from UROCE_PREFIX"

export UROCE_TOOL=$tool UROCE_LIBDIR=$UROCE_PREFIX/lib/uroce
"$here/../conformance/pair.sh" --kind perftest --port "$port" --timeout 60 -- \
	ib_write_bw || uroce_die "ib_write_bw through the action's uroce"
uroce_say "PASS: the action's steps, then perftest through uroce run"
