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
# UCX (1.13) lists an IB device only if /dev/infiniband/<dev_name> is a
# character device it may read and write (uct_ib_device_is_accessible);
# it never opens it, all goes through libibverbs.  uroce has no kernel
# device, so as root the test runs in a mount namespace of its own with a
# tmpfs on /dev/infiniband holding uverbs0 as a node like /dev/null's:
# the host's /dev is left as it was (but for an empty /dev/infiniband
# directory if there was none).  Not root and no such node: skip (77).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

port='' tmo=120 envs=()
orig=("$@")
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

node=/dev/infiniband/uverbs0
if [[ -z "${UROCE_UCX_NS:-}" ]] && ! [[ -c $node && -r $node && -w $node ]]; then
	if [[ $(id -u) -ne 0 ]] || ! command -v unshare >/dev/null; then
		echo "SKIP: UCX needs $node (a character device) and this is not root"
		exit 77
	fi
	mkdir -p /dev/infiniband || uroce_die "cannot create /dev/infiniband"
	exec unshare --mount --propagation private env UROCE_UCX_NS=1 \
		bash "${BASH_SOURCE[0]}" "${orig[@]}"
fi
if [[ -n "${UROCE_UCX_NS:-}" ]]; then
	mount -t tmpfs -o size=64k,mode=755 uroce-ucx /dev/infiniband &&
	mknod -m 666 "$node" c 1 3 || uroce_die "cannot make $node in the namespace"
fi

# ucx_perftest loads libibverbs through UCX's IB module, not itself
uct=$(ldd "$(command -v ucx_perftest)" | awk '$1 == "libuct.so.0" { print $3 }')
uct_ib=${uct:+$(dirname "$uct")/ucx/libuct_ib.so.0}
[[ -n $uct_ib && -e $uct_ib ]] ||
	uroce_die "UCX's IB module (ucx/libuct_ib.so.0) is not installed"
got=$(LD_LIBRARY_PATH="$UROCE_LIBDIR" ldd "$uct_ib" |
      awk '$1 == "libibverbs.so.1" { print $3 }')
[[ -n $got && "$(realpath "$got")" == "$(realpath "$UROCE_LIBDIR/libibverbs.so.1")" ]] ||
	uroce_die "$uct_ib would load libibverbs.so.1 from '$got', not $UROCE_LIBDIR"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
mapfile -t penv < <(uroce_prog_env)
deadline=$(( $(date +%s) + tmo ))

env "${penv[@]}" "${envs[@]}" timeout "$tmo" ucx_perftest "$@" -p "$port" \
	>"$logs/server" 2>&1 &
spid=$!
uroce_wait_listen "$spid" "$port" "$deadline" || {
	uroce_print_log server "$logs/server"
	uroce_die "the server did not listen on TCP $port"
}
left=$(( deadline - $(date +%s) ))
env "${penv[@]}" "${envs[@]}" timeout "$left" ucx_perftest 127.0.0.1 "$@" \
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
if grep -Eq "$UROCE_FAIL_RE|UCX +ERROR" "$logs/client" "$logs/server"; then
	fail+="errors in the logs; "
fi
if [[ -n $fail ]]; then
	uroce_print_log server "$logs/server"
	uroce_print_log client "$logs/client"
	uroce_die "$fail"
fi
grep -E "^ *(\+|\||Final:)" "$logs/client" | tail -n 4
uroce_say "PASS: ucx_perftest $*"
