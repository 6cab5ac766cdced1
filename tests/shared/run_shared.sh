#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The shared device (docs/shared.md): two network
# namespaces joined by a veth pair act as two hosts with one address each,
# and several processes use each address at the same time.
#
#   run_shared.sh --scenario S --libdir DIR --tool PATH
#                 [--traffic PATH] [--mpi PATH] [--timeout SEC]
#
# Scenarios:
#   perftest     four ib_write_bw servers on A's address (-p distinct) and
#                four clients on B's address at once, each completes; the
#                servers' QPNs are distinct and `uroce devices` lists the
#                four processes on one address
#   perftest-cm  the same with -R (rdma_cm: REQs steered by service ID)
#   kill         four uroce_traffic servers on A, four clients on B; one
#                server is killed with SIGKILL mid-transfer: the other
#                three pairs finish with every byte verified, the victim's
#                client gets an error completion
#   mpi-ofi      six Open MPI ranks on A's address, all-to-all, every byte
#                checked, through libfabric (--mca mtl ofi, verbs;ofi_rxm)
#   mpi-ucx-2ns  three Open MPI ranks on each namespace's one address (six
#                in all, launched into the namespaces by ns_agent.sh as
#                ssh would), all-to-all, every byte checked, through UCX
#                with only its verbs transports (UCX_TLS=rc_verbs,ud_verbs)
#   mpi-ucx-2ns-lossy  the same with 1 % of the datagrams dropped
#                (UROCE_FAULT): RC retransmissions interleave the peers'
#                messages on each rank's shared receive queue
#   mpi-ofi-2ns  the same through libfabric (--mca pml cm --mca mtl ofi,
#                FI_PROVIDER=verbs;ofi_rxm)
#   fi-pingpong-2ns  fi_pingpong (verbs;ofi_rxm, RDM) server on A, client
#                on B: the server is given no address (libfabric binds
#                "localhost" to find one)
#   cm-same-host  rping clients and server on one address, none its
#                first member: no MAD is forwarded, one ring a client
#   registry-gc  the registry of an address whose last member was
#                SIGKILLed is removed by the next process that starts a
#                group (on another address) and by `uroce devices`, and
#                one with a live member is not; root's dead registry does
#                not keep another user (nobody) off the address
#   ring-after-kill  a UC ping-pong server on A, stopped (SIGSTOP) while
#                two other members of A are SIGKILLed and a same-host
#                sender (ring_peer) connects to its ring name between the
#                two kills; resumed, it wakes to the first death, the
#                connection and the second death at once.  It must keep
#                the sender's ring and read what the sender publishes
#                (docs/local.md, "Peer death and a closing sender"); then
#                a real UC pair (ibv_uc_pingpong, one host, the ring path)
#                to that server must complete
#   rdmacm       rping servers on three ports and ucmatose servers on two
#                ports of A's address, their clients on B's, at once (the
#                rping servers reach the address by rdma_bind_addr); a
#                connect to a port nobody on A listens on is rejected
#
# Namespaces uroce-s-S-{a,b} (10.79.0.1/24, 10.79.0.2/24; the -2ns
# scenarios a /24 each of their own, 10.79.14-18.0), deleted on exit.
# Needs root; exits 77 (skip) if namespaces cannot be made.

set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/netns.sh
source "$here/../lib/netns.sh"
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

scenario= libdir= tool= traffic= mpi= peer= tmo=120

die() {
	echo "run_shared: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--scenario) scenario=$2; shift 2 ;;
	--libdir) libdir=$2; shift 2 ;;
	--tool) tool=$2; shift 2 ;;
	--traffic) traffic=$2; shift 2 ;;
	--mpi) mpi=$2; shift 2 ;;
	--ring-peer) peer=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	*) die "unknown option $1" ;;
	esac
done
[ -n "$scenario" ] || die "--scenario is required"
[ -x "$tool" ] || die "--tool: '$tool' is not executable"

name=$scenario
nsA=uroce-s-$name-a
nsB=uroce-s-$name-b
case $scenario in
mpi-ucx-2ns) net=10.79.14 ;;
mpi-ucx-2ns-lossy) net=10.79.17 ;;
registry-gc) net=10.79.18 ;;
ring-after-kill) net=10.79.19 ;;
cm-burst) net=10.79.20 ;;
cm-same-host) net=10.79.21 ;;
mpi-ofi-2ns) net=10.79.15 ;;
fi-pingpong-2ns) net=10.79.16 ;;
*) net=10.79.0 ;;
esac
addrA=$net.1
addrB=$net.2
work=$(mktemp -d "${TMPDIR:-/tmp}/uroce_shared_${name}.XXXXXX") ||
	die "mktemp failed"
pids=()

trap netns_cleanup EXIT
trap 'exit 130' INT TERM

