#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Reads the counters of a running ib_write_bw pair from outside with the
# `uroce` tool:
#  - `uroce devices --json` lists both processes with their GIDs and
#    distinct port LIDs;
#  - `uroce stats --json PID` of each, twice while traffic flows: valid
#    JSON, and tx/rx packets and bytes grow between the two readings;
#  - `uroce qps --json PID` shows the connected QP (RTS, its peer's QPN);
#  - the errors a user meets: a PID that does not exist, a process that
#    is not a uroce program, a bad argument;
#  - after both exit, their /dev/shm/uroce.<pid> files are gone.
#
#   stats_live.sh --port TCP_PORT --tool UROCE [--timeout S]
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

port='' tool='' tmo=120
while (($#)); do
	case $1 in
	--port) port=$2; shift 2 ;;
	--tool) tool=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	*) uroce_die "stats_live.sh: unknown option $1" ;;
	esac
done
[[ $port =~ ^[0-9]+$ ]] || uroce_die "stats_live.sh: --port needs a number"
[[ -x $tool ]] || uroce_die "stats_live.sh: --tool '$tool' is not executable"
command -v python3 >/dev/null || uroce_die "python3 is not installed"
uroce_preflight ib_write_bw

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-stats.XXXXXX")
spid='' cpid=''
cleanup() {
	local p
	for p in $cpid $spid; do
		if kill -0 "$p" 2>/dev/null; then
			kill -TERM "$p" 2>/dev/null
			wait "$p" 2>/dev/null
		fi
	done
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	printf 'FAIL: %s\n' "$*"
	uroce_print_log server "$work/server.log"
	uroce_print_log client "$work/client.log"
	exit 1
}

# json FILE EXPR...: print Python expressions over the parsed JSON "j",
# one a line (one python3 start for several values: it is not cheap)
json() {
	python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
for e in sys.argv[2:]:
    print(eval(e))' "$@"
}

mapfile -t penv < <(uroce_prog_env)
# -D: run for a fixed time, so there is traffic to watch
args=(-F -s 4096 -D 10)
start=$(date +%s)
timeout -k 5 "$tmo" env "${penv[@]}" ib_write_bw "${args[@]}" -p "$port" \
	>"$work/server.log" 2>&1 &
spid=$!
uroce_wait_listen "$spid" "$port" $((start + tmo)) ||
	fail "server did not listen on port $port"
timeout -k 5 "$tmo" env "${penv[@]}" ib_write_bw "${args[@]}" -p "$port" \
	127.0.0.1 >"$work/client.log" 2>&1 &
cpid=$!

# The programs' own pids: children of timeout (env execs the program).
child_of() {
	local c i
	for ((i = 0; i < 100; i++)); do
		c=$(pgrep -P "$1" | head -n 1)
		[[ -n $c ]] && { echo "$c"; return 0; }
		sleep 0.05
	done
	return 1
}
sp=$(child_of "$spid") || fail "cannot find the server's pid"
cp=$(child_of "$cpid") || fail "cannot find the client's pid"

# stats PID OUT: `uroce stats --json PID` into OUT; fails the test on error
stats() {
	"$tool" stats --json "$1" >"$2" 2>"$work/tool.err" ||
		fail "uroce stats --json $1 failed: $(cat "$work/tool.err")"
}

# Wait (bounded) until the client's WRITEs reach the server.
deadline=$(($(date +%s) + 30))
while :; do
	kill -0 "$cpid" 2>/dev/null || fail "client exited before traffic was seen"
	if [[ -e /dev/shm/uroce.$sp ]]; then
		stats "$sp" "$work/s0.json"
		(($(json "$work/s0.json" 'j["counters"]["rx_write_pkts"]') > 0)) && break
	fi
	(($(date +%s) < deadline)) || fail "no RDMA WRITE reached the server within 30 s"
	sleep 0.1
done
"$tool" devices --json >"$work/devices.json" ||
	fail "uroce devices --json failed"
got=$(json "$work/devices.json" \
	"[d['gid'].startswith('::ffff:127.') for d in j if d['pid'] in ($sp, $cp)]")
[[ $got == "[True, True]" ]] ||
	fail "uroce devices does not list pids $sp and $cp with GIDs: $(cat "$work/devices.json")"
# each port has a LID of its own, in the unicast range
got=$(json "$work/devices.json" \
	"len({d['lid'] for d in j if d['pid'] in ($sp, $cp) and 0 < d['lid'] <= 0xbfff})")
[[ $got == 2 ]] ||
	fail "uroce devices does not show two distinct unicast LIDs for pids $sp and $cp: $(cat "$work/devices.json")"
out=$("$tool" devices)
grep -Eq "^$sp .* 0x[0-9a-f]{4} " <<<"$out" ||
	fail "uroce devices (text) shows no LID for pid $sp:"$'\n'"$out"

