#!/bin/bash
# SPDX-License-Identifier: MIT
#
# ECN marking on the path (docs/congestion.md, "ECN and CNPs"): two
# namespaces joined by a veth, and in front of the receiver a marking
# queue (nfq_impair --ce-mbps: a phantom queue that drains at 20 Mbit/s
# and marks ECN-capable packets CE above 100 KiB).  ib_write_bw 64 KiB for
# 3 s from A to B, two flows at once through the same marker (a second
# address on each side for the second):
#
#   - UROCE_CC=dcqcn on both sides: the data is ECT(0), the marker marks
#     it, B counts the marks (rx_ecn_ce) and sends CNPs (tx_cnp_pkts),
#     A receives them (rx_cnp_pkts) and cuts its rate (cc_rate_cuts);
#   - congestion control off: nothing is ECN-capable, nothing is marked,
#     no CNP; the flow runs as fast as the path lets it.
#
# The marked flow must yield: its bandwidth below 0.7 of the other's in
# the same run (the machine's load moves both alike; typically it gets a
# fifth).
#
# While the marked run goes, `uroce qps --json` must show the client's QP
# paced (cc_rate) with the CNPs it received and the cuts they made.
#
#   ecn_mark.sh NFQ_IMPAIR UROCE     (root; UROCE_LIBDIR: our library)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"
nfq=${1:?usage: ecn_mark.sh NFQ_IMPAIR UROCE}
tool=${2:?usage: ecn_mark.sh NFQ_IMPAIR UROCE}

nsA=uroce-ecn-a nsB=uroce-ecn-b addrA=10.231.79.1 addrB=10.231.79.2
addrA2=10.231.79.11 addrB2=10.231.79.12
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

# the marker in front of B: every RoCE packet B receives (stats to
# nfq.stats.NAME)
start_marker() {
	local i
	ip netns exec "$nsB" "$nfq" --queue 9 --ce-mbps 20 --ce-kbytes 100 \
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

# watch_qp PID: while the client under PID (timeout's child) runs, `uroce
# qps --json` of it until its QP shows a pacing rate, CNPs received and cuts
watch_qp() {
	local i p=''
	for ((i = 0; i < 200; i++)); do
		[[ -n $p ]] || p=$(pgrep -P "$1" ib_write_bw)
		if [[ -n $p ]]; then
			"$tool" qps --json "$p" >"$dir/qps.json" 2>/dev/null
			python3 - "$dir/qps.json" <<'PY' && { qp_seen=1; return; }
import json, sys
proc = json.load(open(sys.argv[1]))
sys.exit(0 if any(q.get("cc_rate", 0) > 0 and q.get("cnp_received", 0) > 0
                  and q.get("rate_cuts", 0) > 0
                  for q in proc.get("qps", [])) else 1)
PY
		fi
		kill -0 "$1" 2>/dev/null || return
		sleep 0.05
	done
}
qp_seen=0

# server NAME ADDR PORT [ENV...]: ib_write_bw's server in B on ADDR, until
# it listens
server() {
	local name=$1 addr=$2 port=$3
	shift 3
	ip netns exec "$nsB" env "${penv[@]}" "$@" UROCE_STATS=1 \
		UROCE_ADDR="$addr" timeout -k 5 60 ib_write_bw -F -s 65536 -D 3 \
		-p "$port" >"$dir/$name.srv" 2>&1 &
	eval "spid_$name=$!"
	pids+=("$!")
	uroce_wait_listen "$!" "$port" $(($(date +%s) + 20)) "$nsB"
	case $? in
	1) fail "$name: server exited" ;;
	2) fail "$name: server does not listen" ;;
	esac
}

# client NAME ADDR PORT DST [ENV...]: its client in A, in the background
client() {
	local name=$1 addr=$2 port=$3 dst=$4
	shift 4
	ip netns exec "$nsA" env "${penv[@]}" "$@" UROCE_STATS=1 \
		UROCE_ADDR="$addr" timeout -k 5 60 ib_write_bw -F -s 65536 -D 3 \
		-p "$port" "$dst" >"$dir/$name.cli" 2>&1 &
	eval "cpid_$name=$!"
	pids+=("$!")
}

