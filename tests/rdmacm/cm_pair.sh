#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Runs an rdma_cm server and client, two processes on this host over our
# librdmacm.so.1 + libibverbs.so.1, and checks both.
#
#   cm_pair.sh --addr IP [options] -- SERVER ARGS... ::: CLIENT ARGS...
#
# @ADDR@ in either command becomes IP, the server's address.  The server
# is started first with UROCE_CM_LISTEN_FILE set: our librdmacm appends a
# line there when rdma_listen succeeds, and the runner waits (bounded) for
# it (or, with --wait-tcp, for a TCP port), then runs the client.
#
# Options:
#   --timeout S            whole test budget (default 120)
#   --server-env K=V       extra environment of the server (repeatable)
#   --client-env K=V       extra environment of the client (repeatable)
#   --expect-client RE     client output must match RE (repeatable)
#   --expect-server RE     server output must match RE (repeatable)
#   --count-client RE N    client output has at least N lines matching RE
#   --client-fails         the client must fail cleanly: exit 1..123, no
#                          crash, no hang (no retries); the server may be
#                          left running and is stopped
#   --skip-if-taken        exit 77 (skip) if IP:4791 is taken before we start
#   --wait-tcp PORT        wait for the server to listen on TCP PORT instead
#                          (qperf opens its device only when a client comes)
#   --server-exit N        the server's expected exit status (default 0)
#   --server-runs          the server need not exit by itself (qperf): it
#                          is stopped after the client, and passes if it
#                          was still alive
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

addr='' tmo=120 client_fails=0 server_runs=0 sexit=0 skip_taken=0 wait_tcp=''
senv=() cenv=() cexp=() sexp=() ccount=()
while (($#)); do
	case $1 in
	--addr) addr=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	--server-env) senv+=("$2"); shift 2 ;;
	--client-env) cenv+=("$2"); shift 2 ;;
	--expect-client) cexp+=("$2"); shift 2 ;;
	--expect-server) sexp+=("$2"); shift 2 ;;
	--count-client) ccount+=("$2" "$3"); shift 3 ;;
	--client-fails) client_fails=1; shift ;;
	--server-runs) server_runs=1; shift ;;
	--server-exit) sexit=$2; shift 2 ;;
	--skip-if-taken) skip_taken=1; shift ;;
	--wait-tcp) wait_tcp=$2; shift 2 ;;
	--) shift; break ;;
	*) uroce_die "cm_pair.sh: unknown option $1" ;;
	esac
