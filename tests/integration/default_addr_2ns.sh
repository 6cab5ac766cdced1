#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Two network namespaces (two containers on one machine, as a CI runner
# has them) and no address given: each device takes the host-local
# default 127.0.0.1, the programs exchange it, and each RC QP connects to
# itself.  That cannot move data, and uroce must say why instead of
# letting ib_write_bw report 0.00 MB/s and nothing else (verbs/qp.c
# dead_end):
#
#   - ib_write_bw -D 1 with neither UROCE_ADDR nor UROCE_IFNAME: the
#     client's stderr names its QP that sends to its own device (to
#     itself, or to a QP number nobody there has: the address's registry
#     left by a dead namespace with the same inode number gives QPs of
#     another slot), its address, and UROCE_ADDR / UROCE_IFNAME;
#   - the same with UROCE_IFNAME on both sides: data moves (a bandwidth
#     above 0) and nothing is said;
#   - rping (rdma_cm) the same way: with no address, the server listens
#     on 127.0.0.1, the client's REQ to the server's veth address is
#     refused by its kernel (nothing takes UDP 4791 there), and when
#     rping gives up (RDMA_CM_EVENT_UNREACHABLE, as the kernel's rdma_cm
#     gives it) the client has said why (rdmacm/gsi.c
#     cm_say_no_device); with UROCE_IFNAME, rping passes, saying nothing.
#
#   default_addr_2ns.sh        (root; UROCE_LIBDIR: our library)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

nsA=uroce-defaddr-a nsB=uroce-defaddr-b addrA=10.231.79.1 addrB=10.231.79.2
pids=()
log=''
fail() { uroce_fail_pair "$log" "$@"; }
# shellcheck source=tests/lib/netns.sh
source "$here/../lib/netns.sh"
dir=$(mktemp -d "${TMPDIR:-/tmp}/uroce-defaddr.XXXXXX")
trap 'netns_cleanup; rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM
netns_up default_addr_2ns

mapfile -t penv < <(uroce_prog_env)
port=19980
# (ib_write_bw -D stops on SIGALRM, whose handler calls fopen: perftest's
# own signal-unsafe call, which TSan would report as our program's error;
# -n would never end where a QP is connected to itself)
export TSAN_OPTIONS=${TSAN_OPTIONS:+$TSAN_OPTIONS:}report_signal_unsafe=0

# run NAME [SETTING_A SETTING_B]: ib_write_bw -D 1, the server in nsA
# (with SETTING_A in its environment), the client in nsB (SETTING_B)
run() {
	local name=$1 spid
	local -a ea=() eb=()
	[[ $# -lt 3 ]] || ea=("$2") eb=("$3")
	port=$((port + 1))
	log=$dir/$name
	ip netns exec "$nsA" env "${penv[@]}" "${ea[@]}" \
		timeout -k 5 60 ib_write_bw -D 1 -p "$port" >"$log.srv" 2>&1 &
	spid=$!
	pids+=("$spid")
	uroce_wait_listen "$spid" "$port" $(($(date +%s) + 20)) "$nsA"
	[[ $? -ne 1 ]] || fail "$name: the server exited"
	ip netns exec "$nsB" env "${penv[@]}" "${eb[@]}" \
		timeout -k 5 60 ib_write_bw -D 1 -p "$port" "$addrA" \
		>"$log.cli" 2>&1 || fail "$name: client: $(uroce_rc_text $?)"
	wait "$spid" || fail "$name: server: $(uroce_rc_text $?)"
}

# the bandwidth ib_write_bw's client reported (MB/s), "" if none
bw() {
	awk '/#bytes/ { t = 1; next } t && $1 ~ /^[0-9]+$/ { print $4; exit }' \
		"$log.cli"
}

run default
msg='uroce: QP 0x[0-9a-f]+ is connected to [^(]*\(127\.0\.0\.1, QP 0x[0-9a-f]+\), so it can complete nothing'
grep -Eq "$msg" "$log.cli" ||
	fail "default: no word of the QP that sends to its own device"
grep -q 'UROCE_ADDR or UROCE_IFNAME' "$log.cli" ||
	fail "default: the message does not say what to set"
[[ $(grep -c 'can complete nothing' "$log.cli") -eq 1 ]] ||
	fail "default: said more than once"
uroce_say "PASS: no address given: the client says its QP sends to its own device"
log=''

run ifname UROCE_IFNAME=vA UROCE_IFNAME=vB
b=$(bw)
awk -v b="${b:-0}" 'BEGIN { exit !(b > 0) }' ||
	fail "UROCE_IFNAME: no data moved (${b:-no result})"
! grep -q 'can complete nothing' "$log.srv" "$log.cli" ||
	fail "UROCE_IFNAME: warned of a QP that sends to its own device"
uroce_say "PASS: UROCE_IFNAME on both sides: $b MB/s, nothing said"
log=''

# rping NAME [SETTING_A SETTING_B]: rping -s in nsA, rping -c in nsB
# (3 pings, verbose); the client's exit status in rc
rping_pair() {
	local name=$1 spid i
	local -a ea=() eb=()
	[[ $# -lt 3 ]] || ea=("$2") eb=("$3")
	log=$dir/$name
	# (rping listens on rdma_cm, not TCP: our librdmacm writes
	# UROCE_CM_LISTEN_FILE once it listens)
	ip netns exec "$nsA" env "${penv[@]}" "${ea[@]}" \
		UROCE_CM_LISTEN_FILE="$log.listen" \
		timeout -k 5 60 rping -s -v -C 3 >"$log.srv" 2>&1 &
	spid=$!
	pids+=("$spid")
	for ((i = 0; i < 400; i++)); do
		[[ -s $log.listen ]] && break
		kill -0 "$spid" 2>/dev/null || fail "$name: the server exited"
		sleep 0.05
	done
	ip netns exec "$nsB" env "${penv[@]}" "${eb[@]}" \
		timeout -k 5 60 rping -c -v -C 3 -a "$addrA" >"$log.cli" 2>&1
	rc=$?
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
}

rping_pair rping-default
((rc != 0)) || fail "rping with no address passed"
((rc != 124 && rc != 137)) || fail "rping with no address: $(uroce_rc_text $rc)"
grep -q "uroce: no RDMA device at $addrA: its UDP port 4791 refused" \
	"$log.cli" || fail "rping: no word of why its REQ went unanswered"
grep -q 'UROCE_ADDR or UROCE_IFNAME' "$log.cli" ||
	fail "rping: the message does not say what to set"
uroce_say "PASS: rping, no address given: the client says nothing takes RoCE there"
log=''

rping_pair rping-ifname UROCE_IFNAME=vA UROCE_IFNAME=vB
((rc == 0)) || fail "rping with UROCE_IFNAME: $(uroce_rc_text $rc)"
! grep -q 'no RDMA device' "$log.cli" ||
	fail "rping with UROCE_IFNAME: said there is no RDMA device"
uroce_say "PASS: rping with UROCE_IFNAME on both sides, nothing said"
log=''