# a second address on each side: one process per address (processes
# that shared one would forward each other's packets without their TOS)
if ! ip -n "$nsA" addr add "$addrA2/24" dev vA ||
   ! ip -n "$nsB" addr add "$addrB2/24" dev vB; then
	fail "second addresses"
fi
start_marker both
server cc "$addrB" 19991 UROCE_CC=dcqcn
server off "$addrB2" 19992
client cc "$addrA" 19991 "$addrB" UROCE_CC=dcqcn
client off "$addrA2" 19992 "$addrB2"
# shellcheck disable=SC2154  # set by eval in client/server
{
	watch_qp "$cpid_cc"
	wait "$cpid_cc" || fail "cc: client: $(uroce_rc_text $?)"
	wait "$cpid_off" || fail "off: client: $(uroce_rc_text $?)"
	wait "$spid_cc" || fail "cc: server: $(uroce_rc_text $?)"
	wait "$spid_off" || fail "off: server: $(uroce_rc_text $?)"
}
stop_marker
for n in cc off; do
	awk '/#bytes/ { t = 1; next } t && $1 ~ /^[0-9]+$/ { print $4; exit }' \
		"$dir/$n.cli" >"$dir/$n.bw"
done

bw_cc=$(cat "$dir/cc.bw")
bw_off=$(cat "$dir/off.bw")
ce=$(uroce_stat "$dir/cc.srv" rx_ecn_ce)
cnp_tx=$(uroce_stat "$dir/cc.srv" tx_cnp_pkts)
cnp_rx=$(uroce_stat "$dir/cc.cli" rx_cnp_pkts)
cuts=$(uroce_stat "$dir/cc.cli" cc_rate_cuts)
marked=$(sed -n 's/.*marked=\([0-9]*\).*/\1/p' "$dir/nfq.stats.both")
uroce_say "with CC: ${bw_cc} MB/s, without: ${bw_off} MB/s; marked $marked," \
	"CE seen $ce, CNPs sent $cnp_tx, received $cnp_rx, rate cuts $cuts"
((${marked:-0} > 0)) || fail "the marker marked nothing"
((${ce:-0} > 0)) || fail "B saw no CE mark"
((${cnp_tx:-0} > 0)) || fail "B sent no CNP"
((${cnp_rx:-0} > 0)) || fail "A received no CNP"
((${cuts:-0} > 0)) || fail "A never cut its rate"
# every CNP that found A's QP cut its rate; the rest came after the
# client destroyed its QP (the marks of its last packets), or found it
# out of RTR, and were dropped as for no QP or a bad header
unknown=$(uroce_stat "$dir/cc.cli" drop_unknown_qp)
badhdr=$(uroce_stat "$dir/cc.cli" drop_bad_hdr)
late=$((${unknown:-0} + ${badhdr:-0}))
((cuts <= cnp_rx && cnp_rx - cuts <= late)) ||
	fail "$cnp_rx CNPs but $cuts cuts ($late packets dropped as late)"
((qp_seen)) || fail "uroce qps never showed the QP paced with CNPs:" \
	"$(head -c 2000 "$dir/qps.json")"
[[ $(uroce_stat "$dir/off.srv" rx_ecn_ce) == 0 && $(uroce_stat "$dir/off.cli" rx_cnp_pkts) == 0 ]] ||
	fail "marks or CNPs without CC"
awk -v a="$bw_cc" -v b="$bw_off" 'BEGIN { exit !(a > 0 && b > 0 && a < 0.7 * b) }' ||
	fail "the marked flow did not yield: $bw_cc MB/s against $bw_off"
uroce_say "PASS: marked flow $bw_cc MB/s, unmarked $bw_off MB/s"
