#!/bin/bash
# SPDX-License-Identifier: MIT
#
# ECN marking on the path (docs/congestion.md, "ECN and CNPs"): two
# namespaces joined by a veth, and in front of the receiver a marking
# queue (nfq_impair --ce-mbps: a phantom queue that drains at 100 Mbit/s
# and marks ECN-capable packets CE above 100 KiB).  ib_write_bw 64 KiB for
# 3 s from A to B, twice through the same marker:
#
#   - UROCE_CC=dcqcn on both sides: the data is ECT(0), the marker marks
#     it, B counts the marks (rx_ecn_ce) and sends CNPs (tx_cnp_pkts),
#     A receives them (rx_cnp_pkts) and cuts its rate (cc_rate_cuts);
#   - congestion control off: nothing is ECN-capable, nothing is marked,
#     no CNP; the flow runs as fast as the path lets it.
#
# The marked flow must slow down: its bandwidth below 0.7 of the unmarked
# run's (and the marker must have marked).
#
#   ecn_mark.sh NFQ_IMPAIR      (root; UROCE_LIBDIR: our library)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"
nfq=${1:?usage: ecn_mark.sh NFQ_IMPAIR}

nsA=uroce-ecn-a nsB=uroce-ecn-b addrA=10.231.79.1 addrB=10.231.79.2
pids=()
dir=$(mktemp -d "${TMPDIR:-/tmp}/uroce-ecn.XXXXXX")
fail() {
	local f
	printf 'FAIL: %s\n' "$*"
	for f in "$dir"/*; do
		[[ -f $f ]] && { echo "---- $(basename "$f") ----"; tail -n 20 "$f"; }
	done
	exit 1
}
# shellcheck source=tests/lib/netns.sh
source "$here/../lib/netns.sh"
trap 'netns_cleanup; rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM
command -v iptables >/dev/null || fail "iptables is not installed"
netns_up ecn_mark 1500

mapfile -t penv < <(uroce_prog_env)
nfq_pid=''

# the marker in front of B: every RoCE packet B receives
start_marker() {
	local i
	ip netns exec "$nsB" "$nfq" --queue 9 --ce-mbps 100 --ce-kbytes 100 \
		--ready "$dir/nfq.ready" --stats "$dir/nfq.stats.$1" \
		>"$dir/nfq.log" 2>&1 &
	nfq_pid=$!
	pids+=("$nfq_pid")
	for ((i = 0; i < 200; i++)); do
		[[ -s $dir/nfq.ready ]] && break
		kill -0 "$nfq_pid" 2>/dev/null || fail "nfq_impair exited"
		sleep 0.05
	done
	[[ -s $dir/nfq.ready ]] || fail "nfq_impair did not start"
	ip netns exec "$nsB" iptables -A INPUT -p udp --dport 4791 \
		-j NFQUEUE --queue-num 9 || fail "iptables NFQUEUE rule"
}

stop_marker() {
	ip netns exec "$nsB" iptables -D INPUT -p udp --dport 4791 \
		-j NFQUEUE --queue-num 9 2>/dev/null
	kill -TERM "$nfq_pid" 2>/dev/null
	wait "$nfq_pid" 2>/dev/null
	rm -f "$dir/nfq.ready"
}

# stat FILE NAME: a counter from the uroce-stats: line UROCE_STATS=1 printed
stat() {
	sed -n 's/.*uroce-stats: //p' "$1" | tr ' ' '\n' |
		sed -n "s/^$2=//p" | head -1
}

# run NAME [ENV...]: ib_write_bw server in B, client in A, through the
# marker; the client's average bandwidth (MB/s) into NAME.bw
port=19990
run() {
	local name=$1 spid i
	shift
	port=$((port + 1))
	start_marker "$name"
	ip netns exec "$nsB" env "${penv[@]}" "$@" UROCE_STATS=1 \
		UROCE_ADDR=$addrB timeout -k 5 60 ib_write_bw -F -s 65536 -D 3 \
		-p "$port" >"$dir/$name.srv" 2>&1 &
	spid=$!
	pids+=("$spid")
	for ((i = 0; i < 400; i++)); do
		[[ -n $(ip netns exec "$nsB" ss -Hltn "sport = :$port") ]] && break
		kill -0 "$spid" 2>/dev/null || fail "$name: server exited"
		sleep 0.05
	done
	ip netns exec "$nsA" env "${penv[@]}" "$@" UROCE_STATS=1 \
		UROCE_ADDR=$addrA timeout -k 5 60 ib_write_bw -F -s 65536 -D 3 \
		-p "$port" "$addrB" >"$dir/$name.cli" 2>&1 ||
		fail "$name: client: $(uroce_rc_text $?)"
	wait "$spid" || fail "$name: server: $(uroce_rc_text $?)"
	stop_marker
	awk '/#bytes/ { t = 1; next } t && $1 ~ /^[0-9]+$/ { print $4; exit }' \
		"$dir/$name.cli" >"$dir/$name.bw"
}

run cc UROCE_CC=dcqcn
bw_cc=$(cat "$dir/cc.bw")
ce=$(stat "$dir/cc.srv" rx_ecn_ce)
cnp_tx=$(stat "$dir/cc.srv" tx_cnp_pkts)
cnp_rx=$(stat "$dir/cc.cli" rx_cnp_pkts)
cuts=$(stat "$dir/cc.cli" cc_rate_cuts)
marked=$(sed -n 's/.*marked=\([0-9]*\).*/\1/p' "$dir/nfq.stats.cc")
uroce_say "with CC: ${bw_cc} MB/s; marked $marked, CE seen $ce, CNPs sent" \
	"$cnp_tx, received $cnp_rx, rate cuts $cuts"
((${marked:-0} > 0)) || fail "the marker marked nothing"
((${ce:-0} > 0)) || fail "B saw no CE mark"
((${cnp_tx:-0} > 0)) || fail "B sent no CNP"
((${cnp_rx:-0} > 0)) || fail "A received no CNP"
((${cuts:-0} > 0)) || fail "A never cut its rate"
((cuts == cnp_rx)) || fail "$cnp_rx CNPs but $cuts cuts"

run off
bw_off=$(cat "$dir/off.bw")
marked=$(sed -n 's/.*marked=\([0-9]*\).*/\1/p' "$dir/nfq.stats.off")
uroce_say "without CC: ${bw_off} MB/s; marked $marked"
((${marked:-1} == 0)) || fail "packets ECN-capable with CC off"
[[ $(stat "$dir/off.cli" rx_cnp_pkts) == 0 ]] || fail "CNPs with CC off"
awk -v a="$bw_cc" -v b="$bw_off" 'BEGIN { exit !(a > 0 && b > 0 && a < 0.7 * b) }' ||
	fail "the marked flow did not slow down: $bw_cc MB/s against $bw_off"
uroce_say "PASS: marked flow $bw_cc MB/s, unmarked $bw_off MB/s"
