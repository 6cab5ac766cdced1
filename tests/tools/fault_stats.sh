#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Fault injection seen from outside: a uroce_traffic pair (every byte it
# moves is verified) runs with UROCE_FAULT dropping, duplicating and
# reordering packets; while it runs, `uroce stats --json` of the client
# must show retransmissions being counted with what started them, and the
# injected drops; then both sides must finish with their data verified
# ("uroce_traffic: OK ... errors=0"), and the counters they print at exit
# (UROCE_STATS=1) must be at least what we read live and count one cause
# for every retransmission.
#
# What starts a retransmission (engine/req.c, engine/comp.c,
# docs/transport.md "Retransmission"): an ACK timeout that consumes a retry
# (timeout_retries, within timeouts), or a go-back round that a sequence
# NAK or the PSNs started (early_retransmits): a READ or atomic response
# after a gap, or an ACK beyond a READ whose responses were lost (implied
# NAKs, counted neither as timeouts nor as rx_nak_seq; early in a run they
# can be the only retransmissions there are).
#
# The traffic runs for a time (--duration: passes until 3 s are over), not
# a fixed count of passes, so that the live reading below has at least
# that long to see the counters however fast the path moves the data (4
# passes took about 3 s on 2 cores; a quicker path would shrink a count).
#
#   fault_stats.sh --bin UROCE_TRAFFIC --tool UROCE [--timeout S]
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

bin='' tool='' tmo=300
while (($#)); do
	case $1 in
	--bin) bin=$2; shift 2 ;;
	--tool) tool=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	*) uroce_die "fault_stats.sh: unknown option $1" ;;
	esac
done
[[ -x $bin ]] || uroce_die "fault_stats.sh: --bin '$bin' is not executable"
[[ -x $tool ]] || uroce_die "fault_stats.sh: --tool '$tool' is not executable"

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-fault.XXXXXX")
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
	local f
	printf 'FAIL: %s\n' "$*"
	for f in server.out server.err client.out client.err; do
		uroce_print_log "$f" "$work/$f"
	done
	exit 1
}

mapfile -t penv < <(uroce_prog_env)
fault="UROCE_FAULT=drop=0.02,dup=0.02,delay=0.02,seed=11"
start=$(date +%s)
timeout -k 5 "$tmo" env "${penv[@]}" "$fault" UROCE_STATS=1 \
	"$bin" -p 0 --port-file "$work/port" \
	>"$work/server.out" 2>"$work/server.err" &
spid=$!
deadline=$((start + 30))
until [[ -s $work/port ]]; do
	kill -0 "$spid" 2>/dev/null || fail "server exited before listening"
	(($(date +%s) < deadline)) || fail "server did not listen within 30 s"
	sleep 0.05
done
timeout -k 5 "$tmo" env "${penv[@]}" "$fault" UROCE_STATS=1 \
	"$bin" -s 127.0.0.1 -p "$(<"$work/port")" \
	-q 4 -o data -S 0-256K --duration 3 --ack-timeout 12 -r 91 \
	>"$work/client.out" 2>"$work/client.err" &
cpid=$!
for ((i = 0; i < 100; i++)); do
	cp=$(pgrep -P "$cpid" | head -n 1)
	[[ -n $cp ]] && break
	sleep 0.05
done
[[ -n $cp ]] || fail "cannot find the client's pid"

# counters FILE NAME...: those counters of a `uroce stats --json` FILE,
# on one line, in the order named
counters() {
	python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["counters"]
print(*(c[n] for n in sys.argv[2:]))' "$@"
}

# Read the client's counters live until retransmissions show up.
seen=0
while kill -0 "$cp" 2>/dev/null; do
	if [[ -e /dev/shm/uroce.$cp ]] &&
	   "$tool" stats --json "$cp" >"$work/live.json.new" 2>/dev/null; then
		mv "$work/live.json.new" "$work/live.json"
		read -r r d < <(counters "$work/live.json" retransmits fault_drops)
		if ((r > 0 && d > 0)); then
			seen=1
			break
		fi
	fi
	sleep 0.1
done
((seen)) || fail "uroce stats never showed retransmits > 0 and fault_drops > 0 while the client ran (last: $(cat "$work/live.json" 2>/dev/null))"
names=(retransmits fault_drops timeouts timeout_retries rx_nak_seq
       early_retransmits out_of_seq duplicates)
read -ra vals < <(counters "$work/live.json" "${names[@]}")
((${#vals[@]} == ${#names[@]})) ||
	fail "cannot read the counters of $work/live.json"
declare -A live
for i in "${!names[@]}"; do
	live[${names[i]}]=${vals[i]}
	uroce_say "live: client ${names[i]}=${vals[i]}"
done
# the segment counts the cause before the retransmission, and `uroce
# stats` reads retransmits first: a retransmission read has its cause
((live[timeout_retries] + live[early_retransmits] > 0)) ||
	fail "retransmits without a timeout or a go-back round counted"

wait "$cpid"; crc=$?; cpid=
wait "$spid"; src=$?; spid=
((crc == 0)) || fail "client: $(uroce_rc_text $crc)"
((src == 0)) || fail "server: $(uroce_rc_text $src)"
for who in server client; do
	grep -Eq '^uroce_traffic: OK bytes_moved=[0-9]+ bytes_verified=[1-9][0-9]* completions=[0-9]+ errors=0$' \
		"$work/$who.out" || fail "$who: no OK summary with verified data"
done
# the counters at exit, from the same place (the segment), never shrink
declare -A end
for c in "${!live[@]}"; do
	end[$c]=$(sed -n 's/^uroce-stats: //p' "$work/client.err" | tail -n 1 |
		  tr ' ' '\n' | awk -F= -v n="$c" '$1 == n { print $2 }')
	[[ -n ${end[$c]} ]] && ((end[$c] >= live[$c])) ||
		fail "client $c at exit is '${end[$c]}', below the live reading ${live[$c]}"
done
# and every retransmission was counted with exactly one cause
((end[retransmits] == end[timeout_retries] + end[early_retransmits])) ||
	fail "client at exit: retransmits=${end[retransmits]}, not timeout_retries=${end[timeout_retries]} + early_retransmits=${end[early_retransmits]}"
grep -h '^uroce_traffic: OK' "$work/client.out"
uroce_say "PASS: retransmissions counted live under UROCE_FAULT, data verified"
