#!/bin/bash
# SPDX-License-Identifier: MIT
#
# One interop scenario: an unmodified client/server RDMA program with one
# side on this host over uroce and the other in the interop guest (vm.sh)
# over the kernel's Soft-RoCE (rxe0).
#
#   scenario.sh --name NAME --server host|guest --kind pingpong|perftest
#               --port TCP_PORT [--timeout SECONDS] [--pairs N]
#               -- PROGRAM [ARGS...]
#   scenario.sh --name NAME --server host|guest --kind rdmacm
#               --port PORT [--timeout SECONDS] [--expect-client RE]
#               [--count-client RE N] [--wait-tcp PORT] [--cm-port PORT]
#               [--server-runs] [--preload]
#               -- SERVER_PROGRAM [ARGS...] ::: CLIENT_PROGRAM [ARGS...]
#
# pingpong/perftest: both sides run "PROGRAM ARGS -p PORT" plus their
# device and GID:
#   host   (uroce)  pingpong: -g 0              perftest: -d uroce0 -x 0
#   guest  (rxe)    pingpong: -d rxe0 -g GIDX   perftest: -d rxe0 -x GIDX
# where GIDX is rxe0's RoCE v2 IPv4-mapped GID (index 0 is the IPv6
# link-local one).  The client also gets the server's address.
# rdmacm: the two command lines as given, with @SADDR@ replaced by the
# server's address and @PORT@ by PORT; the connection manager (our
# librdmacm on the host, the kernel's rdma_cm in the guest) finds the
# device from the address.  The client starts once the server listens:
# on the host our librdmacm says so (UROCE_CM_LISTEN_FILE), in the guest
# the kernel lists the listening cm_id (`rdma res show cm_id`) on PORT
# (or --cm-port, for programs with a fixed port); with --wait-tcp, once
# the server listens on that TCP port instead (@PORT@ allowed).
# --server-runs: the server does not exit on its own (qperf); it is
# stopped once the client is done and only the client's status counts.
# --preload (rdmacm): both sides run with Debian's librspreload.so
# preloaded (rsockets: the host's goes over our librdmacm, the guest's
# over rdma-core's).
# --pairs N (pingpong, perftest): N server/client pairs at once, on ports
# TCP_PORT .. TCP_PORT+N-1; the N host processes share the one tap
# address (docs/shared.md), and every pair is
# checked as one would be.
# The host side binds the tap address (UROCE_ADDR) and prints its
# counters (UROCE_STATS=1).
#
# Checks: both sides exit 0, print none of UROCE_FAIL_RE, and print their
# results (pingpong: "<iters> iters in"; perftest: a results row); and the
# packet accounting: every packet the host sent passed rxe's checks (the
# guest's rcvd_pkts counter, counted only after the ICRC and address
# checks, grew by the host's tx_pkts), unless the tap link itself dropped
# it (counted too).  The scenario's figures are appended to
# $UROCE_INTEROP_STATE/accounting for the final counters test.
#
# Exits 77 (skipped) when the guest could not be started on this machine.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"
vm=$here/vm.sh
state=${UROCE_INTEROP_STATE:-/tmp/uroce-interop}
net=${UROCE_INTEROP_NET:-10.77.0}
tap=${UROCE_INTEROP_TAP:-uroce-tap0}
host_ip=$net.1 guest_ip=$net.2

name='' server='' kind='' port='' tmo=120 wait_tcp='' cm_port=''
expect_re='' count_re='' count_n=0 server_runs=0 pairs=1 preload=0
while (($#)); do
	case $1 in
	--expect-client) expect_re=$2; shift 2 ;;
	--count-client) count_re=$2; count_n=$3; shift 3 ;;
	--wait-tcp) wait_tcp=$2; shift 2 ;;
	--cm-port) cm_port=$2; shift 2 ;;
	--server-runs) server_runs=1; shift ;;
	--preload) preload=1; shift ;;
	--pairs) pairs=$2; shift 2 ;;
	--name) name=$2; shift 2 ;;
	--server) server=$2; shift 2 ;;
	--kind) kind=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	--) shift; break ;;
	*) uroce_die "scenario.sh: unknown option $1" ;;
	esac
