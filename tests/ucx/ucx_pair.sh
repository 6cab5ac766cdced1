#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Debian's ucx_perftest (ucx-utils) over uroce: a server and a client
# process on this host, UCX's rc_verbs and ud_verbs transports on our
# device.  Both must exit 0 and the client must print its "Final:" row
# with a non-zero message rate.
#
#   ucx_pair.sh --port TCP_PORT [--timeout S] [--env K=V]... -- ARGS...
#
# The server runs "ucx_perftest ARGS -p PORT", the client the same with
# 127.0.0.1 (UCX's own TCP exchange); --env goes to both.
#
# Both run through `uroce run`, which gives UCX the /dev/infiniband node
# it looks for (uroce_launch, tests/lib); as UROCE_TEST_USER if set.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

port='' tmo=120 envs=()
while (($#)); do
	case $1 in
	--port) port=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	--env) envs+=("$2"); shift 2 ;;
	--) shift; break ;;
	*) uroce_die "unknown option $1" ;;
	esac
done
[[ -n $port && $# -gt 0 ]] || uroce_die "usage: $0 --port P [--timeout S] [--env K=V]... -- ARGS..."
command -v ucx_perftest >/dev/null || { echo "SKIP: ucx_perftest not installed (ucx-utils)"; exit 77; }
if [[ -n "${UROCE_PRELOAD:-}" ]]; then
	# UCX's memory hooks (libucm) patch the allocator a preloaded
	# sanitizer runtime owns
	echo "SKIP: UCX under a sanitizer runtime"
	exit 77
fi

uroce_run_preflight
uroce_run_needs_dev
uroce_ucx_preflight
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
mapfile -t launch < <(uroce_launch "${envs[@]}")
deadline=$(( $(date +%s) + tmo ))

timeout "$tmo" "${launch[@]}" ucx_perftest "$@" -p "$port" \
	>"$logs/server" 2>&1 &
spid=$!
uroce_wait_listen "$spid" "$port" "$deadline" || {
	uroce_print_log server "$logs/server"
	uroce_die "the server did not listen on TCP $port"
}
left=$(( deadline - $(date +%s) ))
timeout "$left" "${launch[@]}" ucx_perftest 127.0.0.1 "$@" \
	-p "$port" >"$logs/client" 2>&1
crc=$?
wait "$spid"
src=$?

fail=''
((crc == 0)) || fail+="client: $(uroce_rc_text $crc); "
((src == 0)) || fail+="server: $(uroce_rc_text $src); "
# Final: iterations, latency x3, bandwidth x2, message rate x2
awk '$1 == "Final:" && $2 > 0 && $NF > 0 { ok = 1 } END { exit !ok }' \
	"$logs/client" || fail+="no Final: row with a message rate; "
if uroce_log_errors "$logs/client" "$logs/server" >/dev/null ||
   grep -Eq "UCX +ERROR" "$logs/client" "$logs/server"; then
	fail+="errors in the logs; "
fi
if [[ -n $fail ]]; then
	uroce_print_log server "$logs/server"
	uroce_print_log client "$logs/client"
	uroce_die "$fail"
fi
grep -E "^ *(\+|\||Final:)" "$logs/client" | tail -n 4
uroce_say "PASS: ucx_perftest $*"
