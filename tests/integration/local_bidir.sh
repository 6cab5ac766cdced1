#!/bin/bash
# SPDX-License-Identifier: MIT
#
# local_bidir.sh --bin IB_WRITE_BW --libdir DIR --port P
#
# Two RC streams in opposite directions over the same-host path
# (net/local.c): perftest's ib_write_bw -b at IB MTU 1024, the path
# MTU gloo's ibverbs transport sets.  Through a ring the WRITEs go in
# packets of the ring's size all the same (32 KiB: engine/req.c seg_of,
# docs/local.md "Packets of the ring's size"), 2 to a 64 KiB WRITE,
# and the responder takes them.  Each ring carries one side's
# WRITEs and the ACKs of the other side's; an RC window leaves room for
# those ACKs (LR_SPARE, docs/local.md), so almost nothing goes through
# the overflow queue.  With a window of the whole ring, 4 000 to 6 000
# packets of the two sides were queued here, each a copy, and room bells
# woke the senders; now under 100 on a quiet machine, a few hundred on
# a loaded one.
set -u
bin='' libdir='' port=19897
while [ $# -gt 0 ]; do
	case $1 in
	--bin) bin=$2; shift 2 ;;
	--libdir) libdir=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	*) echo "local_bidir: unknown option $1"; exit 2 ;;
	esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/uroce_local_bidir.XXXXXX") || exit 1
# shellcheck source=tests/lib/uroce_test.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/uroce_test.sh"
export UROCE_LIBDIR=$libdir UROCE_STATS=1
unset UROCE_LOCAL
mapfile -t envv < <(uroce_prog_env)
spid=
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; wait 2>/dev/null' EXIT
fail() { uroce_fail_logs "$work" "local_bidir: $*"; }

args=(-F -b -m 1024 -s 65536 -n 2000 -p "$port")
env "${envv[@]}" timeout -k 5 100 "$bin" "${args[@]}" >"$work/server.out" \
	2>"$work/server.err" &
spid=$!
uroce_wait_listen "$spid" "$port" $(($(date +%s) + 20)) ||
	fail "the server did not listen on $port"
env "${envv[@]}" timeout -k 5 100 "$bin" "${args[@]}" 127.0.0.1 \
	>"$work/client.out" 2>"$work/client.err" || fail "client failed"
wait "$spid" || fail "server failed"
spid=
total=0
for side in server client; do
	pkts=$(uroce_stat "$work/$side.err" tx_local_pkts)
	queued=$(uroce_stat "$work/$side.err" local_queued)
	if [ -z "$pkts" ] || [ -z "$queued" ]; then fail "$side: no counters"; fi
	wpkts=$(uroce_stat "$work/$side.err" tx_write_pkts)
	wbytes=$(uroce_stat "$work/$side.err" tx_write_bytes)
	if ! { [ -n "$wpkts" ] && [ "$wpkts" -gt 0 ]; }; then
		fail "$side: no WRITE packets"
	fi
	echo "local_bidir: $side: tx_local_pkts=$pkts local_queued=$queued" \
		"local_room_bells=$(uroce_stat "$work/$side.err" local_room_bells)" \
		"tx_write_pkts=$wpkts tx_write_bytes=$wbytes"
	# 2 000 WRITEs of 64 KiB each way, through the ring, in packets of
	# 32 KiB (UROCE_RING_MTU): 2 a WRITE.  Of 1 KiB, the path MTU's,
	# there would be 64 a WRITE.  The WRITEs started before the first
	# packet connected the ring go in packets of 1 KiB (one, here;
	# docs/local.md "Packets of the ring's size"), so the packets of 32
	# KiB are counted from the bytes: n1 + n32 packets carry 1 KiB n1 +
	# 32 KiB n32 = the 2 000 WRITEs; most WRITEs must go in them.
	[ "$pkts" -gt 4000 ] || fail "$side: $pkts packets through the ring"
	[ "$wbytes" -ge $((2000 * 65536)) ] || fail "$side: $wbytes bytes of WRITEs"
	n32=$(((2000 * 65536 - 1024 * wpkts) / (32768 - 1024)))
	[ "$n32" -ge 3000 ] ||
		fail "$side: $n32 WRITE packets of 32 KiB in $wpkts (want 2 a WRITE)"
	total=$((total + queued))
done
# The bound is about the window, and it needs a peer that keeps up: under
# a sanitizer (UROCE_PRELOAD) the peer runs many times slower, the
# tail-loss probes' 1 ms floor fires against it with nothing lost, and
# their resends fill the ring (CI, TSan: 2 578 queued after 65 probes,
# 2 MB resent, no retransmission).  There the figure is only reported.
if [ -n "${UROCE_PRELOAD:-}" ]; then
	echo "local_bidir: $total packets through the overflow queue" \
		"(a sanitized build: not held to < 1500)"
else
	[ "$total" -lt 1500 ] ||
		fail "$total packets went through the overflow queue (< 1500)"
fi
echo "local_bidir: PASS"
rm -rf "$work"
