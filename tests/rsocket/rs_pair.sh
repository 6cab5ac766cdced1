#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Runs a server and a client on this host through `uroce run` (UROCE_TOOL)
# or our LD_LIBRARY_PATH, and checks both.
#
#   rs_pair.sh [options] -- SERVER ARGS... ::: CLIENT ARGS...
#
# The client starts once the server's output matches --ready (a line the
# server prints after it listens), never after a fixed sleep.
#
# Options:
#   --timeout S          whole test budget (default 60)
#   --ready RE           server output that says it listens (required)
#   --preload            both run with Debian's librspreload.so preloaded
#   --expect-client RE   client output must match RE (repeatable)
#   --expect-server RE   server output must match RE (repeatable)
#   --client-exit N      the client's expected exit status (default 0)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

tmo=60 ready='' preload=0 cexit=0 cexp=() sexp=()
while (($#)); do
	case $1 in
	--timeout) tmo=$2; shift 2 ;;
	--ready) ready=$2; shift 2 ;;
	--preload) preload=1; shift ;;
	--expect-client) cexp+=("$2"); shift 2 ;;
	--expect-server) sexp+=("$2"); shift 2 ;;
	--client-exit) cexit=$2; shift 2 ;;
	--) shift; break ;;
	*) uroce_die "rs_pair.sh: unknown option $1" ;;
	esac
done
[[ -n $ready ]] || uroce_die "rs_pair.sh: --ready is required"
scmd=() ccmd=()
while (($#)) && [[ $1 != ::: ]]; do scmd+=("$1"); shift; done
(($#)) && shift
ccmd=("$@")
((${#scmd[@]} && ${#ccmd[@]})) || uroce_die "rs_pair.sh: need SERVER ::: CLIENT"

for p in "${scmd[0]}" "${ccmd[0]}"; do
	command -v "$p" >/dev/null || uroce_die "$p is not installed (run scripts/setup)"
done
extra=()
if ((preload)); then
	rspreload=$(ldconfig -p | awk '$1 == "librdmacm.so.1" { print $NF; exit }')
	rspreload=$(dirname "${rspreload:-/usr/lib/x86_64-linux-gnu/x}")/rsocket/librspreload.so
	[[ -e $rspreload ]] || uroce_die "$rspreload is not installed (librdmacm1)"
	# after the sanitizer runtime, which must come first
	extra+=("LD_PRELOAD=${UROCE_PRELOAD:+$UROCE_PRELOAD }$rspreload")
fi
mapfile -t launch < <(uroce_launch "${extra[@]}")

logdir=$(mktemp -d "${TMPDIR:-/tmp}/uroce-rs.XXXXXX")
slog=$logdir/server.log clog=$logdir/client.log
deadline=$(( $(date +%s) + tmo ))

"${launch[@]}" timeout "$tmo" "${scmd[@]}" >"$slog" 2>&1 &
spid=$!
cleanup() { kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; rm -rf "$logdir"; }
trap cleanup EXIT

until grep -Eq -- "$ready" "$slog"; do
	if ! kill -0 "$spid" 2>/dev/null; then
		uroce_print_log server "$slog"
		uroce_die "the server exited before it was ready"
	fi
	if (( $(date +%s) >= deadline )); then
		uroce_print_log server "$slog"
		uroce_die "the server printed nothing matching '$ready' in ${tmo}s"
	fi
	sleep 0.05
done

left=$(( deadline - $(date +%s) ))
"${launch[@]}" timeout "$left" "${ccmd[@]}" >"$clog" 2>&1
crc=$?
left=$(( deadline - $(date +%s) + 1 ))
src=0
if ((cexit == 0)); then
	# a server that serves one client exits by itself
	for _ in $(seq $((left * 20))); do
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$spid" 2>/dev/null; then
		src=124
	else
		wait "$spid"
		src=$?
	fi
fi

fail=''
[[ $crc == "$cexit" ]] || fail+="client: $(uroce_rc_text "$crc") (expected exit $cexit); "
[[ $src == 0 ]] || fail+="server: $(uroce_rc_text "$src"); "
for re in "${cexp[@]}"; do
	grep -Eq -- "$re" "$clog" || fail+="client output lacks '$re'; "
done
for re in "${sexp[@]}"; do
	grep -Eq -- "$re" "$slog" || fail+="server output lacks '$re'; "
done
if [[ -n $fail ]]; then
	uroce_print_log server "$slog"
	uroce_print_log client "$clog"
	uroce_die "$fail"
fi
uroce_say "PASS: ${scmd[0]} and ${ccmd[0]}"
