#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Event-driven programs between two hosts (docs/events.md): perftest -e
# and ibv_rc_pingpong -e, the server in one network namespace and the
# client in another, joined by a veth pair (so over UDP: the same-host
# path stays inside a namespace).  Each must finish within its timeout,
# print no error and print its results.  Then programs that ask for a
# path MTU larger than the link's (active MTU 1024 on this 1500-byte
# veth): ibv_rc_pingpong -m 4096, and qperf, which asks for 2048 whatever
# the port says; the QP sends packets the link carries (verbs/qp.c
# path_packet_mtu), where a larger one would fail with EMSGSIZE.
#
#   events_2ns.sh        (root; UROCE_LIBDIR: our library)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

nsA=uroce-ev2ns-a nsB=uroce-ev2ns-b addrA=10.231.77.1 addrB=10.231.77.2
pids=()
log=''
fail() { uroce_fail_pair "$log" "$@"; }
# shellcheck source=tests/lib/netns.sh
source "$here/../lib/netns.sh"
dir=$(mktemp -d "${TMPDIR:-/tmp}/uroce-ev2ns.XXXXXX")
trap 'netns_cleanup; rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM
netns_up events_2ns

mapfile -t penv < <(uroce_prog_env)
port=19950

# run KIND PROGRAM ARGS...: the server in nsA, the client in nsB
run() {
	local kind=$1 spid
	shift
	port=$((port + 1))
	log=$dir/$1-$port
	ip netns exec "$nsA" env "${penv[@]}" UROCE_ADDR=$addrA \
		timeout -k 5 60 "$@" -p "$port" >"$log.srv" 2>&1 &
	spid=$!
	pids+=("$spid")
	uroce_wait_listen "$spid" "$port" $(($(date +%s) + 20)) "$nsA"
	[[ $? -ne 1 ]] || fail "server exited: $*"
	ip netns exec "$nsB" env "${penv[@]}" UROCE_ADDR=$addrB \
		timeout -k 5 60 "$@" -p "$port" "$addrA" >"$log.cli" 2>&1 ||
		fail "client: $(uroce_rc_text $?): $*"
	wait "$spid" || fail "server: $(uroce_rc_text $?): $*"
	if grep -Eq "$UROCE_FAIL_RE" "$log.srv" "$log.cli"; then
		fail "an error printed: $*"
	fi
	case $kind in
	perftest)
		awk '/#bytes/ { t = 1; next }
		     t && $1 ~ /^[0-9]+$/ && $3 + 0 > 0 { ok = 1 }
		     END { exit !ok }' "$log.cli" || fail "no results: $*" ;;
	pingpong)
		grep -Eq "^[0-9]+ iters in" "$log.cli" || fail "no results: $*" ;;
	esac
	uroce_say "PASS: $*"
	log=''
}

run perftest ib_send_lat -F -e -n 2000
run perftest ib_read_lat -F -e -n 2000
run perftest ib_send_bw -F -e -n 2000
run pingpong ibv_rc_pingpong -g 0 -e -n 500
run pingpong ibv_rc_pingpong -g 0 -m 4096 -s 8192 -n 500

# qperf: its server listens on -lp; rc_bw and rc_lat set path MTU 2048
port=$((port + 1))
log=$dir/qperf-$port
ip netns exec "$nsA" env "${penv[@]}" UROCE_ADDR=$addrA \
	timeout -k 5 60 qperf -lp "$port" >"$log.srv" 2>&1 &
pids+=("$!")
uroce_wait_listen "$!" "$port" $(($(date +%s) + 20)) "$nsA"
ip netns exec "$nsB" env "${penv[@]}" UROCE_ADDR=$addrB \
	timeout -k 5 60 qperf -lp "$port" -t 1 "$addrA" rc_bw rc_lat \
	quit >"$log.cli" 2>&1 || fail "qperf: $(uroce_rc_text $?)"
# (qperf groups thousands with commas: "bw = 1,000 MB/sec")
grep -q 'bw *= *[0-9.,]* [KMG]B/sec' "$log.cli" &&
	grep -q 'latency *= *[0-9.,]* [um]s' "$log.cli" ||
	fail "qperf: no results"
uroce_say "PASS: qperf rc_bw rc_lat (path MTU 2048)"
log=''
