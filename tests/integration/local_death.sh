#!/bin/bash
# SPDX-License-Identifier: MIT
#
# local_death.sh --bin IB_WRITE_BW --tool UROCE --libdir DIR --port P
#
# A peer on the same-host path (net/local.c) killed mid-transfer: the
# server is SIGKILLed while the client streams RDMA WRITEs to it through
# its ring.  The client must get what a dead peer gives over UDP, a
# transport retry counter exceeded completion (status 12), and exit by
# itself: nothing
# hangs on a ring whose reader is gone.  "Mid-transfer" is observed, not
# slept for: the client's stats segment shows packets through the ring
# before the kill.
set -u
bin= tool= libdir= port=19899
while [ $# -gt 0 ]; do
	case $1 in
	--bin) bin=$2; shift 2 ;;
	--tool) tool=$2; shift 2 ;;
	--libdir) libdir=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	*) echo "local_death: unknown option $1"; exit 2 ;;
	esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/uroce_local_death.XXXXXX") || exit 1
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export UROCE_STATS=1
# a sanitized library: perftest is not instrumented, it preloads the
# runtime (tests/lib/test_env.cmake)
pre=()
if [ -n "${UROCE_PRELOAD:-}" ]; then
	pre=(env "LD_PRELOAD=$UROCE_PRELOAD"
	     "ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}")
fi
spid= cpid=
cleanup() {
	for p in $spid $cpid; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
}
trap cleanup EXIT
fail() {
	echo "local_death: FAIL: $*"
	for f in server.out server.err client.out client.err; do
		[ -e "$work/$f" ] && { echo "---- $f ----"; tail -n 40 "$work/$f"; }
	done
	exit 1
}
stat_of() {	# stat_of PID NAME: a counter from the stats segment
	"$tool" --json stats "$1" 2>/dev/null | tr ',{}' '\n\n\n' |
		sed -n "s/^ *\"$2\": *\([0-9]*\).*/\1/p" | head -n 1
}

# perftest's ib_write_bw, unmodified: it stops at the first failed
# completion and prints its status
"${pre[@]}" "$bin" -F -D 30 -p "$port" >"$work/server.out" 2>"$work/server.err" &
spid=$!
# the server listens on its TCP port: bounded poll (20 s)
for ((i = 0; i < 400; i++)); do
	ss -ltn 2>/dev/null | grep -q ":$port " && break
	kill -0 "$spid" 2>/dev/null || fail "server exited"
	sleep 0.05
done
"${pre[@]}" "$bin" -F -D 30 -p "$port" 127.0.0.1 >"$work/client.out" \
	2>"$work/client.err" &
cpid=$!
server=$spid client=$cpid
seen=0
for ((i = 0; i < 600; i++)); do
	seen=$(stat_of "$client" tx_local_pkts)
	[ -n "$seen" ] && [ "$seen" -gt 2000 ] && break
	kill -0 "$client" 2>/dev/null || fail "client exited before the kill"
	sleep 0.05
done
[ -n "$seen" ] && [ "$seen" -gt 2000 ] ||
	fail "no traffic through the ring before the kill (tx_local_pkts=$seen)"
kill -9 "$server"
wait "$spid" 2>/dev/null
spid=
# the client must finish by itself (bounded: 60 s)
for ((i = 0; i < 1200; i++)); do
	kill -0 "$client" 2>/dev/null || break
	sleep 0.05
done
kill -0 "$client" 2>/dev/null && fail "the client hung after its peer died"
wait "$cpid"
crc=$?
cpid=
grep -Eq "status 12|retry counter exceeded" "$work/client.out" \
	"$work/client.err" ||
	fail "no RETRY_EXC_ERR completion on the client (exit $crc)"
echo "local_death: server killed after $seen packets through the ring;" \
	"client: exit $crc, status 12 (RETRY_EXC_ERR)"
grep -h '^uroce-stats:' "$work/client.err" | tail -n 1 | tr ' ' '\n' |
	grep -E '^(tx_local_pkts|local_connects|timeouts|retransmits)=' |
	tr '\n' ' '
echo
echo "local_death: PASS"
rm -rf "$work"
