#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Runs Debian's mckey (rdmacm-utils) over our librdmacm.so.1 +
# libibverbs.so.1: one or more receivers and one sender, each its own
# process with its own address, all joining one multicast group.
#
#   mckey_run.sh --group G --recv IP [--recv IP ...] --send IP
#                [--timeout S] [--count N] [--recv-arg A] [--send-arg A]
#                [-- ARGS FOR BOTH...]
#
# The receivers start first (under stdbuf -oL: mckey's stdout to a file
# is otherwise only written at exit); the sender starts once every
# receiver has printed its "joined" line (our join attaches the QP before the event, so
# the group is then open).  mckey itself sleeps 3 s after the join, then
# the sender sends --count messages (mckey -C; default 10) and every
# receiver waits for as many completions.  mckey counts completions but
# neither checks their status nor the data, so each receiver also runs
# with UROCE_STATS=1, and its exit line must show the multicast packets
# received, no Q_Key drops, and as many receives completed as expected.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

group='' send='' tmo=60 count=10 recvs=() rargs=() sargs=() both=()
while (($#)); do
	case $1 in
	--group) group=$2; shift 2 ;;
	--recv) recvs+=("$2"); shift 2 ;;
	--send) send=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	--count) count=$2; shift 2 ;;
	--recv-arg) rargs+=("$2"); shift 2 ;;
	--send-arg) sargs+=("$2"); shift 2 ;;
	--) shift; both=("$@"); break ;;
	*) uroce_die "mckey_run.sh: unknown option $1" ;;
	esac
done
[[ -n $group && -n $send && ${#recvs[@]} -gt 0 ]] ||
	uroce_die "mckey_run.sh: need --group, --recv and --send"
uroce_preflight mckey

logdir=${UROCE_LOG_DIR:-}
if [[ -z $logdir ]]; then
	logdir=$(mktemp -d "${TMPDIR:-/tmp}/uroce-mckey.XXXXXX")
	trap_rm=$logdir
fi
mkdir -p "$logdir"
mapfile -t penv < <(uroce_prog_env)

pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		[[ -n $p ]] || continue
		kill -TERM "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	if [[ -n ${trap_rm:-} ]]; then rm -rf "$trap_rm"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
	local f
	printf 'FAIL: %s\n' "$*"
	for f in "$logdir"/*.log; do uroce_print_log "$(basename "$f")" "$f"; done
	exit 1
}

for a in "${recvs[@]}" "$send"; do
	if ss -Huan "sport = :4791" 2>/dev/null | awk '{ print $4 }' |
		grep -Fqx "$a:4791"; then
		fail "UDP $a:4791 is already taken by another process"
	fi
done

start=$(date +%s)
deadline=$((start + tmo))
i=0
for a in "${recvs[@]}"; do
	log=$logdir/recv$i.log
	cmd=(mckey -m "$group" -b "$a" -C "$count" "${rargs[@]}" "${both[@]}")
	uroce_say "receiver $i: ${cmd[*]}"
	# line-buffered, so that the "joined" line shows while it runs
	timeout -k 5 "$tmo" env "${penv[@]}" UROCE_STATS=1 \
		stdbuf -oL "${cmd[@]}" >"$log" 2>&1 &
	pids+=($!)
	i=$((i + 1))
done
i=0
for p in "${pids[@]}"; do
	while ! grep -q '^mckey: joined dgid' "$logdir/recv$i.log"; do
		kill -0 "$p" 2>/dev/null || fail "receiver $i exited before joining"
		(($(date +%s) < deadline)) || fail "receiver $i did not join within ${tmo}s"
		sleep 0.05
	done
	i=$((i + 1))
done

cmd=(mckey -m "$group" -b "$send" -s -C "$count" "${sargs[@]}" "${both[@]}")
uroce_say "sender: ${cmd[*]}"
left=$((deadline - $(date +%s)))
((left > 0)) || left=1
timeout -k 5 "$left" env "${penv[@]}" "${cmd[@]}" >"$logdir/send.log" 2>&1
rc=$?
((rc == 0)) || fail "sender: $(uroce_rc_text $rc)"
grep -q '^data transfers complete' "$logdir/send.log" ||
	fail "sender did not complete its transfers"

# the receivers have all they need once the sender is done: mckey posts
# them -C receives and exits after as many completions
i=0
for p in "${pids[@]}"; do
	wait "$p"
	rc=$?
	pids[i]=
	log=$logdir/recv$i.log
	((rc == 0)) || fail "receiver $i: $(uroce_rc_text $rc)"
	grep -q '^data transfers complete' "$log" || fail "receiver $i did not complete"
	stats=$(grep '^uroce-stats:' "$log") || fail "receiver $i printed no counters"
	n=$(grep -o ' rx_mcast_pkts=[0-9]*' <<<"$stats" | cut -d= -f2)
	q=$(grep -o ' drop_bad_qkey=[0-9]*' <<<"$stats" | cut -d= -f2)
	((n >= count)) || fail "receiver $i got $n multicast packets, expected $count"
	((q == 0)) || fail "receiver $i dropped $q packets for a wrong Q_Key"
	if bad=$(uroce_log_errors "$log"); then
		fail "receiver $i printed an error:"$'\n'"$bad"
	fi
	i=$((i + 1))
done
pids=()
if bad=$(uroce_log_errors "$logdir/send.log"); then
	fail "sender printed an error:"$'\n'"$bad"
fi
uroce_say "PASS: ${#recvs[@]} receiver(s), $count messages to $group ($(($(date +%s) - start))s)"
exit 0
