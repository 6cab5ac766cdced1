#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Application throughput for bench/run's `apps` case (issue 22): the
# programs of tests/apps, started the same way (tests/apps/lib.sh), timed
# instead of checked.  One result a line on stdout, for the driver
# (bench/uroce_bench/apps.py) to parse:
#
#   apps.sh iser --sizes "65536 262144" --seconds S --rounds R --place P
#	apps-bench: iser PLACE SIZE TRANSPORT rc=N iops=N mbs=N
#     tgtd (an iSCSI portal and an iSER portal, one LUN file on tmpfs) and
#     libiscsi's iscsi-perf reading it for S seconds at each SIZE, over
#     iscsi:// (TCP, no uroce) and then over iser:// (under uroce run),
#     round after round.  PLACE: host (tgtd and the initiator in one
#     namespace, 127.0.0.1), 2ns (tgtd and the initiator in two
#     namespaces joined by veth, MTU 1500) or 2ns-9000 (the same at MTU
#     9000).  mbs: bytes per second / 10^6, from iscsi-perf's average
#     IOPS times SIZE.
#
#   apps.sh gloo --prog GLOO_COLL --ranks N --bytes B --iters I --rounds R
#	apps-bench: gloo RANKS BYTES TRANSPORT rc=N iters=N s=T aborts=N
#     N ranks of tests/apps/gloo_coll -b B in one namespace, over gloo's
#     TCP transport and then its ibverbs transport (under uroce run); s is
#     the slowest rank's time for I ring allreduces, rc the worst exit
#     status, aborts the ranks that died in gloo's "Destructing buffer
#     expecting completions" (gloo_coll drains before it destroys an
#     algorithm, so any is a failure: docs/apps.md, "gloo: why the
#     program drains").
#
#   --transports LIST (both commands): the default ("tcp iser", "tcp
#   ibverbs") or one of them alone, to profile one side.
#
# Needs root (namespaces, tgtd's control socket in a mount namespace of
# its own); exits 77 when it or a program is missing.  Environment:
# UROCE_TOOL (bin/uroce), UROCE_LIBDIR (where our libibverbs.so.1 is).
set -u

what=${1:-}
shift
sizes='65536 262144 1048576' seconds=2 rounds=1 place=host transports=''
prog='' ranks=2 bytes=$((4 << 20)) iters=10
while [ $# -gt 0 ]; do
	case $1 in
	--sizes) sizes=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--place) place=$2; shift 2 ;;
	--transports) transports=$2; shift 2 ;;
	--prog) prog=$2; shift 2 ;;
	--ranks) ranks=$2; shift 2 ;;
	--bytes) bytes=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	*) echo "apps.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
if [ "$(id -u)" -ne 0 ]; then
	echo "apps.sh: SKIP: needs root"
	exit 77
fi

case $what in
iser)
	for p in tgtd tgtadm iscsi-perf; do
		command -v "$p" >/dev/null ||
			{ echo "apps.sh: SKIP: $p is not installed"; exit 77; }
	done
	case $place in
	host) net=10.81.90 ;;
	2ns) net=10.81.91 ;;
	2ns-9000) net=10.81.93 apps_mtu=9000 ;;
	*) echo "apps.sh: --place host|2ns|2ns-9000" >&2; exit 2 ;;
	esac
	if [ -z "${APPS_OWN_MOUNTS:-}" ]; then
		APPS_OWN_MOUNTS=1 exec unshare -m --propagation private "$0" \
			iser --sizes "$sizes" --seconds "$seconds" \
			--rounds "$rounds" --place "$place" --transports "$transports"
	fi
	mkdir -p /run/tgtd && mount -t tmpfs -o mode=0755 tgtd /run/tgtd ||
		{ echo "apps.sh: cannot mount a tmpfs on /run/tgtd"; exit 1; }
	name=bench-iser-$place
	: "${transports:=tcp iser}"
	;;
gloo)
	[ -x "$prog" ] || { echo "apps.sh: SKIP: no gloo_coll ('$prog')"; exit 77; }
	net=10.81.92 name=bench-gloo-$ranks
	: "${transports:=tcp ibverbs}"
	;;
*)
	echo "usage: apps.sh iser|gloo [options] (see the head of the script)" >&2
	exit 2
	;;
esac

# shellcheck source=tests/apps/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/apps/lib.sh"
apps_up