fail() {
	local f
	echo "run_shared[$name]: FAIL: $*"
	for f in "$work"/*; do
		[ -f "$f" ] || continue
		echo "---- $(basename "$f") ----"
		tail -n 30 "$f"
	done
	echo "---- logs kept in $work ----"
	exit 1
}

netns_up "run_shared[$name]"

lib_env=(LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	 UROCE_STATS=1)
# a sanitized library: its runtime first in the uninstrumented programs,
# and no leak check of those (their leaks are not ours: tests/lib)
[ -n "${UROCE_PRELOAD:-}" ] && lib_env+=(LD_PRELOAD="$UROCE_PRELOAD"
	ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}")

# on A (servers) and B (clients, under timeout); only ever started with
# &: the exec makes $! the pid of the program (on A) or of timeout (on B)
on_A() { exec ip netns exec "$nsA" env "${lib_env[@]}" UROCE_ADDR=$addrA "$@"; }
on_B() { exec ip netns exec "$nsB" env "${lib_env[@]}" UROCE_ADDR=$addrB \
	 timeout -k 5 "$tmo" "$@"; }

# wait_until SECONDS PID CMD...: bounded poll until CMD succeeds
wait_until() {
	local n=$(($1 * 20)) pid=$2 i
	shift 2
	for ((i = 0; i < n; i++)); do
		"$@" && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

tcp_listening() { ip netns exec "$nsA" ss -ltnH "sport = :$1" | grep -q .; }
cm_listening() { grep -qx "listen $1" "$work/cm_listen.$1" 2>/dev/null; }

# members ADDR: how many processes `uroce devices` shows on ADDR, shared
# (`uroce devices` lists every process on the host: those of another
# checkout's run of this scenario, in its own namespaces, are left out)
members() {
	local ns pid n=0
	ns=$(on_A readlink /proc/self/ns/net)
	for pid in $("$tool" devices | awk -v a="$1" '$4 == a && /shared/ { print $1 }'); do
		[ "$(readlink "/proc/$pid/ns/net" 2>/dev/null)" = "$ns" ] && n=$((n + 1))
	done
	echo $n
}

errs=()
status_of() {	# status_of PID: wait for our child, its exit status
	wait "$1"
}

start_servers() {	# start_servers PROG ARGS...: one per port in $ports
	local p
	spids=()
	for p in $ports; do
		on_A env UROCE_CM_LISTEN_FILE="$work/cm_listen.$p" \
			timeout -k 5 "$tmo" "$@" -p "$p" \
			>"$work/server.$p.out" 2>&1 &
		spids+=($!)
		pids+=($!)
	done
}

perftest() {	# perftest [-R]
	local p i pid rc qpns
	ports="18601 18602 18603 18604"
	start_servers ib_write_bw "$@"
	i=0
	for p in $ports; do
		if [ "${1:-}" = -R ]; then
			wait_until 30 "${spids[$i]}" cm_listening "$p"
		else
			wait_until 30 "${spids[$i]}" tcp_listening "$p"
		fi || fail "server on port $p did not start"
		i=$((i + 1))
	done
	[ "$(members $addrA)" -eq 4 ] ||
		errs+=("uroce devices shows $(members $addrA) shared processes on $addrA, not 4")
	cpids=()
	for p in $ports; do
		on_B ib_write_bw "$@" -p "$p" $addrA >"$work/client.$p.out" 2>&1 &
		cpids+=($!)
		pids+=($!)
	done
	i=0
	for p in $ports; do
		status_of "${cpids[$i]}"
		rc=$?
		[ $rc -eq 0 ] || errs+=("client on port $p exit status $rc")
		grep -Eq '^ *65536 +[0-9]+ ' "$work/client.$p.out" ||
			errs+=("client on port $p printed no result")
		status_of "${spids[$i]}"
		rc=$?
		[ $rc -eq 0 ] || errs+=("server on port $p exit status $rc")
		i=$((i + 1))
	done
	# steered by the reuseport program, not forwarded: every member on
	# A's side gets its packets with one 4-tuple (B:4791 -> A:4791), so
	# the kernel's hash alone would hand them all to one member
	local fwd=0 rx=0 f v
	for f in "$work"/server.*.out "$work"/client.*.out; do
		v=$(grep -o ' share_fwd_out=[0-9]*' "$f" | tail -n 1 | cut -d= -f2)
		fwd=$((fwd + ${v:-0}))
		v=$(grep -o 'uroce-stats: tx_pkts=[0-9]* tx_bytes=[0-9]* rx_pkts=[0-9]*' "$f" |
		    tail -n 1 | sed 's/.*rx_pkts=//')
		rx=$((rx + ${v:-0}))
	done
	[ "$rx" -gt 10000 ] || errs+=("the devices received only $rx packets")
	[ $((fwd * 100)) -lt "$rx" ] ||
		errs+=("$fwd of $rx packets were forwarded between members")
	echo "run_shared[$name]: $rx packets received, $fwd forwarded"
	# one QP-number space: no two servers on the address share a QPN
	qpns=$(cat "$work"/server.*.out | sed -n 's/.*local address:.*QPN \(0x[0-9a-f]*\).*/\1/p')
	[ "$(echo "$qpns" | wc -l)" -ge 4 ] || errs+=("found $(echo "$qpns" | wc -l) server QPNs")
	[ "$(echo "$qpns" | sort | uniq -d | wc -l)" -eq 0 ] ||
		errs+=("servers on one address share a QPN: $qpns")
}

