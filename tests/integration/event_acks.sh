#!/bin/bash
# SPDX-License-Identifier: MIT
#
# event_acks.sh --libdir DIR --port P
#
# In an event-driven RC ping-pong each ACK rides with the reply it
# precedes (docs/datapath.md, "ACKs"): qperf's rc_lat with its defaults
# (it sleeps on a completion channel, polls after each event, keeps one
# receive posted) over UDP (UROCE_LOCAL=0), both ends counting.  Its
# poll after the event often takes the peer's next message itself, and
# that burst's ACK, sent alone, woke the peer for a send completion
# before the reply woke it again: 1.09-1.37 ACKs a SEND.  Holds: each
# device sent at least 1 000 SENDs, and no more than 1.05 ACKs a SEND
# (engine/progress.c uroce_progress_app_rx).
set -u
libdir='' port=19898
while [ $# -gt 0 ]; do
	case $1 in
	--libdir) libdir=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	*) echo "event_acks: unknown option $1"; exit 2 ;;
	esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/uroce_event_acks.XXXXXX") || exit 1
# shellcheck source=tests/lib/uroce_test.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/uroce_test.sh"
export UROCE_LIBDIR=$libdir UROCE_STATS=1 UROCE_LOCAL=0
mapfile -t envv < <(uroce_prog_env)
addr=127.77.98.1
spid=
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() { uroce_fail_logs "$work" "event_acks: $*"; }

env "${envv[@]}" UROCE_ADDR=$addr timeout -k 5 60 qperf -lp "$port" \
	>"$work/server.out" 2>"$work/server.err" &
spid=$!
uroce_wait_listen "$spid" "$port" $(($(date +%s) + 20)) ||
	fail "the qperf server did not listen on $port"
# (the kernel's address for qperf's own connection, the device's for
# rdma_cm; quit ends the server, which prints its counters)
env "${envv[@]}" timeout -k 5 60 qperf -lp "$port" -cm1 -t 2 "$addr" \
	rc_lat quit >"$work/client.out" 2>"$work/client.err" ||
	fail "client: $(uroce_rc_text $?)"
wait "$spid" || fail "server: $(uroce_rc_text $?)"
spid=
grep -q 'latency *= *[0-9.,]* [um]s' "$work/client.out" ||
	fail "qperf: no results"
grep latency "$work/client.out"
for side in client server; do
	acks=$(uroce_stat "$work/$side.err" tx_ack_pkts)
	sends=$(uroce_stat "$work/$side.err" tx_send_pkts)
	if [ -z "$acks" ] || [ -z "$sends" ]; then
		fail "$side: no counters"
	fi
	[ "$sends" -ge 1000 ] || fail "$side: only $sends SENDs"
	[ $((acks * 100)) -le $((sends * 105)) ] ||
		fail "$side: $acks ACKs for $sends SENDs (at most 1.05 a SEND)"
	uroce_say "$side: $acks ACKs for $sends SENDs"
done
uroce_say "PASS: event_acks"
