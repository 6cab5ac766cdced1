#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# DAPL over uroce: Debian's dapl2-utils `dtest` (libdaplofa, DAPL's
# rdma_cm provider), server and client each through `uroce run`, on one
# host.  Each side reads a dat.conf of its own (DAT_OVERRIDE) naming its
# device's address, as a user names an interface's.  The server first
# hands the client its address over a TCP socket (port 15828), then
# listens through rdma_cm; the client connects,
# exchanges its RMR messages, then runs RDMA WRITEs both ways, an RDMA
# READ of the server's buffer (its contents checked), and a message
# ping-pong, and says "DAPL Test Complete. PASSED" on both sides.  Then
# `dapltest`'s transaction tests against one server (below).
#
#   dapl.sh
set -u

name=dapl net=10.81.70
command -v dtest >/dev/null ||
	{ echo "SKIP: dtest is not installed (dapl2-utils)"; exit 77; }
# shellcheck source=tests/apps/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

apps_up
conf() {	# conf FILE ADDR: one provider, "uroce", on the device at ADDR
	echo "uroce u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"$2 0\" \"\"" >"$1"
}
conf "$work/server.conf" 127.0.0.1
conf "$work/client.conf" 127.0.0.2
# -B 20: 20 iterations of each phase (its default, 1000, is minutes of
# 4 MiB transfers on two busy cores)
DAT_OVERRIDE=$work/server.conf \
	urun -t 90 A --addr 127.0.0.1 -- dtest -s -P uroce -B 20 \
	>"$work/server.log" 2>&1 &
spid=$!
pids+=("$spid")
listening() { [ -n "$(in_ns A ss -Hltn 'sport = :15828')" ]; }
wait_for 20 "$spid" listening || fail "dtest's server did not listen on 15828"
(DAT_OVERRIDE=$work/client.conf urun -t 80 A --addr 127.0.0.2 -- \
	dtest -h 127.0.0.1 -P uroce -B 20) >"$work/client.log" 2>&1
pair_end "$spid" $?
for side in client server; do
	grep -q 'DAPL Test Complete. PASSED' "$work/$side.log" ||
		errs+=("the $side did not say PASSED")
done
grep -q 'RCV RDMA read buffer contains: server RDMA read data' \
	"$work/client.log" || errs+=("the client's RDMA READ did not bring the server's data")
grep -E 'PingPong|RDMA write' "$work/client.log"

# dapltest (dapl2-utils): one server serves three transaction tests in a
# row, each 2 threads x 2 endpoints running SENDs, RDMA WRITEs and RDMA
# READs of two segments with its data validation.  Segment sizes are
# multiples of 256: dapltest's buffer pool rounds each segment up to 256
# bytes but advertises them as one range, so other sizes fail its own
# validation on any device.  The server must come through each test's
# teardown able to serve the next (docs/rdmacm.md: its consumer thread
# destroys ids whose events its CM thread is handling).
DAT_OVERRIDE=$work/server.conf \
	urun -t 90 A --addr 127.0.0.1 -- dapltest -T S -D uroce \
	>"$work/dapltest-server.log" 2>&1 &
dspid=$!
pids+=("$dspid")
ready() { grep -q 'Service Point Ready' "$work/dapltest-server.log"; }
wait_for 20 "$dspid" ready || fail "dapltest's server did not start"
for i in 1 2 3; do
	log=$work/dapltest-$i.log
	(DAT_OVERRIDE=$work/client.conf urun -t 60 A --addr 127.0.0.2 -- \
		dapltest -T T -s 127.0.0.1 -D uroce -i 500 -t 2 -w 2 -V \
		client SR 4096 2 server RW 8192 2 client RR 16384 2 \
		server SR 1024 1) >"$log" 2>&1 ||
		errs+=("dapltest transaction test $i: $(uroce_rc_text $?)")
	grep -q 'End of Work' "$log" ||
		errs+=("dapltest transaction test $i did not end its work")
	! grep -q 'Error' "$log" ||
		errs+=("dapltest transaction test $i: $(grep -m1 Error "$log")")
done
alive "$dspid" || errs+=("dapltest's server died")
! grep -q 'Test Error' "$work/dapltest-server.log" ||
	errs+=("dapltest's server: $(grep -m1 'Test Error' "$work/dapltest-server.log")")
kill "$dspid" 2>/dev/null
wait "$dspid"
pids=()
apps_end