traffic_ok() {	# traffic_ok FILE: an OK summary with errors=0
	grep -Eq '^uroce_traffic: OK bytes_moved=[0-9]+ bytes_verified=[0-9]+ completions=[0-9]+ errors=0$' "$1"
}

rx_bytes() {	# rx_bytes PID: the device's rx_bytes counter
	"$tool" --json stats "$1" 2>/dev/null |
		grep -o '"rx_bytes": *[0-9]*' | head -n 1 | grep -o '[0-9]*$'
}
busy() { local b; b=$(rx_bytes "$1"); [ "${b:-0}" -gt $((8 << 20)) ]; }

# reg_members FILE: nmembers of a registry (include/uroce_shm.h: after
# magic, version, size, addr[48], nonce, epoch)
reg_members() { od -An -t u4 -j 76 -N 4 "$1" 2>/dev/null | tr -d ' '; }
reg_members_are() { [ "$(reg_members "$2")" = "$1" ]; }

kill_one() {
	local i rc victim=1 port reg t0
	[ -x "$traffic" ] || die "--traffic: '$traffic' is not executable"
	spids=() cpids=()
	for i in 0 1 2 3; do
		on_A "$traffic" -p 0 --port-file "$work/port.$i" \
			>"$work/server.$i.out" 2>&1 &
		spids+=($!)
		pids+=($!)
	done
	for i in 0 1 2 3; do
		wait_until 30 "${spids[$i]}" test -s "$work/port.$i" ||
			fail "server $i did not start"
	done
	[ "$(members $addrA)" -eq 4 ] ||
		errs+=("uroce devices shows $(members $addrA) shared processes on $addrA, not 4")
	for i in 0 1 2 3; do
		port=$(<"$work/port.$i")
		on_B "$traffic" -s $addrA -p "$port" -q 4 -o write,read,send \
			-S 1M-8M -n 3 -m 1024 -r $((i + 1)) -t 30 \
			>"$work/client.$i.out" 2>&1 &
		cpids+=($!)
		pids+=($!)
	done
	# mid-transfer: once the victim has taken in 8 MiB
	wait_until 60 "${spids[$victim]}" busy "${spids[$victim]}" ||
		fail "server $victim never got busy"
	reg=/dev/shm/uroce-addr.$(ip netns exec "$nsA" stat -L -c %i /proc/self/ns/net).$addrA.$(id -u)
	t0=$(date +%s%N)
	kill -KILL "${spids[$victim]}"
	# the survivors repair the group: the registry counts 3 members once
	# one of them took the victim out and reattached the program
	# (docs/shared.md, "The wrong member forwards": the bound on the traffic
	# that reaches a dead member's socket or the wrong member)
	wait_until 5 "${spids[0]}" reg_members_are 3 "$reg" ||
		errs+=("the registry still counts $(reg_members "$reg") members 5 s after the SIGKILL")
	echo "run_shared[$name]: group repaired $((($(date +%s%N) - t0) / 1000000)) ms after the SIGKILL"
	for i in 0 1 2 3; do
		status_of "${cpids[$i]}"
		rc=$?
		if [ $i -eq $victim ]; then
			[ $rc -ne 0 ] || errs+=("the killed server's client exited 0")
			continue
		fi
		[ $rc -eq 0 ] || errs+=("client $i exit status $rc")
		traffic_ok "$work/client.$i.out" || errs+=("no OK summary from client $i")
		status_of "${spids[$i]}"
		rc=$?
		[ $rc -eq 0 ] || errs+=("server $i exit status $rc")
		traffic_ok "$work/server.$i.out" || errs+=("no OK summary from server $i")
	done
}

