#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The port LID follows the device when rdma_bind_addr moves it: an rping
# server that binds ADDR (its device moves there from its first free
# 127.0.0.N before it listens) is shown by `uroce devices --json` with
# ADDR, ADDR's GID and ADDR's preferred LID (its low 16 bits), which is
# what a GRH-less address to that LID then reaches (docs/transport.md,
# "LIDs").
#
#   lid_move.sh --addr 127.0.82.N --tool UROCE [--timeout S]
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

addr='' tool='' tmo=60
while (($#)); do
	case $1 in
	--addr) addr=$2; shift 2 ;;
	--tool) tool=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	*) uroce_die "lid_move.sh: unknown option $1" ;;
	esac
done
[[ $addr =~ ^127\.([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] ||
	uroce_die "lid_move.sh: --addr needs a 127.x.y.z address"
want_lid=$(((BASH_REMATCH[2] << 8) | BASH_REMATCH[3]))
((want_lid >= 1 && want_lid <= 0xbfff)) ||
	uroce_die "lid_move.sh: the low 16 bits of $addr are no unicast LID"
[[ -x $tool ]] || uroce_die "lid_move.sh: --tool '$tool' is not executable"
uroce_preflight rping
[[ -z $(ss -Hlun "src = $addr and sport = :4791" 2>/dev/null) ]] ||
	uroce_die "UDP $addr:4791 is already taken by another process"

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-lid.XXXXXX")
spid=''
cleanup() {
	if [[ -n $spid ]] && kill -0 "$spid" 2>/dev/null; then
		kill -TERM "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	printf 'FAIL: %s\n' "$*"
	uroce_print_log server "$work/server.log"
	exit 1
}

mapfile -t penv < <(uroce_prog_env)
# env execs rping: $! is rping's own pid, the one the segment is named after
env "${penv[@]}" UROCE_CM_LISTEN_FILE="$work/listening" \
	rping -s -a "$addr" -C 1 >"$work/server.log" 2>&1 &
spid=$!
deadline=$(($(date +%s) + tmo))
until [[ -s $work/listening ]]; do
	kill -0 "$spid" 2>/dev/null || fail "rping -s exited before listening"
	(($(date +%s) < deadline)) || fail "rping -s did not listen within ${tmo}s"
	sleep 0.05
done

"$tool" devices --json >"$work/devices.json" 2>"$work/tool.err" ||
	fail "uroce devices --json failed: $(cat "$work/tool.err")"
got=$(python3 -c 'import json, sys
for d in json.load(open(sys.argv[1])):
    if d["pid"] == int(sys.argv[2]):
        print(d["address"], d["gid"], d["lid"])' "$work/devices.json" "$spid")
[[ $got == "$addr ::ffff:$addr $want_lid" ]] ||
	fail "uroce devices: pid $spid is '$got', want '$addr ::ffff:$addr $want_lid': $(cat "$work/devices.json")"
uroce_say "PASS: rping -s -a $addr moved its device to $addr, LID $want_lid"