iser() {
	local IQN=iqn.2026-01.org.uroce INIT=iqn.2026-01.org.uroce:initiator
	local ini taddr lun r s t rc line iops url
	local -a topts iopts cmd
	if [ "$place" != host ]; then
		ini=B taddr=$addrA topts=(--ifname vA) iopts=(--ifname vB)
	else
		ini=A taddr=127.0.0.1 topts=(--addr 127.0.0.1) iopts=()
	fi
	lun=$(mktemp -d /dev/shm/uroce_bench_lun.XXXXXX) || fail "mktemp"
	scratch+=("$lun")
	# every page of the LUN allocated in tmpfs (a sparse file reads holes)
	dd if=/dev/zero of="$lun/lun" bs=1M count=256 status=none || fail "dd"
	urun A "${topts[@]}" -- tgtd -f >"$work/tgtd.log" 2>&1 &
	tgtd_pid=$!
	pids+=("$tgtd_pid")
	hard_pids+=("$tgtd_pid")
	wait_for 20 "$tgtd_pid" test -S /run/tgtd/socket.0 ||
		fail "tgtd did not open its control socket"
	for t in 1:iscsi 2:iser; do
		local tid=${t%%:*} lld=${t#*:}
		tgtadm --lld "$lld" --op new --mode target --tid "$tid" \
			-T "$IQN:bench-$lld" &&
		tgtadm --lld "$lld" --op new --mode logicalunit --tid "$tid" \
			--lun 1 -b "$lun/lun" &&
		tgtadm --lld "$lld" --op bind --mode target --tid "$tid" -I ALL ||
			fail "tgtadm: target $t"
	done
	tgtadm --lld iser --op bind --mode target --tid 2 -Q "$INIT" ||
		fail "tgtadm: iser ACL"
	for ((r = 0; r < rounds; r++)); do
		for s in $sizes; do
			for t in $transports; do
				cmd=(iscsi-perf -i "$INIT" -t "$seconds" -b $((s / 512)))
				if [ "$t" = tcp ]; then
					url=iscsi://$taddr/$IQN:bench-iscsi/1
					timeout -k 5 $((seconds + 30)) ip netns exec \
						"$(ns_of "$ini")" "${cmd[@]}" "$url"
				else
					url=iser://$taddr/$IQN:bench-iser/1
					(urun -t $((seconds + 30)) "$ini" "${iopts[@]}" \
						-- "${cmd[@]}" "$url")
				fi >"$work/perf.log" 2>&1
				rc=$?
				# "\riops average N (M MB/s)" is its last word
				line=$(tr '\r' '\n' <"$work/perf.log" |
					grep -o 'iops average [0-9]* ([0-9]* MB/s) *$' | tail -n 1)
				iops=$(echo "$line" | awk '{ print $3 }')
				echo "apps-bench: iser $place $s $t rc=$rc iops=${iops:-0}" \
					"mbs=$(( ${iops:-0} * s / 1000000 ))"
				if [ -z "$iops" ] || [ $rc -ne 0 ]; then
					echo "apps-bench: iser $place $s $t said:" \
						"$(tr '\r' '\n' <"$work/perf.log" | grep -v -e '^ *$' -e 'apps.sh: line' |
						   tail -n 3 | tr '\n' '|')"
				fi
			done
		done
	done
	alive "$tgtd_pid" || echo "apps-bench: iser $place tgtd died: $(tail -n 3 "$work/tgtd.log")"
}

gloo() {
	local r t rc worst s slow aborts
	local -a rp
	for ((k = 0; k < rounds; k++)); do
		for t in $transports; do
			rm -rf "$work/store" && mkdir "$work/store" || fail "mkdir"
			rp=()
			for ((r = 0; r < ranks; r++)); do
				if [ "$t" = tcp ]; then
					timeout -k 5 120 ip netns exec "$nsA" "$prog" \
						"$r" "$ranks" "$work/store" -t tcp \
						-b "$bytes" -n "$iters" >"$work/rank$r.log" 2>&1 &
				else
					urun -t 120 A -- "$prog" "$r" "$ranks" "$work/store" \
						-b "$bytes" -n "$iters" >"$work/rank$r.log" 2>&1 &
				fi
				rp+=($!)
			done
			worst=0 slow='' aborts=0
			for ((r = 0; r < ranks; r++)); do
				wait "${rp[$r]}"
				rc=$?
				((rc > worst)) && worst=$rc
				grep -q 'Destructing buffer expecting completions' \
					"$work/rank$r.log" && aborts=$((aborts + 1))
				s=$(grep -o "rank $r bench .* iters [0-9.]* s" "$work/rank$r.log" |
					awk '{ print $(NF - 1) }')
				if [ -z "$s" ]; then
					slow=none
				elif [ "$slow" != none ] &&
				     { [ -z "$slow" ] || awk -v a="$s" -v b="$slow" 'BEGIN { exit !(a > b) }'; }; then
					slow=$s
				fi
			done
			echo "apps-bench: gloo $ranks $bytes $t rc=$worst iters=$iters" \
				"s=${slow:-none} aborts=$aborts"
			if [ "$worst" -ne 0 ]; then
				echo "apps-bench: gloo $ranks $bytes $t said:" \
					"$(cat "$work"/rank*.log | grep -v '^ *$' | grep -v uroce-stats | tail -n 3 | tr '\n' '|')"
			fi
		done
	done
}

"$what"
pids=()