done
[[ -n $addr ]] || uroce_die "cm_pair.sh: --addr is required"
scmd=() ccmd=()
senv=("${senv[@]//@ADDR@/$addr}") cenv=("${cenv[@]//@ADDR@/$addr}")
while (($#)) && [[ $1 != ::: ]]; do scmd+=("${1//@ADDR@/$addr}"); shift; done
(($#)) && shift
while (($#)); do ccmd+=("${1//@ADDR@/$addr}"); shift; done
((${#scmd[@]} && ${#ccmd[@]})) || uroce_die "cm_pair.sh: need SERVER ::: CLIENT"

[[ -e $UROCE_LIBDIR/librdmacm.so.1 ]] ||
	uroce_die "$UROCE_LIBDIR/librdmacm.so.1 does not exist (not built?)"
uroce_preflight "${scmd[0]}"
uroce_preflight "${ccmd[0]}"
# both programs must pick our librdmacm, not Debian's
for p in "${scmd[0]}" "${ccmd[0]}"; do
	got=$(LD_LIBRARY_PATH=$UROCE_LIBDIR ldd "$(command -v "$p")" |
	      awk '$1 == "librdmacm.so.1" { print $3 }')
	if [[ -n $got && $(realpath "$got") != $(realpath "$UROCE_LIBDIR/librdmacm.so.1") ]]; then
		uroce_die "$p would load librdmacm.so.1 from $got"
	fi
done

logdir=${UROCE_LOG_DIR:-}
if [[ -z $logdir ]]; then
	logdir=$(mktemp -d "${TMPDIR:-/tmp}/uroce-cm.XXXXXX")
	trap_rm=$logdir
fi
mkdir -p "$logdir"
slog=$logdir/server.log clog=$logdir/client.log
: >"$slog"; : >"$clog"
[[ -z ${UROCE_TOOL:-} ]] || uroce_run_preflight

spid=
cleanup() {
	if [[ -n $spid ]] && kill -0 "$spid" 2>/dev/null; then
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
	exit 1
}

owns_addr() {
	ss -Huan "sport = :4791" 2>/dev/null | awk '{ print $4 }' |
		grep -Fqx -e "$addr:4791" -e "[$addr]:4791"
}

if owns_addr; then
	if ((skip_taken)); then
		echo "SKIP: another process owns UDP $addr:4791"
		exit 77
	fi
	fail "UDP $addr:4791 is already taken by another process"
fi

lfile=$logdir/listening
rm -f "$lfile"
senv+=("UROCE_CM_LISTEN_FILE=$lfile")
# a server run as another user writes the listen file there
[[ -z ${UROCE_TEST_USER:-} || $(id -u) -ne 0 ]] || chown "$UROCE_TEST_USER" "$logdir"
mapfile -t slaunch < <(uroce_launch "${senv[@]}")
mapfile -t claunch < <(uroce_launch "${cenv[@]}")
start=$(date +%s)
deadline=$((start + tmo))
uroce_say "server: ${slaunch[*]} ${scmd[*]}"
timeout -k 5 "$tmo" "${slaunch[@]}" "${scmd[@]}" >"$slog" 2>&1 &
spid=$!

ready() {
	if [[ -n $wait_tcp ]]; then uroce_port_listening "$wait_tcp"; else [[ -s $lfile ]]; fi
}

while ! ready; do
	if ! kill -0 "$spid" 2>/dev/null; then
		wait "$spid"; src=$?; spid=
		fail "server exited ($(uroce_rc_text $src)) before listening"
	fi
	(($(date +%s) < deadline)) || fail "server did not listen within ${tmo}s"
	sleep 0.05
done

attempt=0
while :; do
	attempt=$((attempt + 1))
	left=$((deadline - $(date +%s)))
	((left > 0)) || left=1
	uroce_say "client (attempt $attempt): ${claunch[*]} ${ccmd[*]}"
	timeout -k 5 "$left" "${claunch[@]}" "${ccmd[@]}" >"$clog" 2>&1
	crc=$?
	((crc == 0 || client_fails)) && break
	((attempt < 1)) || break	# no retries: the listen file says when
	((crc == 124 || crc == 137)) && break
	kill -0 "$spid" 2>/dev/null || break
	cat "$clog"
	sleep 0.3
done

if ((client_fails)); then
	if ((crc == 0)); then fail "client succeeded, expected a clean failure"; fi
	if ((crc == 124 || crc == 126 || crc == 127 || (crc > 128 && crc < 160))); then fail "client did not fail cleanly: $(uroce_rc_text $crc)"; fi
	if grep -Eq 'Sanitizer|Segmentation fault|core dumped|Aborted' "$clog"; then
		fail "client crashed"
	fi
	kill -TERM "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	spid=
else
	((crc == 0)) || fail "client: $(uroce_rc_text $crc)"
	if ((server_runs)); then
		kill -0 "$spid" 2>/dev/null || fail "server died"
		kill -TERM "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
	else
		wait "$spid"
		src=$?
		((src == sexit)) || { spid=; fail "server: $(uroce_rc_text $src), expected exit $sexit"; }
	fi
	spid=
	for side in server client; do
		if bad=$(uroce_log_errors "$logdir/$side.log"); then
			fail "$side printed an error:"$'\n'"$bad"
		fi
	done
fi

for re in "${cexp[@]}"; do
	grep -Eq -- "$re" "$clog" || fail "client output does not match /$re/"
done
for re in "${sexp[@]}"; do
	grep -Eq -- "$re" "$slog" || fail "server output does not match /$re/"
done
for ((i = 0; i < ${#ccount[@]}; i += 2)); do
	n=$(grep -Ec -- "${ccount[i]}" "$clog")
	((n >= ccount[i + 1])) ||
		fail "client printed $n lines matching /${ccount[i]}/, expected ${ccount[i + 1]}"
done

uroce_say "PASS: ${scmd[*]} / ${ccmd[*]} ($(($(date +%s) - start))s)"
cat "$clog"
exit 0