rdmacm() {
	local p i rc
	cpids=() spids=()
	# the rping servers are not told the address: their rdma_bind_addr
	# moves each device there (the first makes the group, the others join)
	for p in 7171 7172 7173; do
		on_A env -u UROCE_ADDR UROCE_CM_LISTEN_FILE="$work/cm_listen.$p" \
			timeout -k 5 "$tmo" rping -s -a $addrA -p $p -C 20 -v \
			>"$work/rping_s.$p" 2>&1 &
		spids+=($!)
		pids+=($!)
	done
	for p in 7181 7182; do
		on_A env UROCE_CM_LISTEN_FILE="$work/cm_listen.$p" \
			timeout -k 5 "$tmo" ucmatose -b $addrA -p $p -c 2 -C 20 \
			>"$work/ucma_s.$p" 2>&1 &
		spids+=($!)
		pids+=($!)
	done
	i=0
	for p in 7171 7172 7173 7181 7182; do
		wait_until 30 "${spids[$i]}" cm_listening $p ||
			fail "CM server on port $p did not listen"
		i=$((i + 1))
	done
	[ "$(members $addrA)" -eq 5 ] ||
		errs+=("uroce devices shows $(members $addrA) shared processes on $addrA, not 5")
	# a port nobody on the address listens on: REJ, as from one process
	on_B rping -c -a $addrA -p 7199 -C 1 -v >"$work/rping_c.7199" 2>&1 &
	status_of $! && errs+=("rping to a port nobody listens on exited 0")
	grep -q REJECTED "$work/rping_c.7199" ||
		errs+=("rping to a port nobody listens on was not rejected")
	for p in 7171 7172 7173; do
		on_B rping -c -a $addrA -p $p -C 20 -v >"$work/rping_c.$p" 2>&1 &
		cpids+=($!)
		pids+=($!)
	done
	for p in 7181 7182; do
		on_B ucmatose -s $addrA -p $p -c 2 -C 20 >"$work/ucma_c.$p" 2>&1 &
		cpids+=($!)
		pids+=($!)
	done
	for i in 0 1 2 3 4; do
		status_of "${cpids[$i]}"
		rc=$?
		[ $rc -eq 0 ] || errs+=("client $i exit status $rc")
		status_of "${spids[$i]}"
		rc=$?
		[ $rc -eq 0 ] || errs+=("server $i exit status $rc")
	done
	for p in 7171 7172 7173; do
		[ "$(grep -c '^ping data' "$work/rping_c.$p")" -eq 20 ] ||
			errs+=("rping on port $p: not 20 pings")
	done
}

# six Open MPI ranks on A's one address, all-to-all through libfabric
# (verbs;ofi_rxm under the ofi MTL: Open MPI binds every rank's endpoint to
# the interface's address); no shared-memory or TCP transport is allowed
mpi_ofi() {
	local rc n root=()
	command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed"; exit 77; }
	[ -x "$mpi" ] || { echo "SKIP: no MPI program (libopenmpi-dev)"; exit 77; }
	# (as tests/mpi: Open MPI's plugins under a preloaded sanitizer
	# runtime are not ours to debug)
	[ -z "${UROCE_PRELOAD:-}" ] || { echo "SKIP: MPI under a sanitizer runtime"; exit 77; }
	[ "$(id -u)" -ne 0 ] || root=(--allow-run-as-root)
	ip netns exec "$nsA" timeout -k 5 "$tmo" mpirun "${root[@]}" \
		--oversubscribe --host $addrA:6 -np 6 \
		--mca oob_tcp_if_include lo --mca pml cm --mca mtl ofi \
		--mca btl self -x FI_PROVIDER="verbs;ofi_rxm" \
		-x LD_LIBRARY_PATH="$libdir" -x UROCE_IFNAME=vA -x UROCE_STATS=1 \
		"$mpi" 65536 10 >"$work/mpirun.out" 2>&1
	rc=$?
	[ $rc -eq 0 ] || errs+=("mpirun exit status $rc")
	n=$(grep -Ec '^rank [0-5] of 6: 50 exchanges of 65536 bytes, 0 bad$' "$work/mpirun.out")
	[ "$n" -eq 6 ] || errs+=("$n of 6 ranks report 50 good exchanges")
	n=$(grep -Eo 'rx_send_bytes=[0-9]+' "$work/mpirun.out" |
	    awk -F= '$2 >= 50 * 65536 { n++ } END { print n + 0 }')
	[ "$n" -eq 6 ] || errs+=("$n of 6 devices received 50 x 64 KiB")
}

# rx_bytes of each device at exit (UROCE_STATS=1), one a line
stats_rx_bytes() {
	grep -o 'uroce-stats: tx_pkts=[0-9]* tx_bytes=[0-9]* rx_pkts=[0-9]* rx_bytes=[0-9]*' "$1" |
		sed 's/.*rx_bytes=//'
}

