#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Runs a server and a client of rsockets on this host, through `uroce run`
# (UROCE_TOOL) or our LD_LIBRARY_PATH, and checks both.
#
#   rs_pair.sh --addr IP [options] -- SERVER ARGS... ::: CLIENT ARGS...
#
# @ADDR@ in either command becomes IP.  The client starts once the server
# listens: our librdmacm appends a line to UROCE_CM_LISTEN_FILE at each
# rdma_listen, and an rlisten is one (also under librspreload).
#
# Options:
#   --timeout S          whole test budget (default 60)
#   --preload            both run with Debian's librspreload.so preloaded
#                        (with the sanitizer runtime: uroce_rspreload)
#   --expect-client RE   client output must match RE (repeatable)
#   --expect-server RE   server output must match RE (repeatable)
#   --port PORT          a server that calls no rlisten (datagrams; a
#                        forking server under RDMAV_FORK_SAFE listens on a
#                        kernel socket): it is ready once it has bound PORT
#                        (TCP or UDP) on IP
#   --fork               librspreload's fork mode: its semaphore
#                        (/dev/shm/sem.rsocket_fork), which a run killed
#                        between its children's turns leaves taken, is
#                        removed first (sem_open makes it anew)
#   --env VAR=VALUE      in both environments (repeatable)
#   --server-env VAR=VALUE   in the server's (repeatable; @ADDR@ replaced)
#   --listens N          the server side made exactly N rlistens
#   --server-stays       the server does not end by itself (udpong): it is
#                        stopped once the client passed
#   --file TEXT          TEXT (@ADDR@ replaced) in a file of the test's whose
#                        path replaces @FILE@ in either command (sockperf's
#                        feed file)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

addr='' tmo=60 preload=0 cexp=() sexp=() port='' stays=0 xenv=() senv=() listens=''
ftext=''
while (($#)); do
	case $1 in
	--addr) addr=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	--preload) preload=1; shift ;;
	--fork) rm -f /dev/shm/sem.rsocket_fork; shift ;;
	--expect-client) cexp+=("$2"); shift 2 ;;
	--expect-server) sexp+=("$2"); shift 2 ;;
	--port) port=$2; shift 2 ;;
	--env) xenv+=("$2"); shift 2 ;;
	--server-env) senv+=("$2"); shift 2 ;;
	--listens) listens=$2; shift 2 ;;
	--server-stays) stays=1; shift ;;
	--file) ftext=$2; shift 2 ;;
	--) shift; break ;;
	*) uroce_die "rs_pair.sh: unknown option $1" ;;
	esac
done
[[ -n $addr ]] || uroce_die "rs_pair.sh: --addr is required"
scmd=() ccmd=()
while (($#)) && [[ $1 != ::: ]]; do scmd+=("${1//@ADDR@/$addr}"); shift; done
(($#)) && shift
while (($#)); do ccmd+=("${1//@ADDR@/$addr}"); shift; done
((${#scmd[@]} && ${#ccmd[@]})) || uroce_die "rs_pair.sh: need SERVER ::: CLIENT"
for p in "${scmd[0]}" "${ccmd[0]}"; do
	command -v "$p" >/dev/null || uroce_die "$p is not installed (run scripts/setup)"
done
[[ -e $UROCE_LIBDIR/librdmacm.so.1 ]] ||
	uroce_die "$UROCE_LIBDIR/librdmacm.so.1 does not exist (not built?)"

logdir=$(mktemp -d "${TMPDIR:-/tmp}/uroce-rs.XXXXXX")
slog=$logdir/server.log clog=$logdir/client.log lfile=$logdir/listening
file=$logdir/file
[[ -z $ftext ]] || echo "${ftext//@ADDR@/$addr}" >"$file"
scmd=("${scmd[@]//@FILE@/$file}") ccmd=("${ccmd[@]//@FILE@/$file}")
# a server run as another user writes the listen file there
[[ -z ${UROCE_TEST_USER:-} || $(id -u) -ne 0 ]] || chown "$UROCE_TEST_USER" "$logdir"
env=("${xenv[@]}")
if ((preload)); then
	lib=$(ldconfig -p | awk '$1 == "librdmacm.so.1" { print $NF; exit }')
	rsp=$(dirname "${lib:-/usr/lib/x86_64-linux-gnu/x}")/rsocket/librspreload.so
	[[ -e $rsp ]] || uroce_die "$rsp is not installed (librdmacm1)"
	env+=("LD_PRELOAD=$(uroce_rspreload "$rsp")")
fi
mapfile -t slaunch < <(uroce_launch "${env[@]}" "${senv[@]//@ADDR@/$addr}" \
	"UROCE_CM_LISTEN_FILE=$lfile")
mapfile -t claunch < <(uroce_launch "${env[@]}")
deadline=$(( $(date +%s) + tmo ))
spid=''
cleanup() {
	[[ -n $spid ]] && { kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; }
	rm -rf "$logdir"
}
trap cleanup EXIT
fail() {
	uroce_print_log server "$slog"
	uroce_print_log client "$clog"
	uroce_die "$*"
}

timeout -k 5 "$tmo" "${slaunch[@]}" "${scmd[@]}" >"$slog" 2>&1 &
spid=$!
ready() {
	if [[ -n $port ]]; then
		ss -Hlntu "src $addr:$port" | grep -q .
	else
		[[ -s $lfile ]]
	fi
}
until ready; do
	kill -0 "$spid" 2>/dev/null || fail "the server exited before it listened"
	(( $(date +%s) < deadline )) || fail "the server did not listen in ${tmo}s"
	sleep 0.05
done

left=$(( deadline - $(date +%s) ))
((left > 0)) || left=1
timeout -k 5 "$left" "${claunch[@]}" "${ccmd[@]}" >"$clog" 2>&1
crc=$?
((crc == 0)) || fail "client: $(uroce_rc_text "$crc")"
((stays)) && kill "$spid"
wait "$spid"
src=$?
spid=''
((stays || src == 0)) || fail "server: $(uroce_rc_text "$src")"
for side in server client; do
	# (the counters of UROCE_STATS=1 name failures that did not happen)
	if bad=$(grep -v '^uroce-\(cm-\)\?stats: ' "$logdir/$side.log" |
		 grep -E -m 3 "$UROCE_FAIL_RE"); then
		fail "$side printed an error:"$'\n'"$bad"
	fi
done
if [[ -n $listens ]]; then
	n=$(wc -l <"$lfile" 2>/dev/null || echo 0)
	((n == listens)) || fail "the server side made $n rlistens, not $listens"
fi
for re in "${cexp[@]}"; do
	grep -Eq -- "$re" "$clog" || fail "client output lacks /$re/"
done
for re in "${sexp[@]}"; do
	grep -Eq -- "$re" "$slog" || fail "server output lacks /$re/"
done
uroce_say "PASS: ${scmd[*]} / ${ccmd[*]}"
cat "$clog"