# The client's QP sends (RTS); the server's only receives WRITEs (RTR is
# enough for ib_write_bw's server).  Both connected: a peer QPN.
for p in "$cp" "$sp"; do
	"$tool" qps --json "$p" >"$work/qps.json" ||
		fail "uroce qps --json $p failed"
	want="^True \\[\\('RTS', 'RC'\\)\\]$"
	[[ $p == "$sp" ]] && want="^True \\[\\('RT[RS]', 'RC'\\)\\]$"
	got=$(json "$work/qps.json" 'j["fresh"]' \
		'[(q["state"], q["type"]) for q in j["qps"] if q["dest_qpn"] > 0]' |
	      paste -sd ' ')
	[[ $got =~ $want ]] ||
		fail "uroce qps $p: want a fresh snapshot with one connected QP like /$want/, got '$got': $(cat "$work/qps.json")"
done
# (output captured first: grep -q would SIGPIPE the tool under pipefail)
out=$("$tool" qps "$cp")
grep -Eq '^  0x[0-9a-f]{6} RTS +RC ' <<<"$out" ||
	fail "uroce qps $cp (text) shows no RTS RC QP:"$'\n'"$out"

# two processes of one host: the client's QP sends through a ring
# (net/local.c), unless UROCE_LOCAL=0
"$tool" qps --json "$cp" >"$work/qps.json" || fail "uroce qps --json $cp failed"
want="['local']"
[[ ${UROCE_LOCAL:-1} == 0 ]] && want="['udp']"
got=$(json "$work/qps.json" '[q["path"] for q in j["qps"] if q["dest_qpn"] > 0]')
[[ $got == "$want" ]] ||
	fail "uroce qps $cp: want path $want for the connected QP, got '$got'"
out=$("$tool" qps "$cp")
grep -Eq '^  0x[0-9a-f]{6} RTS +RC .* (local|udp)$' <<<"$out" ||
	fail "uroce qps $cp (text) shows no PATH column:"$'\n'"$out"

# Two readings of each side, half a second apart, while traffic flows.
stats "$sp" "$work/s0.json"
stats "$cp" "$work/c0.json"
sleep 0.5
stats "$sp" "$work/s1.json"
stats "$cp" "$work/c1.json"
kill -0 "$cpid" 2>/dev/null || fail "client finished before the second reading (too short a run)"
grew() {
	python3 -c 'import json, sys
a = json.load(open(sys.argv[1]))["counters"]
b = json.load(open(sys.argv[2]))["counters"]
bad = [c for c in sys.argv[3:] if not b[c] > a[c]]
for c in sys.argv[3:]:
    print("%s %s: %d -> %d" % (sys.argv[1].split("/")[-1][0], c, a[c], b[c]))
sys.exit("did not grow: " + " ".join(bad) if bad else 0)' "$@"
}
grew "$work/s0.json" "$work/s1.json" rx_pkts rx_bytes rx_write_pkts \
	tx_ack_pkts || fail "server counters"
grew "$work/c0.json" "$work/c1.json" tx_pkts tx_bytes tx_write_pkts \
	rx_ack_pkts || fail "client counters"
# and the text form, which the README shows
out=$("$tool" stats "$cp")
grep -Eq '^  tx_write_pkts +[1-9][0-9]*$' <<<"$out" ||
	fail "uroce stats $cp (text) has no tx_write_pkts line:"$'\n'"$out"

# Errors a user meets, each with a clear message and exit status 1 (2 for
# usage).  A pid that is not running: the highest free one below max.
nopid=$(($(cat /proc/sys/kernel/pid_max) - 1))
while kill -0 "$nopid" 2>/dev/null; do nopid=$((nopid - 1)); done
check_err() {
	local want_rc=$1 want_re=$2 out rc
	shift 2
	out=$("$tool" "$@" 2>&1)
	rc=$?
	((rc == want_rc)) && grep -Eq "$want_re" <<<"$out" ||
		fail "uroce $*: exit $rc, '$out'; want exit $want_rc and /$want_re/"
}
check_err 1 "no such process: $nopid" stats "$nopid"
check_err 1 "process $$ \(.*\) is not a uroce program" stats "$$"
check_err 2 "not a process id" stats nonsense
# A segment left by a killed process is ignored and removed.
stale=/dev/shm/uroce.$nopid
head -c 4096 /dev/zero >"$stale" || fail "cannot create $stale"
check_err 1 "no such process: $nopid \(it left a stats segment" stats "$nopid"
[[ ! -e $stale ]] || { rm -f "$stale"; fail "uroce stats left the stale $stale"; }
head -c 4096 /dev/zero >"$stale"
"$tool" devices --json >"$work/devices.json" 2>&1 ||
	fail "uroce devices with a stale segment: $(cat "$work/devices.json")"
grep -q "\"pid\":$nopid," "$work/devices.json" &&
	fail "uroce devices lists the dead pid $nopid"
[[ ! -e $stale ]] || { rm -f "$stale"; fail "uroce devices left the stale $stale"; }
check_err 2 "unknown command" frobnicate
out=$("$tool" --help)
grep -q '^  stats \[PID\]' <<<"$out" || fail "uroce --help does not describe stats"

wait "$cpid"; crc=$?; cpid=
wait "$spid"; src=$?; spid=
((crc == 0)) || fail "client: $(uroce_rc_text $crc)"
((src == 0)) || fail "server: $(uroce_rc_text $src)"
for p in "$sp" "$cp"; do
	[[ ! -e /dev/shm/uroce.$p ]] || fail "/dev/shm/uroce.$p is left behind after exit"
done
uroce_say "PASS: counters of a running ib_write_bw read with uroce stats"