# six Open MPI ranks, three on each namespace's one address, all-to-all
# through PML (ucx or ofi), no shared-memory or TCP transport between
# ranks: UCX only over rc_verbs and ud_verbs, the ofi MTL only over
# verbs;ofi_rxm (mpirun's own runtime talks TCP over the veth, as it does
# over a cluster's Ethernet).  mpirun runs in A and starts B's ranks
# through ns_agent.sh as it would through ssh; every rank through `uroce
# run`, as tests/mpi does.
mpi_2ns() {	# mpi_2ns ucx|ofi [UROCE_FAULT]
	local rc n root=() pml=() fault=()
	command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed"; exit 77; }
	[ -x "$mpi" ] || { echo "SKIP: no MPI program (libopenmpi-dev)"; exit 77; }
	[ -z "${UROCE_PRELOAD:-}" ] || { echo "SKIP: MPI under a sanitizer runtime"; exit 77; }
	[ "$(id -u)" -ne 0 ] || root=(--allow-run-as-root)
	case $1 in
	ucx) pml=(--mca pml ucx -x UCX_TLS=rc_verbs,ud_verbs
		  -x UCX_NET_DEVICES=uroce0:1) ;;
	ofi) pml=(--mca pml cm --mca mtl ofi -x FI_PROVIDER="verbs;ofi_rxm") ;;
	esac
	[ -z "${2:-}" ] || fault=(-x UROCE_FAULT="$2")
	# Under loss UCX polls every interface (UCX_ADAPTIVE_PROGRESS=n).
	# With its adaptive progress (the default, UCX 1.13.1 and master) a
	# process whose own connections are all set up stops polling its
	# ud_verbs interface, and that stops the UD timer, the only thing
	# that resends: a dropped CREP (the answer to a peer's connection
	# request, whose request was acked) is then never sent again, and
	# the peer waits for it for ever (1 run in ~40 under load, always
	# one rank with an RC QP left in INIT; captures and stacks in
	# docs/testing.md, "UCX under loss").  A RoCE NIC dropping that
	# packet hangs UCX the same way.
	[ -z "${2:-}" ] || [ "$1" != ucx ] ||
		fault+=(-x UCX_ADAPTIVE_PROGRESS=n)
	ip netns exec "$nsA" env UROCE_IFNAME=vA \
		NS_AGENT_HOSTS="$addrA=$nsA:vA $addrB=$nsB:vB" \
		timeout -k 5 "$tmo" mpirun "${root[@]}" --oversubscribe \
		--host "$addrA:3,$addrB:3" -np 6 \
		--mca plm_rsh_agent "$here/ns_agent.sh" \
		--mca oob_tcp_if_include "$net.0/24" --mca btl self \
		"${pml[@]}" "${fault[@]}" -x UROCE_STATS=1 \
		"$tool" run -- "$mpi" 65536 10 >"$work/mpirun.out" 2>&1
	rc=$?
	[ $rc -eq 0 ] || errs+=("mpirun exit status $rc")
	n=$(grep -Ec '^rank [0-5] of 6: 50 exchanges of 65536 bytes, 0 bad$' "$work/mpirun.out")
	[ "$n" -eq 6 ] || errs+=("$n of 6 ranks report 50 good exchanges")
	# the data went through the six devices: each took in at least
	# its 50 messages of 64 KiB
	n=$(stats_rx_bytes "$work/mpirun.out" |
	    awk '$1 >= 50 * 65536 { n++ } END { print n + 0 }')
	[ "$n" -eq 6 ] || errs+=("$n of 6 devices received 50 x 64 KiB")
}

# fi_pingpong between the namespaces through verbs;ofi_rxm, each side on
# its one address; the server is given none (its libfabric binds
# "localhost" to learn one, and must not announce 127.0.0.1)
fi_pingpong_2ns() {
	local rc
	command -v fi_pingpong >/dev/null || { echo "SKIP: fi_pingpong not installed"; exit 77; }
	on_A timeout -k 5 "$tmo" fi_pingpong -p "verbs;ofi_rxm" -e rdm -I 20 \
		>"$work/server.out" 2>&1 &
	spids=($!)
	pids+=($!)
	wait_until 30 "${spids[0]}" tcp_listening 47592 ||
		fail "fi_pingpong server did not start"
	on_B fi_pingpong -p "verbs;ofi_rxm" -e rdm -I 20 $addrA \
		>"$work/client.out" 2>&1 &
	pids+=($!)
	status_of $!
	rc=$?
	[ $rc -eq 0 ] || errs+=("client exit status $rc")
	status_of "${spids[0]}"
	rc=$?
	[ $rc -eq 0 ] || errs+=("server exit status $rc")
	grep -Eq '^1m +20 +=20 ' "$work/client.out" ||
		errs+=("the client printed no 1 MiB result")
}

