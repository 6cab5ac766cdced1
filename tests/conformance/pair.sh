#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Runs an unmodified client/server RDMA program as two processes on this
# host over uroce, and checks that both succeeded.
#
#   pair.sh --kind pingpong|perftest|success --port TCP_PORT [--timeout SECONDS]
#           [--client-host HOST] [--clients N] -- PROGRAM [ARGS...]
#
# The server runs "PROGRAM ARGS -p PORT", the client "PROGRAM ARGS -p PORT
# HOST" (default 127.0.0.1, the out-of-band TCP exchange); the RDMA traffic
# itself goes between the two processes' uroce devices.  With UROCE_TOOL
# set both run through `uroce run` (tests/lib/uroce_test.sh, uroce_launch).  --clients N runs
# N clients at once (the server must expect N, e.g. ibv_xsrq_pingpong -c N);
# the checks below apply to each.  Each process gets
# LD_LIBRARY_PATH=$UROCE_LIBDIR and nothing else.
#
# Checks:
#   both  exit 0 within the timeout, and print none of UROCE_FAIL_RE;
#   pingpong  both print "<size*iters*2> bytes in X seconds" and
#             "<iters> iters in X seconds" (-s/-n read from ARGS);
#   success   both print a line "success" (ibv_xsrq_pingpong's only report);
#   perftest  the client prints a results table: a row of numbers under a
#             "#bytes" header, not all zero; with -a, a row for 8388608
#             (4096 for UD).
#
# Logs go to $UROCE_LOG_DIR (default: a temporary directory, removed at
# exit); both are printed on failure, the client's on success.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

kind='' port='' tmo=120 host=127.0.0.1 nclients=1
while (($#)); do
	case $1 in
	--kind) kind=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	--client-host) host=$2; shift 2 ;;
	--clients) nclients=$2; shift 2 ;;
	--) shift; break ;;
	*) uroce_die "pair.sh: unknown option $1" ;;
	esac
done
(($# >= 1)) || uroce_die "pair.sh: no program given"
[[ $kind == pingpong || $kind == perftest || $kind == success ]] ||
	uroce_die "pair.sh: --kind must be pingpong, perftest or success"
[[ $port =~ ^[0-9]+$ ]] || uroce_die "pair.sh: --port needs a number"
prog=$1; shift
args=("$@")

uroce_preflight "$prog"

logdir=${UROCE_LOG_DIR:-}
if [[ -z $logdir ]]; then
	logdir=$(mktemp -d "${TMPDIR:-/tmp}/uroce-pair.XXXXXX")
	trap_rm=$logdir
fi
mkdir -p "$logdir"
slog=$logdir/server.log clog=$logdir/client.log
: >"$slog"; : >"$clog"

# the words that start a program: env K=V..., or through `uroce run`
mapfile -t penv < <(uroce_launch)
spid='' cpids=()
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
	local p
	for p in "${cpids[@]}"; do
		kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	if [[ -n $spid ]] && kill -0 "$spid" 2>/dev/null; then
		# timeout(1) passes the signal on, and SIGKILLs after -k.
		kill -TERM "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
	fi
	if [[ -n ${trap_rm:-} ]]; then rm -rf "$trap_rm"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
	printf 'FAIL: %s\n' "$*"
	uroce_print_log "server: ${scmd[*]}" "$slog"
	uroce_print_log "client: ${ccmd[*]}" "$clog"
	for ((i = 2; i <= nclients; i++)); do
		uroce_print_log "client$i" "$logdir/client$i.log"
	done
	exit 1
}

scmd=("$prog" "${args[@]}" -p "$port")
ccmd=("$prog" "${args[@]}" -p "$port" "$host")

if uroce_port_listening "$port"; then
	ss -Hltnp "sport = :$port" || true
	fail "TCP port $port is already in use by another process"
fi

start=$(date +%s)
uroce_say "server: ${penv[*]} ${scmd[*]}"
timeout -k 5 "$tmo" "${penv[@]}" "${scmd[@]}" >"$slog" 2>&1 &
spid=$!

uroce_wait_listen "$spid" "$port" $((start + tmo))
case $? in
0) ;;
1) wait "$spid"; src=$?; spid=
   fail "server exited ($(uroce_rc_text $src)) before listening on port $port" ;;
