#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Starts N `uroce run`s at once, as `mpiexec -n N ... uroce run -- prog`
# starts its ranks, with nothing configured: each must get an address of
# its own (no "another uroce run holds it for its program"), and all must
# run.  Each program says its UROCE_ADDR, then holds it until every one
# has started (it waits for a line on a FIFO that the test writes once
# all have said theirs), so that the addresses are all in use at once.
#
#   many_at_once.sh [--count N] [--timeout S]
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

count=24 tmo=120
while (($#)); do
	case $1 in
	--count) count=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	*) uroce_die "many_at_once.sh: unknown option $1" ;;
	esac
done
uroce_run_preflight
mapfile -t launch < <(uroce_launch)

dir=$(mktemp -d /tmp/uroce-many.XXXXXX) || uroce_die "mktemp failed"
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
chmod 777 "$dir"
mkfifo -m 666 "$dir/go" || uroce_die "mkfifo failed"
mkfifo -m 666 "$dir/ready" || uroce_die "mkfifo failed"
# read-write: never EOF, never blocks the writers' opens
exec 4<>"$dir/ready"

for ((i = 0; i < count; i++)); do
	(
		timeout -k 5 "$tmo" "${launch[@]}" /bin/sh -c \
			'echo "addr $UROCE_ADDR" >"$2"; read -r x <"$1" && echo done' \
			sh "$dir/go" "$dir/ready" >"$dir/out.$i" 2>&1
		rc=$?
		echo "end $rc" >"$dir/ready"
		exit $rc
	) &
	pids+=($!)
done

# every program has started (it says its address) or its uroce run has
# ended (failed) before the program waited, bounded by the timeout
started=0 ended=0 addrs=()
while ((started + ended < count)); do
	read -r -t "$tmo" -u 4 what rest ||
		uroce_die "only $started of $count started within $tmo s"
	case $what in
	addr) started=$((started + 1)); addrs+=("$rest") ;;
	end) ended=$((ended + 1)) ;;
	esac
done
# a line for each program on go (open read-write: it does not wait for
# a reader), kept open until they are done: the programs end
exec 3<>"$dir/go"
for ((i = 0; i < count; i++)); do echo go >&3; done

fails=0
for ((i = 0; i < count; i++)); do
	wait "${pids[i]}"
	rc=$?
	if ((rc != 0)) || ! grep -q '^done' "$dir/out.$i"; then
		echo "run $i: $(uroce_rc_text $rc):"
		sed 's/^/  /' "$dir/out.$i"
		fails=$((fails + 1))
	fi
done
pids=()
exec 3>&-
((fails == 0)) || uroce_die "$fails of $count uroce runs failed"
dups=$(printf '%s\n' "${addrs[@]}" | sort | uniq -d)
[[ -z $dups ]] || uroce_die "an address given twice: $dups"
uroce_say "PASS: $count uroce runs started at once, each on an address of its own"
