#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Runs one unmodified program over uroce and checks its output.
#
#   single.sh [--timeout SECONDS] [--expect ERE]... -- PROGRAM [ARGS...]
#
# Passes when PROGRAM exits 0 within the timeout, prints nothing matching
# UROCE_FAIL_RE, and its output (stdout and stderr) has a line matching
# each --expect extended regular expression.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

uroce_one_opts single.sh 30 "$@"
uroce_preflight "${cmd[0]}"
mapfile -t penv < <(uroce_prog_env)

uroce_say "run: ${penv[*]} ${cmd[*]}"
out=$(timeout -k 5 "$tmo" env "${penv[@]}" "${cmd[@]}" 2>&1)
rc=$?

fail() {
	printf 'FAIL: %s\n' "$*"
	uroce_print_log "output of: ${cmd[*]}" /dev/stdin <<<"$out"
	exit 1
}

((rc == 0)) || fail "${cmd[0]}: $(uroce_rc_text $rc)"
if bad=$(uroce_log_errors - <<<"$out"); then
	fail "${cmd[0]} printed an error:"$'\n'"$bad"
fi
for re in "${expects[@]}"; do
	grep -Eq -- "$re" <<<"$out" || fail "no line matches: $re"
done

uroce_say "PASS: ${cmd[*]}"
printf '%s\n' "$out"
exit 0