*) fail "server did not listen on port $port within ${tmo}s" ;;
esac

# The client gets what is left of the same budget, so that a hang in
# either process ends the test within --timeout (plus the kill grace).
left=$((start + tmo - $(date +%s)))
((left > 0)) || left=1
uroce_say "client: ${penv[*]} ${ccmd[*]}"
# clients 2..N in the background, client 1 here
sides=(server client)
for ((i = 2; i <= nclients; i++)); do
	timeout -k 5 "$left" "${penv[@]}" "${ccmd[@]}" \
		>"$logdir/client$i.log" 2>&1 &
	cpids+=($!)
	sides+=("client$i")
done
timeout -k 5 "$left" "${penv[@]}" "${ccmd[@]}" >"$clog" 2>&1
crc=$?
for ((i = 0; i < ${#cpids[@]}; i++)); do
	wait "${cpids[i]}"
	rc=$?
	cpids[i]=
	((rc == 0)) || fail "client$((i + 2)): $(uroce_rc_text $rc)"
done
cpids=()
wait "$spid"
src=$?
spid=

((crc == 0)) || fail "client: $(uroce_rc_text $crc)"
((src == 0)) || fail "server: $(uroce_rc_text $src)"

for side in "${sides[@]}"; do
	log=$logdir/$side.log
	if bad=$(uroce_log_errors "$log"); then
		fail "$side printed an error:"$'\n'"$bad"
	fi
done

# The value given to option OPT in ARGS, or DEFAULT.
argval() {
	local opt=$1 def=$2 i
	for ((i = 0; i < ${#args[@]}; i++)); do
		if [[ ${args[i]} == "$opt" ]] && ((i + 1 < ${#args[@]})); then
			def=${args[i + 1]}
		fi
	done
	printf '%s\n' "$def"
}

has_arg() {
	local a
	for a in "${args[@]}"; do [[ $a == "$1" ]] && return 0; done
	return 1
}

case $kind in
pingpong)
	size=$(argval -s 4096)
	iters=$(argval -n 1000)
	bytes=$((size * iters * 2))
	for side in server client; do
		log=$logdir/$side.log
		grep -Eq "^$bytes bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec" "$log" ||
			fail "$side did not report '$bytes bytes in ... seconds'"
		grep -Eq "^$iters iters in [0-9.]+ seconds = [0-9.]+ usec/iter" "$log" ||
			fail "$side did not report '$iters iters in ... seconds'"
	done
	;;
success)
	for side in "${sides[@]}"; do
		grep -qx success "$logdir/$side.log" ||
			fail "$side did not report 'success'"
	done
	;;
perftest)
	# Rows after the "#bytes" header: bytes, iterations, then figures.
	rows=$(awk '/#bytes/ { t = 1; next }
		    t && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9.]+$/' "$clog")
	[[ -n $rows ]] || fail "client printed no results table"
	nonzero=$(awk '{ for (i = 3; i <= NF; i++) if ($i + 0 > 0) { print; next } }' <<<"$rows")
	[[ -n $nonzero ]] || fail "client results are all zero:"$'\n'"$rows"
	if has_arg -a; then
		# UD messages end at the MTU (4096 here); others go to 8 MiB
		last=8388608
		[ "$(argval -c RC)" = UD ] && last=4096
		grep -Eq "^[[:space:]]*$last[[:space:]]" <<<"$rows" ||
			fail "client ran -a but printed no row for $last bytes"
	fi
	;;
esac

uroce_say "PASS: ${scmd[*]} ($(($(date +%s) - start))s)"
cat "$clog"
exit 0
