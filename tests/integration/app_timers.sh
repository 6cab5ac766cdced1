#!/bin/bash
# SPDX-License-Identifier: MIT
#
# app_timers.sh --bin IB_WRITE_BW --libdir DIR --port P
#
# A paced sender whose program spins on its CQ is paced by its own polls
# (engine/progress.c app_timers, docs/progress.md "The threads"): UC
# WRITEs over UDP (UROCE_LOCAL=0) under the device's UC/UD token bucket
# (UROCE_UNRELIABLE_MBPS=400), perftest's ib_write_bw, which polls its CQ
# while its send queue is full.  Each time the tokens run out the QP
# waits on a pace deadline; the application's poll finds it due and runs
# the timer pass itself, rather than leaving it to the progress thread's
# timerfd.  Holds: the client ran timer passes in its polls
# (timer_app_passes), the data went (tx_write_bytes), and the pacing held
# (the rate perftest reports is not above the bucket's by more than its
# burst allows).
set -u
bin='' libdir='' port=19896
while [ $# -gt 0 ]; do
	case $1 in
	--bin) bin=$2; shift 2 ;;
	--libdir) libdir=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	*) echo "app_timers: unknown option $1"; exit 2 ;;
	esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/uroce_app_timers.XXXXXX") || exit 1
# shellcheck source=tests/lib/uroce_test.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/uroce_test.sh"
export UROCE_LIBDIR=$libdir UROCE_STATS=1 UROCE_LOCAL=0 \
	UROCE_UNRELIABLE_MBPS=400
mapfile -t envv < <(uroce_prog_env)
spid=
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; wait 2>/dev/null' EXIT
fail() { uroce_fail_logs "$work" "app_timers: $*"; }

# 600 WRITEs of 64 KiB: 39 MB, about 0.8 s at 400 Mbit/s
args=(-F -c UC -s 65536 -n 600 --report_gbits -p "$port")
env "${envv[@]}" timeout -k 5 100 "$bin" "${args[@]}" >"$work/server.out" \
	2>"$work/server.err" &
spid=$!
uroce_wait_listen "$spid" "$port" $(($(date +%s) + 20)) ||
	fail "the server did not listen on $port"
env "${envv[@]}" timeout -k 5 100 "$bin" "${args[@]}" 127.0.0.1 \
	>"$work/client.out" 2>"$work/client.err" || fail "client failed"
wait "$spid" || fail "server failed"
spid=
passes=$(uroce_stat "$work/client.err" timer_passes)
app=$(uroce_stat "$work/client.err" timer_app_passes)
wbytes=$(uroce_stat "$work/client.err" tx_write_bytes)
if [ -z "$passes" ] || [ -z "$app" ] || [ -z "$wbytes" ]; then
	fail "no counters"
fi
gbps=$(awk '$1 == 65536 { print $4 }' "$work/client.out" | tail -n 1)
echo "app_timers: client: timer_passes=$passes timer_app_passes=$app" \
	"tx_write_bytes=$wbytes, $gbps Gb/s"
[ "$wbytes" -ge $((600 * 65536)) ] || fail "$wbytes bytes of WRITEs"
[ "$app" -gt 0 ] || fail "no timer pass ran in the application's polls"
[ "$app" -le "$passes" ] || fail "more application passes than passes"
# 400 Mbit/s, and the bucket's burst on top at the start: well under 1
[ -n "$gbps" ] || fail "no bandwidth line from perftest"
awk -v g="$gbps" 'BEGIN { exit !(g < 0.8) }' ||
	fail "$gbps Gb/s: not paced at 400 Mbit/s"
echo "app_timers: PASS"
rm -rf "$work"
