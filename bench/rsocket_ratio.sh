#!/bin/bash
# SPDX-License-Identifier: MIT
#
# rsockets against kernel TCP, as ratios measured in one run (A/B pairs
# interleaved, medians), docs/rsocket.md "Performance":
#
#   iperf3 through librspreload over uroce  /  plain iperf3 (TCP)
#   rstream 64-byte round trip              /  rstream -T s (TCP)
#
# on this host (the same-host path), and with --netns also between two
# network namespaces joined by a veth pair (RoCE over UDP), MTU 1500 and
# 9000.  Run as root from the build tree's parent:
#
#   bench/rsocket_ratio.sh [--pairs N] [--secs S] [--netns] [BUILD]
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pairs=3 secs=3 netns=0
while (($#)); do
	case $1 in
	--pairs) pairs=$2; shift 2 ;;
	--secs) secs=$2; shift 2 ;;
	--netns) netns=1; shift ;;
	*) break ;;
	esac
done
build=$(realpath "${1:-$here/../build}")
lib=$(ldconfig -p | awk '$1 == "librdmacm.so.1" { print $NF; exit }')
rsp=$(dirname "$lib")/rsocket/librspreload.so
uroce=("$build/bin/uroce" run --)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

addrB=10.79.1.2
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# the client's device address: across namespaces the project places it
# with UROCE_ADDR (docs/rdmacm.md)
caddr() { [[ -n $1 ]] && echo "UROCE_ADDR=$addrB" || echo "UROCE_ADDR=127.0.0.2"; }

# iperf3 SRV_NS CLI_NS ADDR rsocket|tcp: prints Gb/s
iperf() {
	local sns=$1 cns=$2 addr=$3 mode=$4 port=$((5400 + RANDOM % 500))
	local -a s=() c=() env=()
	[[ -n $sns ]] && s=(ip netns exec "$sns")
	[[ -n $cns ]] && c=(ip netns exec "$cns")
	if [[ $mode == rsocket ]]; then
		env=(env "LD_PRELOAD=$rsp" "UROCE_CM_LISTEN_FILE=$tmp/l")
		rm -f "$tmp/l"
		"${s[@]}" "${uroce[@]}" "${env[@]}" "UROCE_ADDR=$addr" \
			iperf3 -s -1 -B "$addr" -p "$port" >/dev/null 2>&1 &
		until [[ -s $tmp/l ]]; do sleep 0.05; done
		"${c[@]}" "${uroce[@]}" env "LD_PRELOAD=$rsp" "$(caddr "$cns")" \
			iperf3 -c "$addr" -p "$port" -t "$secs" -J >"$tmp/j" 2>&1
	else
		"${s[@]}" iperf3 -s -1 -B "$addr" -p "$port" >/dev/null 2>&1 &
		until "${s[@]}" ss -Hltn "sport = :$port" | grep -q .; do sleep 0.05; done
		"${c[@]}" iperf3 -c "$addr" -p "$port" -t "$secs" -J >"$tmp/j" 2>&1
	fi
	wait
	python3 -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e9))' "$tmp/j"
}

# rstream SRV_NS CLI_NS ADDR rsocket|tcp: prints the round trip in us
rlat() {
	local sns=$1 cns=$2 addr=$3 mode=$4
	local -a s=() c=() t=()
	[[ -n $sns ]] && s=(ip netns exec "$sns")
	[[ -n $cns ]] && c=(ip netns exec "$cns")
	[[ $mode == tcp ]] && t=(-T s)
	rm -f "$tmp/l"
	"${s[@]}" "${uroce[@]}" env "UROCE_CM_LISTEN_FILE=$tmp/l" "UROCE_ADDR=$addr" \
		rstream -b "$addr" "${t[@]}" -S 64 -C 1 -I 20000 >/dev/null 2>&1 &
	if [[ $mode == tcp ]]; then
		until "${s[@]}" ss -Hltn "sport = :7471" | grep -q .; do sleep 0.05; done
	else
		until [[ -s $tmp/l ]]; do sleep 0.05; done
	fi
	"${c[@]}" "${uroce[@]}" env "$(caddr "$cns")" \
		rstream -s "$addr" "${t[@]}" -S 64 -C 1 -I 20000 |
		awk '$1 == "custom" { print $NF * 2 }'
	wait
}

# one path: A/B pairs interleaved, then the medians and their ratio
measure() {
	local what=$1 fn=$2 sns=$3 cns=$4 addr=$5 i a b
	: >"$tmp/a"
	: >"$tmp/b"
	for ((i = 0; i < pairs; i++)); do
		"$fn" "$sns" "$cns" "$addr" rsocket >>"$tmp/a"
		"$fn" "$sns" "$cns" "$addr" tcp >>"$tmp/b"
	done
	a=$(median <"$tmp/a")
	b=$(median <"$tmp/b")
	printf '%-34s rsocket %8s  tcp %8s  ratio %s   (rsocket: %s; tcp: %s)\n' \
		"$what" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')" \
		"$(paste -sd' ' "$tmp/a")" "$(paste -sd' ' "$tmp/b")"
}

echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg), $pairs pairs, iperf3 -t $secs"
measure "same host iperf3 Gb/s" iperf '' '' 127.0.0.1
measure "same host rstream 64B RTT us" rlat '' '' 127.0.0.1
if ((netns)); then
	# shellcheck source=tests/lib/netns.sh
	source "$here/../tests/lib/netns.sh"
	nsA=uroce-rsbench-a nsB=uroce-rsbench-b addrA=10.79.1.1 pids=()
	fail() { echo "FAIL: $*" >&2; exit 1; }
	trap 'netns_cleanup; rm -rf "$tmp"' EXIT
	for mtu in 1500 9000; do
		netns_up rsocket_ratio "$mtu"
		measure "veth mtu $mtu iperf3 Gb/s" iperf "$nsA" "$nsB" "$addrA"
		measure "veth mtu $mtu rstream 64B RTT us" rlat "$nsA" "$nsB" "$addrA"
		netns_del
	done
fi