# registry_gc: a member that dies by SIGKILL leaves its address's
# registry behind; the next group's first member and `uroce devices`
# take it away, never one with a live member
registry_gc() {
	local ino reg3 regA pid live
	[ -x "$traffic" ] || die "--traffic: '$traffic' is not executable"
	ip -n "$nsA" addr add "$net.3/24" dev vA || fail "cannot add $net.3"
	ino=$(ip netns exec "$nsA" stat -L -c %i /proc/self/ns/net)
	regA=/dev/shm/uroce-addr.$ino.$addrA.$(id -u)
	reg3=/dev/shm/uroce-addr.$ino.$net.3.$(id -u)
	# start_member FILE ADDR: a uroce_traffic server on ADDR, its pid in
	# $pid once it is a member (it has written its port)
	start_member() {
		rm -f "$work/$1"
		ip netns exec "$nsA" env "${lib_env[@]}" UROCE_ADDR="$2" \
			"$traffic" -p 0 --port-file "$work/$1" \
			>"$work/$1.out" 2>&1 &
		pid=$!
		pids+=($pid)
		wait_until 30 $pid test -s "$work/$1" || fail "server on $2 did not start"
	}
	kill_member() { kill -KILL "$1"; wait "$1" 2>/dev/null; }

	# 1. the next group's first member collects it
	start_member a1 "$addrA"
	[ -e "$regA" ] || fail "no registry $regA while a member runs"
	kill_member $pid
	[ -e "$regA" ] || fail "the registry went with a SIGKILLed member (the test needs it to stay)"
	start_member b1 "$net.3"
	live=$pid
	[ -e "$regA" ] && errs+=("a new group's first member left the dead registry $regA")
	[ -e "$reg3" ] || errs+=("the live registry $reg3 is gone")
	# 2. uroce devices collects it, and keeps the live one
	start_member a2 "$addrA"
	kill_member $pid
	[ -e "$regA" ] || fail "the registry went with a SIGKILLed member (2)"
	"$tool" devices >/dev/null
	[ -e "$regA" ] && errs+=("uroce devices left the dead registry $regA")
	[ -e "$reg3" ] || errs+=("uroce devices removed $reg3, whose member runs")
	# 3. the live member's group still takes members
	start_member b2 "$net.3"
	[ "$(members "$net.3")" -eq 2 ] ||
		errs+=("$(members "$net.3") processes share $net.3, not 2")
	kill_member $pid
	kill_member $live
	# 4. a root member SIGKILLed does not lock another user out of its
	# address: that user's explicit UROCE_ADDR works (its rdma_bind_addr
	# got EACCES from root's registry, mode 0600 in sticky /dev/shm)
	foreign_user
}

# run as nobody: the library and the program from a copy every user may
# read (the build tree may be closed to others: a CI clone under /root)
foreign_user() {
	local pub=$work/pub nob regN
	[ "$(id -u)" -eq 0 ] || return 0
	regN=${regA%.*}.$(id -u nobody)
	mapfile -t nob < <(UROCE_TEST_USER=nobody uroce_as_test_user)
	start_member a3 "$addrA"
	kill_member $pid
	[ -e "$regA" ] || fail "the registry went with a SIGKILLed member (3)"
	chmod 755 "$work" && mkdir -m 755 "$pub" &&
		cp -L "$libdir"/lib*.so.1 "$traffic" "$pub/" && chmod -R a+rX "$pub" &&
		install -d -o nobody "$pub/out" ||
		fail "cannot copy the library for nobody"
	ip netns exec "$nsA" "${nob[@]}" env LD_LIBRARY_PATH="$pub" \
		UROCE_ADDR="$addrA" "$pub/${traffic##*/}" -p 0 \
		--port-file "$pub/out/port" >"$pub/nobody.out" 2>&1 &
	pid=$!
	pids+=($pid)
	if wait_until 30 $pid test -s "$pub/out/port"; then
		[ -e "$regN" ] ||
			errs+=("no registry $regN for nobody's member")
	else
		errs+=("as nobody, a server on $addrA did not start after root's SIGKILLed member: $(tail -n 3 "$pub/nobody.out" | tr '\n' ' ')")
	fi
	kill_member $pid
	rm -f "$regA" "$regN"
}

