#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Runs one program through `uroce run` (as UROCE_TEST_USER when root) and
# checks it: exit 0, each --expect RE in its output.
#
#   run_one.sh [--timeout S] [--expect RE]... -- PROGRAM [ARGS...]
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

uroce_one_opts run_one.sh 60 "$@"
uroce_run_preflight "${cmd[0]}"
mapfile -t launch < <(uroce_launch)
out=$(timeout -k 5 "$tmo" "${launch[@]}" "${cmd[@]}" 2>&1)
rc=$?
printf '%s\n' "$out"
((rc == 0)) || uroce_die "${cmd[*]}: $(uroce_rc_text $rc)"
for re in "${expects[@]}"; do
	grep -Eq -- "$re" <<<"$out" || uroce_die "no line matches '$re'"
done
uroce_say "PASS: ${cmd[*]}"
