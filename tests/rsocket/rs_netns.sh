#!/bin/bash
# SPDX-License-Identifier: MIT
#
# An rsocket server and client on two hosts: network namespaces joined by
# a veth pair (tests/lib/netns.sh), so that the connection goes over UDP,
# not the same-host path.
#
#   rs_netns.sh NAME [--preload] [--mtu N] [--expect-client RE]...
#               -- SERVER ARGS... ::: CLIENT ARGS...
#
# @ADDR@ becomes the server's address.  The client starts when the
# server's rdma_listen is seen (UROCE_CM_LISTEN_FILE), or with --port PORT
# (a datagram server) once the server's UDP PORT is bound; --server-stays:
# the server does not end by itself (udpong) and is stopped once the
# client passed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"
# shellcheck source=tests/lib/netns.sh
source "$here/../lib/netns.sh"

name=$1
shift
preload=0 mtu='' tmo=60 cexp=() port='' stays=0
while (($#)); do
	case $1 in
	--preload) preload=1; shift ;;
	--mtu) mtu=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	--expect-client) cexp+=("$2"); shift 2 ;;
	--port) port=$2; shift 2 ;;
	--server-stays) stays=1; shift ;;
	--) shift; break ;;
	*) uroce_die "rs_netns.sh: unknown option $1" ;;
	esac
done
nsA=uroce-rs-$name-a nsB=uroce-rs-$name-b
addrA=10.78.$((RANDOM % 200 + 20)).1
addrB=${addrA%.1}.2
pids=()
logdir=$(mktemp -d "${TMPDIR:-/tmp}/uroce-rsns.XXXXXX")
slog=$logdir/server.log clog=$logdir/client.log lfile=$logdir/listening
fail() {
	uroce_print_log server "$slog"
	uroce_print_log client "$clog"
	uroce_die "$*"
}
trap 'netns_cleanup; rm -rf "$logdir"' EXIT
trap 'exit 130' INT TERM

scmd=() ccmd=()
while (($#)) && [[ $1 != ::: ]]; do scmd+=("${1//@ADDR@/$addrA}"); shift; done
(($#)) && shift
while (($#)); do ccmd+=("${1//@ADDR@/$addrA}"); shift; done
((${#scmd[@]} && ${#ccmd[@]})) || uroce_die "rs_netns.sh: need SERVER ::: CLIENT"

netns_up "rs_netns[$name]" $mtu
[[ -z ${UROCE_TEST_USER:-} || $(id -u) -ne 0 ]] || chown "$UROCE_TEST_USER" "$logdir"
env=()
if ((preload)); then
	lib=$(ldconfig -p | awk '$1 == "librdmacm.so.1" { print $NF; exit }')
	rsp=$(dirname "${lib:-/usr/lib/x86_64-linux-gnu/x}")/rsocket/librspreload.so
	[[ -e $rsp ]] || uroce_die "$rsp is not installed (librdmacm1)"
	env+=("LD_PRELOAD=$(uroce_rspreload "$rsp")")
fi
mapfile -t slaunch < <(uroce_launch "${env[@]}" "UROCE_CM_LISTEN_FILE=$lfile" "UROCE_ADDR=$addrA")
mapfile -t claunch < <(uroce_launch "${env[@]}" "UROCE_ADDR=$addrB")
deadline=$(( $(date +%s) + tmo ))

ip netns exec "$nsA" timeout -k 5 "$tmo" "${slaunch[@]}" "${scmd[@]}" >"$slog" 2>&1 &
spid=$!
pids+=("$spid")
ready() {
	if [[ -n $port ]]; then
		ip netns exec "$nsA" ss -Hlntu "sport = :$port" | grep -q .
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
ip netns exec "$nsB" timeout -k 5 "$left" "${claunch[@]}" "${ccmd[@]}" >"$clog" 2>&1
crc=$?
((crc == 0)) || fail "client: $(uroce_rc_text "$crc")"
((stays)) && kill "$spid"
wait "$spid"
src=$?
pids=()
((stays || src == 0)) || fail "server: $(uroce_rc_text "$src")"
for side in server client; do
	if bad=$(grep -E -m 3 "$UROCE_FAIL_RE" "$logdir/$side.log"); then
		fail "$side printed an error:"$'\n'"$bad"
	fi
done
for re in "${cexp[@]}"; do
	grep -Eq -- "$re" "$clog" || fail "client output lacks /$re/"
done
uroce_say "PASS: ${scmd[*]} / ${ccmd[*]} across two namespaces"
cat "$clog"