done
(($# >= 1)) || uroce_die "scenario.sh: no program given"
[[ $server == host || $server == guest ]] || uroce_die "--server must be host or guest"
[[ $kind == pingpong || $kind == perftest || $kind == rdmacm ]] ||
	uroce_die "--kind must be pingpong, perftest or rdmacm"
[[ $port =~ ^[0-9]+$ ]] || uroce_die "--port needs a number"
[[ $pairs =~ ^[1-9][0-9]*$ && ($pairs == 1 || $kind != rdmacm) ]] ||
	uroce_die "--pairs needs a number, and pingpong or perftest"
wait_tcp=${wait_tcp//@PORT@/$port}
[[ -n $name ]] || name=$1
rsp=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
# PROG loads our libraries (under --preload: librspreload.so loads our
# librdmacm; PROG itself is a plain socket program)
preflight() {
	if ((preload)); then
		command -v "$1" >/dev/null || uroce_die "$1 is not installed (run scripts/setup)"
		[[ -e $rsp ]] || uroce_die "$rsp is not installed (librdmacm1)"
		[[ $(LD_LIBRARY_PATH=$UROCE_LIBDIR ldd "$rsp" |
		     awk '$1 == "librdmacm.so.1" { print $3 }') -ef $UROCE_LIBDIR/librdmacm.so.1 ]] ||
			uroce_die "$rsp would not load $UROCE_LIBDIR/librdmacm.so.1"
	else
		uroce_preflight "$1"
	fi
}
prog=$1; shift
args=("$@")
if [[ $kind == rdmacm ]]; then
	# SERVER ::: CLIENT, with @SADDR@ and @PORT@ filled in
	sargs=() cargs=() seen=0
	[[ $server == host ]] && saddr=$host_ip || saddr=$guest_ip
	for a in "$prog" "${args[@]}"; do
		if [[ $a == ::: ]]; then seen=1; continue; fi
		a=${a//@SADDR@/$saddr}; a=${a//@PORT@/$port}
		if ((seen)); then cargs+=("$a"); else sargs+=("$a"); fi
	done
	((${#sargs[@]} && ${#cargs[@]})) || uroce_die "rdmacm: give SERVER ARGS ::: CLIENT ARGS"
	prog=${sargs[0]}
	preflight "${cargs[0]}"
fi

"$vm" require || exit

preflight "$prog"

logdir=$state/logs/$name
mkdir -p "$logdir"
hlog=$logdir/host.log glog=$logdir/guest.log
: >"$hlog"; : >"$glog"

# rxe0's RoCE v2 IPv4-mapped GID index.
gidx=$("$vm" exec -t 20 -- '
	p=/sys/class/infiniband/rxe0/ports/1
	for f in $p/gids/*; do
		i=${f##*/}
		case $(cat $f) in 0000:0000:0000:0000:0000:ffff:*) ;; *) continue ;; esac
		[ "$(cat $p/gid_attrs/types/$i 2>/dev/null)" = "RoCE v2" ] && { echo $i; break; }
	done') || uroce_die "cannot read rxe0's GID table in the guest"
[[ $gidx =~ ^[0-9]+$ ]] || uroce_die "rxe0 has no RoCE v2 IPv4 GID (got '$gidx')"

case $kind in
pingpong) hargs=(-g 0); gargs=(-d rxe0 -g "$gidx") ;;
perftest) hargs=(-d uroce0 -x 0); gargs=(-d rxe0 -x "$gidx") ;;
rdmacm) ;;
esac

counters() {	# prints "rcvd_pkts sent_pkts"
	"$vm" exec -t 20 -- 'c=/sys/class/infiniband/rxe0/ports/1/hw_counters; echo $(cat $c/rcvd_pkts) $(cat $c/sent_pkts)'
}
tap_tx_dropped() {
	cat "/sys/class/net/$tap/statistics/tx_dropped" 2>/dev/null || echo 0
}
read -r rcvd0 sent0 < <(counters) || uroce_die "cannot read rxe0's counters"
drop0=$(tap_tx_dropped)

mapfile -t penv < <(uroce_prog_env)
penv+=("UROCE_ADDR=$host_ip" "UROCE_STATS=1")
gpre=''
if ((preload)); then
	# (the same Debian path in the guest)
	# (the last one counts)
	penv+=("LD_PRELOAD=$(uroce_rspreload "$rsp")")
	gpre="LD_PRELOAD=$rsp "
fi
# the guest's command line for the pair on port $1 (then the client's
# server address)
quoted_guest() {
	local p=$1
	shift
	printf '%q ' "$prog" "${args[@]}" "${gargs[@]}" -p "$p" "$@"
}
# scmd, ccmd, slog and clog of the pingpong/perftest pair on port $1,
# logging to $2 (host) and $3 (guest)
pair_cmds() {
	local -a host_cmd=(env "${penv[@]}" timeout -k 5 "$tmo" "$prog" "${args[@]}"
			   "${hargs[@]}" -p "$1")
	if [[ $server == host ]]; then
		scmd=("${host_cmd[@]}"); slog=$2
		ccmd=("$vm" exec -t "$tmo" -- "$(quoted_guest "$1" "$host_ip")"); clog=$3
	else
		scmd=("$vm" exec -t "$tmo" -- "$(quoted_guest "$1")"); slog=$3
		ccmd=("${host_cmd[@]}" "$guest_ip"); clog=$2
	fi
}
lfile=$logdir/listening
rm -f "$lfile"
if [[ $kind == rdmacm ]]; then
	if [[ $server == host ]]; then
		scmd=(env "${penv[@]}" "UROCE_CM_LISTEN_FILE=$lfile" timeout -k 5 "$tmo" "${sargs[@]}"); slog=$hlog
		ccmd=("$vm" exec -t "$tmo" -- "$gpre$(printf '%q ' "${cargs[@]}")"); clog=$glog
	else
		scmd=("$vm" exec -t "$tmo" -- "$gpre$(printf '%q ' "${sargs[@]}")"); slog=$glog
		ccmd=(env "${penv[@]}" timeout -k 5 "$tmo" "${cargs[@]}"); clog=$hlog
	fi
else
	pair_cmds "$port" "$hlog" "$glog"
fi

spid=
xspids=() xcpids=()
cleanup() {
	local p
	for p in $spid "${xspids[@]}" "${xcpids[@]}"; do
		if kill -0 "$p" 2>/dev/null; then
			kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null
		fi
	done
	# A guest server left over from a failed run would hold the port.
	if [[ $server == guest ]]; then
		"$vm" exec -t 10 -- "killall $(basename "$prog") 2>/dev/null; true" >/dev/null 2>&1
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
	printf 'FAIL: %s: %s\n' "$name" "$*"
	uroce_print_log "server ($server): ${scmd[*]}" "$slog"
	uroce_print_log "client: ${ccmd[*]}" "$clog"
	"$vm" exec -t 20 -- 'cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep . * | tr "\n" " "; echo; dmesg | tail -n 20' 2>&1 |
		sed 's/^/guest: /'
	exit 1
}

# Wait until the server PID listens on its TCP port (PORT).
wait_listening() {
	local pid=$1 p=$2 deadline=$((SECONDS + 30))
	while :; do
		kill -0 "$pid" 2>/dev/null || { wait "$pid"; fail "the server exited early ($(uroce_rc_text $?))"; }
		if [[ $kind == rdmacm && -z $wait_tcp ]]; then
			if [[ $server == host ]]; then
				[[ -s $lfile ]] && break
			else
				"$vm" exec -t 10 -- "rdma res show cm_id | grep -q 'state LISTEN .*:${cm_port:-$p} '" >/dev/null 2>&1 && break
			fi
		elif [[ $server == host ]]; then
			uroce_port_listening "${wait_tcp:-$p}" && break
		else
			"$vm" exec -t 10 -- "netstat -ltn | grep -q ':${wait_tcp:-$p} '" >/dev/null 2>&1 && break
		fi
		((SECONDS < deadline)) || fail "the server did not listen on port ${wait_tcp:-$p} within 30s"
		sleep 0.2
	done
}

echo "== $name: $server is the server; rxe0 GID index $gidx$( ((pairs == 1)) || echo "; $pairs pairs at once")"
SECONDS=0
# the other pairs (--pairs), started first and run alongside the first
for ((k = 1; k < pairs; k++)); do
	pair_cmds $((port + k)) "$logdir/host.$k.log" "$logdir/guest.$k.log"
	"${scmd[@]}" >"$slog" 2>&1 &
	xspids+=($!)
	wait_listening $! $((port + k))
done
pair_cmds_main() { [[ $kind == rdmacm ]] || pair_cmds "$port" "$hlog" "$glog"; }
pair_cmds_main
"${scmd[@]}" >"$slog" 2>&1 &
spid=$!
wait_listening "$spid" "$port"
for ((k = 1; k < pairs; k++)); do
	pair_cmds $((port + k)) "$logdir/host.$k.log" "$logdir/guest.$k.log"
	"${ccmd[@]}" >"$clog" 2>&1 &
	xcpids+=($!)
done
pair_cmds_main
"${ccmd[@]}" >"$clog" 2>&1
crc=$?
# The server finishes on its own once the client is done (or, with
# --server-runs, is stopped).
if ((server_runs)); then
	cleanup
	src=0
else
	deadline=$((SECONDS + 30))
	while kill -0 "$spid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
	wait "$spid"; src=$?
fi
spid=
elapsed=$SECONDS

((crc == 0)) || fail "the client failed ($(uroce_rc_text $crc))"
((src == 0)) || fail "the server failed ($(uroce_rc_text $src))"
for ((k = 1; k < pairs; k++)); do
	pair_cmds $((port + k)) "$logdir/host.$k.log" "$logdir/guest.$k.log"
	wait "${xcpids[$((k - 1))]}" || fail "pair $k: the client failed ($(uroce_rc_text $?))"
	wait "${xspids[$((k - 1))]}" || fail "pair $k: the server failed ($(uroce_rc_text $?))"
done
xspids=() xcpids=()
# pair_checks SLOG CLOG: the error output and results of one pair; sets
# result (pingpong, perftest)
pair_checks() {
	local f i iters row
	for f in "$1" "$2"; do
		if bad=$(uroce_log_errors "$f"); then
			fail "error output in $(basename "$f"): $(head -n 3 <<<"$bad")"
		fi
	done
	case $kind in
	pingpong)
		iters=100
		for ((i = 0; i < ${#args[@]}; i++)); do
			[[ ${args[$i]} == -n ]] && iters=${args[$((i + 1))]}
		done
		for f in "$1" "$2"; do
			grep -q "^$iters iters in" "$f" || fail "$(basename "$f") has no '$iters iters in' line"
		done
		result=$(grep -h 'iters in' "$2")
		;;
	perftest)
		row=$(awk '/#bytes/ { hdr = 1; next } hdr && $1 ~ /^[0-9]+$/ && NF >= 4 { print; exit }' "$2")
		[[ -n $row ]] || fail "$(basename "$2"): the client printed no results row"
		# (perftest prints zeros when it could not measure its CPU
		# clock, which the emulated guest's does under load: the row
		# then says nothing, and the transfer is judged by the exit
		# statuses and the packet accounting below)
		if ! awk '{ for (i = 3; i <= NF; i++) if ($i + 0 > 0) ok = 1 } END { exit !ok }' <<<"$row"; then
			if grep -qF 'Correlation coefficient r^2' "$2"; then
				echo "note: $(basename "$2"): perftest could not measure its CPU clock; its figures are zero"
			else
				fail "the results row is all zero: $row"
			fi
		fi
		result=$(awk 'NR == 1 { print "bytes=" $1, "iters=" $2, "peak_MB/s=" $3, "avg_MB/s=" $4 }' <<<"$row")
		;;
	esac
}
for ((k = 1; k < pairs; k++)); do
	pair_cmds $((port + k)) "$logdir/host.$k.log" "$logdir/guest.$k.log"
	pair_checks "$slog" "$clog"
done
pair_cmds_main
case $kind in
pingpong | perftest) pair_checks "$slog" "$clog" ;;
rdmacm)
	result=ok
	if [[ -n $expect_re ]]; then
		grep -qE -- "$expect_re" "$clog" || fail "the client printed nothing matching '$expect_re'"
		result=$(grep -E -- "$expect_re" "$clog" | tail -n 1)
	fi
	if [[ -n $count_re ]]; then
		n=$(grep -cE -- "$count_re" "$clog")
		((n == count_n)) || fail "the client printed $n lines matching '$count_re', not $count_n"
		result="$n × '$count_re'"
	fi
	;;
esac

# Packet accounting.
# (perftest's last line has no newline: the stats may follow it.)
# (every host process's, with --pairs: the rxe counters count them all)
htx=0 hrx=0 late=0
for f in "$logdir"/host.*.log "$hlog"; do
	[[ -e $f ]] || continue
	stats=$(grep -ho 'uroce-stats:.*' "$f" | tail -n 1)
	[[ -n $stats ]] || fail "the host side printed no uroce-stats line ($(basename "$f"))"
	stat() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$stats"; }
	htx=$((htx + $(stat tx_pkts))) hrx=$((hrx + $(stat rx_pkts)))
	# the last ACKs a QP sends again as it is destroyed (engine/resp.c)
	# may reach rxe after its QP is gone: dropped there, rightly, as ghosts
	# and so may a tail-loss probe (engine/req.c): it repeats the last
	# packet when its ACK is late, and rxe, having received the first
	# copy, may have destroyed its QP before the probe lands.  (A probe
	# is a copy of a packet rxe accepted: a malformed format shows in
	# the first copies, which this accounting still counts.)
	# The passive side's QP is in RTS when its REP leaves (librdmacm
	# moves it there in rdma_accept, as on hardware), so its first
	# packets can reach rxe's QP while that is still in INIT, waiting
	# for the REP: dropped there, uncounted, then sent again.  Each
	# retransmission (after a NAK or a timeout) answers at least one
	# such loss, and what it resends is the same format rxe accepted.
	f_late=$(stat tx_farewell_acks) f_probes=$(stat tlp_probes)
	f_resent=$(stat retransmits)
	# And what may have met the peer's QP in the error state or
	# destroyed, where rxe drops it uncounted (its check of the QP's
	# state comes before rcvd_pkts): what a QP sent after the last
	# packet it had from its peer (tx_unanswered), and what it never
	# had ACKed when it left RTS (tx_unacked_left: destroyed, or moved
	# to ERR by rdma_disconnect).  A packet may be in two of these
	# terms: the allowance is an upper bound of a few packets a
	# connection, where a format rxe rejects loses every packet of its
	# kind.
	f_left=$(stat tx_unacked_left) f_after=$(stat tx_unanswered)
	late=$((late + ${f_late:-0} + ${f_probes:-0} + ${f_resent:-0} + ${f_left:-0} + ${f_after:-0}))
	for c in drop_bad_icrc drop_bad_hdr drop_bad_src; do
		(($(stat $c) == 0)) || fail "uroce dropped packets from rxe: $c=$(stat $c)"
	done
done
read -r rcvd1 sent1 < <(counters) || fail "cannot read rxe0's counters"
drop1=$(tap_tx_dropped)
grcvd=$((rcvd1 - rcvd0)) gsent=$((sent1 - sent0)) tapdrop=$((drop1 - drop0))
echo "result: $result (${elapsed}s)"
echo "packets: uroce sent $htx, rxe0 accepted $grcvd (tap dropped $tapdrop; $late farewell ACKs, probes, resends and left unacknowledged); rxe0 sent $gsent, uroce received $hrx"
echo "uroce: retransmits=$(stat retransmits) timeouts=$(stat timeouts) duplicates=$(stat duplicates) drop_bad_icrc=$(stat drop_bad_icrc) drop_bad_hdr=$(stat drop_bad_hdr) drop_bad_src=$(stat drop_bad_src) tx_nak_inv=$(stat tx_nak_inv)"
printf '%s %s %s %s %s %s %s\n' "$name" "$htx" "$grcvd" "$tapdrop" "$gsent" "$hrx" "$late" >>"$state/accounting"
((grcvd + tapdrop + late >= htx)) ||
	fail "rxe0 dropped $((htx - grcvd - tapdrop - late)) of the $htx packets uroce sent (bad ICRC, wrong address or malformed: rxe drops them silently before counting rcvd_pkts)"
uroce_say "PASS: $name"
