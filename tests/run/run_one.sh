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

tmo=60 expects=()
while (($#)); do
	case $1 in
	--timeout) tmo=$2; shift 2 ;;
	--expect) expects+=("$2"); shift 2 ;;
	--) shift; break ;;
	*) uroce_die "run_one.sh: unknown option $1" ;;
	esac
done
(($#)) || uroce_die "run_one.sh: no program given"
uroce_run_preflight "$1"
mapfile -t launch < <(uroce_launch)
out=$(timeout -k 5 "$tmo" "${launch[@]}" "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
((rc == 0)) || uroce_die "$*: $(uroce_rc_text $rc)"
for re in "${expects[@]}"; do
	grep -Eq -- "$re" <<<"$out" || uroce_die "no line matches '$re'"
done
uroce_say "PASS: $*"
