#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The IP header from the GRH (docs/congestion.md, "The IP header"): two
# hosts (network namespaces joined by a veth pair), the wire captured by
# dumpcap on one end, and every RoCE packet of a QP must carry the DSCP
# and ECN of its traffic class and the TTL of its hop limit:
#
#   - ib_write_bw --tclass=106 on both sides: DSCP 26, ECN ECT(0)
#     (106 = 0x6a: DSCP 26 and ECN 10), TTL 255 (perftest's hop limit),
#     every data packet and every ACK; and the client's UROCE_PCAP shows
#     the same TOS on what it sent and what it received;
#   - ucmatose -t 104 (rdma_set_option RDMA_OPTION_ID_TOS, which the
#     kernel's rdma_cm puts in the path's traffic class and the passive
#     side takes from the REQ): DSCP 26 on every packet of either QP in
#     both directions (QP1's CM MADs are not the ids' and are left out),
#     TTL 64 (rdma_cm's hop limit);
#   - with UROCE_CC=dcqcn, ib_write_bw --tclass=104: DSCP 26 and ECT(0)
#     (the ECN bits are the NIC's when congestion control is on).
#
#   tos_2ns.sh        (root; UROCE_LIBDIR: our library; KEEP=1 keeps the
#                     captures and logs)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

nsA=uroce-tos-a nsB=uroce-tos-b addrA=10.231.78.1 addrB=10.231.78.2
pids=()
log=''
fail() { uroce_fail_pair "$log" "$@"; }
# shellcheck source=tests/lib/netns.sh
source "$here/../lib/netns.sh"
dir=$(mktemp -d "${TMPDIR:-/tmp}/uroce-tos.XXXXXX")
trap 'netns_cleanup; [[ -n ${KEEP:-} ]] || rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM
command -v dumpcap >/dev/null && command -v tshark >/dev/null ||
	fail "tshark/dumpcap are not installed (run scripts/setup)"
netns_up tos_2ns

mapfile -t penv < <(uroce_prog_env)
port=19970
cap_pid=''

# capture NAME: tshark on vB, one line per packet (UDP port, DSCP, ECN,
# TTL, BTH destination QP, opcode) in NAME.txt, until stop_capture.
# Started once it has seen a probe datagram (to port 9) go by.
capture() {
	local out=$dir/$1.txt i
	ip netns exec "$nsB" tshark -l -i vB -f "udp port 4791 or udp port 9" \
		-T fields -E separator=, -e udp.dstport -e ip.dsfield.dscp \
		-e ip.dsfield.ecn -e ip.ttl -e infiniband.bth.destqp \
		-e infiniband.bth.opcode >"$out" 2>"$dir/$1.err" &
	cap_pid=$!
	pids+=("$cap_pid")
	for ((i = 0; i < 400; i++)); do
		ip netns exec "$nsA" bash -c "echo probe >/dev/udp/$addrB/9" \
			2>/dev/null
		grep -q '^9,' "$out" && return
		kill -0 "$cap_pid" 2>/dev/null ||
			fail "tshark: $(cat "$dir/$1.err")"
		sleep 0.05
	done
	fail "tshark did not start capturing"
}

# stop_capture NAME: once a probe sent now has been seen (everything
# before it has been too: tshark prints what it captured in order)
stop_capture() {
	local out=$dir/$1.txt n i
	n=$(grep -c '^9,' "$out")
	for ((i = 0; i < 400; i++)); do
		ip netns exec "$nsA" bash -c "echo probe >/dev/udp/$addrB/9" \
			2>/dev/null
		(($(grep -c '^9,' "$out") > n)) && break
		sleep 0.05
	done
	kill -INT "$cap_pid" 2>/dev/null
	wait "$cap_pid" 2>/dev/null
}