# ring_after_kill: a shared address's member must never drop the ring of a
# live same-host sender.  Members watch each other through pidfds; when a
# death closes pidfds, an event of the same wake-up for one of them may
# name, by then, the connection of a ring accepted in between (the lowest
# free descriptor).  Taken as that ring's close, it dropped a live ring,
# and the UC SEND its sender had just put there was lost: a ping-pong
# that never ended (docs/scale.md, the soak's table).  The server is
# stopped so that the three events reach it in one wake-up, in that order.
ring_after_kill() {
	local i t z y port=18701 slot peer_out rc line me=$net.3
	[ -x "$traffic" ] || die "--traffic: '$traffic' is not executable"
	[ -x "$peer" ] || die "--ring-peer: '$peer' is not executable"
	ip -n "$nsA" addr add "$me/24" dev vA || fail "cannot add $me"
	# Y then Z, then the server: its pidfd for Y is the lower descriptor
	for i in y z; do
		on_A "$traffic" -p 0 --port-file "$work/port.$i" \
			>"$work/member.$i.out" 2>&1 &
		pids+=($!)
		eval "$i=\$!"
		wait_until 30 $! test -s "$work/port.$i" || fail "member $i did not start"
	done
	on_A timeout -k 5 "$tmo" ibv_uc_pingpong -g 0 -e -s 4096 -n 20 -p $port \
		>"$work/server.out" 2>&1 &
	t=$!
	pids+=($t)
	wait_until 30 $t tcp_listening $port || fail "UC server did not start"
	t=$(pgrep -P "$t" -x ibv_uc_pingpong || echo "$t")
	slot=$("$tool" devices | awk -v p="$t" '$1 == p' |
	       sed -n 's/.*shared(slot \([0-9]*\),.*/\1/p')
	[ -n "$slot" ] || fail "no slot for the UC server (pid $t)"
	kill -STOP "$t"
	kill -KILL "$z"
	wait "$z" 2>/dev/null
	exec {peer_out}< <(ip netns exec "$nsA" "$peer" \
		"uroce/local/$(id -u)/$addrA/$slot" "$me" "$t" \
		$((slot << 16 | 0xffff)) 2>&1; echo "exit $?")
	read -r -t 30 line <&"$peer_out" && [ "$line" = hello ] ||
		{ kill -CONT "$t"; fail "ring_peer: $line"; }
	kill -KILL "$y"
	wait "$y" 2>/dev/null
	kill -CONT "$t"
	rc=
	while read -r -t 60 line <&"$peer_out"; do
		echo "ring_peer: $line"
		case $line in "exit "*) rc=${line#exit } ;; esac
	done
	exec {peer_out}<&-
	[ "$rc" = 0 ] || errs+=("the UC server did not read the ring of a live sender (ring_peer exit ${rc:-none})")
	# a new UC pair to the server, over the ring
	ip netns exec "$nsA" env "${lib_env[@]}" UROCE_ADDR=$me timeout -k 5 30 \
		ibv_uc_pingpong -g 0 -e -s 4096 -n 20 -p $port $addrA \
		>"$work/client.out" 2>&1
	rc=$?
	[ $rc -eq 0 ] || errs+=("UC client exit status $rc")
	grep -Eq 'iters in' "$work/client.out" || errs+=("the UC client printed no result")
	grep -Eq ' tx_local_pkts=[1-9]' "$work/client.out" ||
		errs+=("the UC client sent nothing through a ring")
}

# counter PID NAME: a live process's uroce counter NAME
counter() {
	"$tool" --json stats "$1" 2>/dev/null |
		grep -o "\"$2\": *[0-9]*" | head -n 1 | grep -o '[0-9]*$'
}

# Six cmtime servers on A's one address, each connected 100 times at once
# by a cmtime client on an address of its own on the same host.  Their
# CM MADs reach the address's first member through its same-host ring
# (QP1 goes to slot 0: docs/local.md), which forwards the MADs of the
# other five: bursts of 100 REQs, more than an owner's forwarding queue
# takes (net.unix.max_dgram_qlen, 10).  What does not fit must wait for
# room, not be dropped (share_fwd_lost, drop_no_owner).
cm_burst() {
	local k rc fwd=0 lost=0 held=0 v retrans=0
	spids=() cpids=()
	for k in 1 2 3 4 5 6; do
		on_A env UROCE_CM_LISTEN_FILE="$work/cm_listen.$((7300 + k))" \
			cmtime -b $addrA -p $((7300 + k)) -c 100 \
			>"$work/server.$k.out" 2>&1 &
		spids+=($!)
		pids+=($!)
		ip -n "$nsA" addr add "$net.$((10 + k))/24" dev vA ||
			fail "cannot add $net.$((10 + k))"
	done
	for k in 1 2 3 4 5 6; do
		wait_until 30 "${spids[$((k - 1))]}" cm_listening $((7300 + k)) ||
			fail "cmtime server $k did not listen"
	done
	for k in 1 2 3 4 5 6; do
		on_A env UROCE_ADDR=$net.$((10 + k)) timeout -k 5 "$tmo" \
			cmtime -s $addrA -b $net.$((10 + k)) -p $((7300 + k)) \
			-c 100 >"$work/client.$k.out" 2>&1 &
		cpids+=($!)
		pids+=($!)
	done
	for k in 1 2 3 4 5 6; do
		status_of "${cpids[$((k - 1))]}"
		rc=$?
		[ $rc -eq 0 ] || errs+=("cmtime client $k exit status $rc")
		v=$(grep -o ' retrans=[0-9]*' "$work/client.$k.out" | tail -n 1 | cut -d= -f2)
		retrans=$((retrans + ${v:-0}))
	done
	# (cmtime's server never ends by itself: its counters while it runs)
	for k in 0 1 2 3 4 5; do
		kill -0 "${spids[$k]}" 2>/dev/null ||
			errs+=("cmtime server $((k + 1)) died")
		v=$(counter "${spids[$k]}" share_fwd_out)
		fwd=$((fwd + ${v:-0}))
		v=$(counter "${spids[$k]}" share_fwd_held)
		held=$((held + ${v:-0}))
		v=$(counter "${spids[$k]}" share_fwd_lost)
		lost=$((lost + ${v:-0}))
		v=$(counter "${spids[$k]}" drop_no_owner)
		lost=$((lost + ${v:-0}))
	done
	echo "run_shared[$name]: $fwd MADs forwarded, $held of them waited for room, $lost lost; the clients resent $retrans"
	[ "$fwd" -gt 0 ] || errs+=("no MAD was forwarded: the test tested nothing")
	[ "$lost" -eq 0 ] || errs+=("$lost forwarded MADs were lost (share_fwd_lost, drop_no_owner)")
}

