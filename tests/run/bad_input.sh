#!/bin/bash
# SPDX-License-Identifier: MIT
#
# `uroce run` on bad input: a program that does not exist, a bad option,
# a missing value, no program, an address that is not one, one that
# cannot be bound and one another `uroce run` holds each fail at once
# with one line on stderr and their exit status; the program's own status
# comes back; --no-namespace says in one line what it cannot give.  And
# nothing is left behind on the host: mounts, /dev/shm segments, files in
# /tmp, /dev/infiniband or /sys/class/infiniband, also when the program
# is killed.  As UROCE_TEST_USER when root.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

uroce_run_preflight
mapfile -t as < <(uroce_as_test_user)
uroce() { timeout -k 2 20 "${as[@]}" "$UROCE_TOOL" "$@"; }
held=127.0.16.9
fails=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# What uroce run could leave on the host, robust to other tests running
# beside this one: mounts of its tmpfs ("uroce"), the RDMA directories,
# files in /tmp and /dev/shm made by the test user since the start.
touch "$work/start"
host_state() {
	grep -c ' - tmpfs uroce ' /proc/self/mountinfo
	ls -d /dev/infiniband /sys/class/infiniband /sys/class/infiniband_verbs 2>&1
	if [[ ${#as[@]} -gt 0 ]]; then
		find /tmp /dev/shm -maxdepth 1 -user "$UROCE_TEST_USER" -newer "$work/start"
	fi
}
before=$(host_state)
pids=()

# case NAME WANT_RC STDERR_RE -- uroce ARGS...: exactly one line on
# stderr, matching STDERR_RE; exit status WANT_RC
case_() {
	local name=$1 want=$2 re=$3 rc lines
	shift 4
	uroce "$@" >"$work/out" 2>"$work/err"
	rc=$?
	lines=$(wc -l <"$work/err")
	if ((rc != want)) || ((lines != 1)) || ! grep -Eq -- "$re" "$work/err"; then
		echo "FAIL: $name: exit $rc (want $want), $lines lines on stderr (want 1 matching '$re'):"
		cat "$work/err"
		fails=$((fails + 1))
	else
		echo "ok: $name: exit $rc: $(cat "$work/err")"
	fi
}

case_ "no such program" 127 "no-such-program-uroce: command not found" -- \
	run -- no-such-program-uroce
case_ "no such path" 127 "/nonexistent/prog: " -- run -- /nonexistent/prog
case_ "not executable" 126 "/etc/passwd: Permission denied" -- run -- /etc/passwd
case_ "bad option" 2 "unknown option --bogus" -- run --bogus -- true
case_ "missing value" 2 "a value is missing after --addr" -- run --addr
case_ "no program" 2 "no program given" -- run
case_ "not an address" 1 "UROCE_ADDR=nonsense is not an IP address" -- \
	run --addr nonsense -- true
case_ "unbindable address" 1 "cannot bind UDP 192\.0\.2\.1 port 4791" -- \
	run --addr 192.0.2.1 -- true
case_ "no namespace" 0 "gets no /dev/infiniband .*--no-namespace" -- \
	run --no-namespace -- true

# the program's own status comes back, and its signal
uroce run -- sh -c 'exit 7' 2>"$work/err"
rc=$?
((rc == 7)) || { echo "FAIL: exit status $rc, want 7"; cat "$work/err"; fails=$((fails + 1)); }

# a uroce run inside one (a script run through it) gets an address of
# its own, the outer program keeps its
got=$(uroce run --addr 127.0.16.20 -- "$UROCE_TOOL" run -- printenv UROCE_ADDR 2>&1)
[[ $got != 127.0.16.20 && $got =~ ^127\. ]] ||
	{ echo "FAIL: a nested uroce run took its outer program's address: '$got'"; fails=$((fails + 1)); }

# an address held for a program that has not bound it yet; killed, its
# program lets it go
"${as[@]}" "$UROCE_TOOL" run --addr "$held" -- sleep 60 &
pid=$!
# it holds the name once it has exec'd sleep
for ((i = 0; i < 200; i++)); do
	[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == */sleep ]] && break
	sleep 0.05
done
[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == */sleep ]] ||
	uroce_die "uroce run -- sleep did not start"
grep -Eq '^[^ ]+ [^ ]+ [^ ]+ [^ ]+ /dev .* - tmpfs uroce ' "/proc/$pid/mountinfo" ||
	{ echo "FAIL: the program has no /dev of its own"; fails=$((fails + 1)); }
[[ -e /proc/$pid/root/sys/class/infiniband/uroce0/ports/1/gids/0 ]] ||
	{ echo "FAIL: the program has no /sys/class/infiniband/uroce0"; fails=$((fails + 1)); }
# refused where the address cannot be shared; shared, a second program
# on the named address joins it (one MPI job's ranks on a host's address)
UROCE_SHARE=0 case_ "address held" 1 "$held: another uroce run holds it" -- \
	run --addr "$held" -- true
uroce run --addr "$held" -- true ||
	{ echo "FAIL: a second uroce run could not share $held"; fails=$((fails + 1)); }
kill -KILL "$pid"
wait "$pid" 2>/dev/null
uroce run --addr "$held" -- true ||
	{ echo "FAIL: $held still held after its program was killed"; fails=$((fails + 1)); }

# programs killed (TERM, KILL) while their device is open: an
# ibv_rc_pingpong server waits for its client on TCP with it open
mapfile -t launch < <(uroce_launch)
for sig in TERM KILL; do
	port=$((19886 + ${#pids[@]}))
	"${launch[@]}" ibv_rc_pingpong -g 0 -p "$port" >"$work/pp" 2>&1 &
	pid=$!
	pids+=("$pid")
	uroce_wait_listen "$pid" "$port" $(( $(date +%s) + 20 )) ||
		{ cat "$work/pp"; uroce_die "ibv_rc_pingpong did not listen on $port"; }
	[[ -e /dev/shm/uroce.$pid ]] ||
		{ echo "FAIL: no stats segment for $pid: the device is not open"; fails=$((fails + 1)); }
	kill "-$sig" "$pid"
	wait "$pid" 2>/dev/null
	rc=$?
	want=$((128 + $(kill -l "$sig")))
	((rc == want)) || { echo "FAIL: SIG$sig gave exit $rc, want $want"; fails=$((fails + 1)); }
done
# a segment of a killed program goes when the next device comes up
uroce run -- true
for pid in "${pids[@]}"; do
	[[ ! -e /dev/shm/uroce.$pid ]] ||
		{ echo "FAIL: /dev/shm/uroce.$pid left behind"; fails=$((fails + 1)); }
done

after=$(host_state)
if [[ $before != "$after" ]]; then
	echo "FAIL: the host changed:"
	diff <(printf '%s\n' "$before") <(printf '%s\n' "$after")
	fails=$((fails + 1))
fi
((fails == 0)) || uroce_die "$fails checks failed"
uroce_say "PASS: bad input fails at once in one line, nothing left behind"