# listening WAIT: a TCP port listens in nsA, or the file WAIT exists (our
# librdmacm's UROCE_CM_LISTEN_FILE)
listening() {
	if [[ $1 == /* ]]; then
		[[ -e $1 ]]
	else
		[[ -n $(ip netns exec "$nsA" ss -Hltn "sport = :$1") ]]
	fi
}

# run WAIT [ENV...] -- PROGRAM ARGS...: the server in nsA, until it
# listens (see listening)
run() {
	local wait=$1 spid i
	local -a env=()
	shift
	while [[ $1 != -- ]]; do env+=("$1"); shift; done
	shift
	log=$dir/$1-$port
	ip netns exec "$nsA" env "${penv[@]}" "${env[@]}" UROCE_ADDR=$addrA \
		timeout -k 5 60 "$@" >"$log.srv" 2>&1 &
	spid=$!
	pids+=("$spid")
	for ((i = 0; i < 400; i++)); do
		listening "$wait" && break
		kill -0 "$spid" 2>/dev/null || fail "server exited: $*"
		sleep 0.05
	done
}

# check NAME DSCP ECN [TTL]: the capture has RoCE packets of QPs other
# than QP1 (the CM's MADs), and every one has that DSCP, ECN and TTL
check() {
	local name=$1 dscp=$2 ecn=$3 ttl=${4:-} n bad
	n=$(awk -F, '$1 == 4791 && $5 != "" && $5 !~ /^0x0*1$/' "$dir/$name.txt" |
		wc -l)
	bad=$(awk -F, -v d="$dscp" -v e="$ecn" -v t="$ttl" \
		'$1 == 4791 && $5 != "" && $5 !~ /^0x0*1$/ &&
		 ($2 != d || $3 != e || (t != "" && $4 != t))' "$dir/$name.txt")
	((n >= 100)) || fail "$name: only $n packets captured"
	[[ -z $bad ]] || fail "$name: packets without DSCP $dscp ECN $ecn" \
		"${ttl:+TTL $ttl} (port,dscp,ecn,ttl,qp,opcode): $(head -5 <<<"$bad")"
	uroce_say "PASS: $name: $n packets, all DSCP $dscp ECN $ecn${ttl:+ TTL $ttl}"
}

# client NAME [ENV...] -- PROGRAM ARGS...: the client in nsB, the
# server's address its last argument; both must succeed
client() {
	local name=$1
	local -a env=()
	shift
	while [[ $1 != -- ]]; do env+=("$1"); shift; done
	shift
	ip netns exec "$nsB" env "${penv[@]}" "${env[@]}" UROCE_ADDR=$addrB \
		timeout -k 5 60 "$@" "$addrA" >"$log.cli" 2>&1 ||
		fail "$name client: $(uroce_rc_text $?): $*"
	wait "${pids[-1]}" || fail "$name server: $(uroce_rc_text $?): $*"
	if uroce_log_errors "$log.srv" "$log.cli" >/dev/null; then
		fail "$name: an error printed: $*"
	fi
	log=''
}

# perftest: the data and the ACKs
port=$((port + 1))
capture wbw
run "$port" -- ib_write_bw -F --tclass=106 -n 2000 -p "$port"
client wbw UROCE_PCAP="$dir/client.pcap" -- \
	ib_write_bw -F --tclass=106 -n 2000 -p "$port"
stop_capture wbw
check wbw 26 2 255
# the client's own capture says the same, both ways
tshark -r "$dir/client.pcap" -T fields -E separator=, -e udp.dstport \
	-e ip.dsfield.dscp -e ip.dsfield.ecn -e ip.ttl -e infiniband.bth.destqp \
	-e ip.src >"$dir/pcap.txt" 2>/dev/null || fail "tshark cannot read UROCE_PCAP"
grep -q ",$addrA\$" "$dir/pcap.txt" && grep -q ",$addrB\$" "$dir/pcap.txt" ||
	fail "UROCE_PCAP: not both directions"
grep ",$addrB\$" "$dir/pcap.txt" >"$dir/pcap_tx.txt"
grep ",$addrA\$" "$dir/pcap.txt" >"$dir/pcap_rx.txt"
check pcap_tx 26 2 255
check pcap_rx 26 2

# rdma_cm: the id's TOS option
capture ucma
run "$dir/listen" UROCE_CM_LISTEN_FILE="$dir/listen" -- \
	ucmatose -b "$addrA" -C 200
client ucma -- ucmatose -t 104 -C 200 -s
stop_capture ucma
check ucma 26 0 64

# congestion control on: ECT(0) whatever the traffic class says
port=$((port + 1))
capture wbw_cc
run "$port" UROCE_CC=dcqcn -- ib_write_bw -F --tclass=104 -n 2000 -p "$port"
client wbw_cc UROCE_CC=dcqcn -- ib_write_bw -F --tclass=104 -n 2000 -p "$port"
stop_capture wbw_cc
check wbw_cc 26 2