# Three rping clients, one after another, against an rping server, all
# members of A's one address but none its first member (an idle
# uroce_traffic is).  Their MADs go to the member they are for: by UDP
# (the group's program steers them) until the data path has a ring to
# that member, then through it.  Neither the first member nor the server
# forwards a MAD, and each client connects one ring to the server, not
# a second to ".../0" (docs/local.md, "QP1"); the clients handle their
# MADs in the thread that receives them.
cm_same_host() {
	local first srv i rc fwd acc
	on_A "$traffic" -p 0 --port-file "$work/first.port" \
		>"$work/first.out" 2>&1 &
	first=$!
	pids+=($first)
	wait_until 30 $first test -s "$work/first.port" ||
		fail "the first member did not start"
	on_A env UROCE_CM_LISTEN_FILE="$work/cm_listen.7191" \
		rping -s -P -a $addrA -p 7191 >"$work/rping_s.out" 2>&1 &
	srv=$!
	pids+=($srv)
	wait_until 30 $srv cm_listening 7191 || fail "rping -s did not listen"
	for i in 1 2 3; do
		ip netns exec "$nsA" env "${lib_env[@]}" UROCE_ADDR=$addrA \
			timeout -k 5 "$tmo" rping -c -a $addrA -p 7191 -C 20 -v \
			>"$work/rping_c.$i" 2>&1
		rc=$?
		[ $rc -eq 0 ] || errs+=("rping client $i exit status $rc")
		[ "$(grep -c 'ping data: rdma-ping-' "$work/rping_c.$i")" -eq 20 ] ||
			errs+=("rping client $i did not print 20 pings")
	done
	fwd=$(counter $first share_fwd_out)
	[ "${fwd:-x}" = 0 ] ||
		errs+=("the first member forwarded ${fwd:-?} datagrams (share_fwd_out)")
	fwd=$(counter $srv share_fwd_out)
	[ "${fwd:-x}" = 0 ] ||
		errs+=("the rping server forwarded ${fwd:-?} datagrams (share_fwd_out)")
	acc=$(counter $srv local_accepts)
	[ "${acc:-x}" = 3 ] ||
		errs+=("the rping server accepted ${acc:-?} rings from 3 clients, not 3")
	# the clients' REPs were handled by the thread that received them,
	# not by a wake-up of the CM thread (docs/rdmacm.md, "Shape")
	grep -h -o ' direct=[0-9]*' "$work"/rping_c.* | grep -q 'direct=[1-9]' ||
		errs+=("no rping client handled a MAD where it was received (uroce-cm-stats direct=0)")
}

case $scenario in
cm-same-host) cm_same_host ;;
perftest) perftest ;;
ring-after-kill) ring_after_kill ;;
registry-gc) registry_gc ;;
mpi-ucx-2ns) mpi_2ns ucx ;;
mpi-ucx-2ns-lossy) mpi_2ns ucx drop=0.01,seed=14 ;;
mpi-ofi-2ns) mpi_2ns ofi ;;
fi-pingpong-2ns) fi_pingpong_2ns ;;
mpi-ofi) mpi_ofi ;;
perftest-cm) perftest -R ;;
kill) kill_one ;;
rdmacm) rdmacm ;;
cm-burst) cm_burst ;;
*) die "unknown scenario '$scenario'" ;;
esac

if [ ${#errs[@]} -gt 0 ]; then
	fail "$(printf '%s; ' "${errs[@]}")"
fi
rm -rf "$work"
echo "run_shared[$name]: PASS"
