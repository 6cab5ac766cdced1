#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# fio's rdma engine (Debian's fio) over uroce, both sides through `uroce
# run`: a server job and a client job moving 64 MiB in 64 KiB blocks, 16
# in flight, with the client's VERB, on one host or (--2ns) the server in
# one namespace and the client in another (RoCE over UDP on a veth):
#
#   fio.sh --verb write|read|send [--2ns]
#
# Each job must exit 0 with err=0 and the client report io=64.0MiB.
# fio's rdma engine has no data verification of its own (fio verifies
# files and block devices), and its jobs end with _exit (no counters at
# exit).  The engine's roles go by rw, whatever the verb: the server
# job is rw=read, the client's rw=write (as fio's examples have them).
set -u

verb='' across=0
while [ $# -gt 0 ]; do
	case $1 in
	--verb) verb=$2; shift 2 ;;
	--2ns) across=1; shift ;;
	*) echo "fio.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
case $verb in
write) net=10.81.60 ;;
read) net=10.81.61 ;;
send) net=10.81.62 ;;
*) echo "fio.sh: --verb write|read|send" >&2; exit 2 ;;
esac
name=fio-$verb
# (a /24 of each test's own; the two-namespace ones 3 further)
((across)) && name=$name-2ns net=10.81.$((${net##*.} + 3))
command -v fio >/dev/null || { echo "SKIP: fio is not installed"; exit 77; }
# shellcheck source=tests/apps/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

apps_up
port=5555
common=(--ioengine=rdma --port=$port --bs=64k --size=64m --iodepth=16)
# (the server listens through rdma_cm: our librdmacm says when, in
# UROCE_CM_LISTEN_FILE)
if ((across)); then
	srv=$addrA sopts=(--ifname vA) cns=B copts=(--ifname vB)
else
	srv=127.0.0.1 sopts=(--addr 127.0.0.1) cns=A copts=()
fi
UROCE_CM_LISTEN_FILE=$work/listen \
	urun -t 60 A "${sopts[@]}" --stats -- fio --name=server \
	"${common[@]}" --rw=read >"$work/server.log" 2>&1 &
spid=$!
pids+=("$spid")
listening() { grep -qx "listen $1" "$work/listen" 2>/dev/null; }
wait_for 20 "$spid" listening $port ||
	fail "the fio server did not listen on $port"
(urun -t 60 "$cns" "${copts[@]}" --stats -- fio --name=client \
	"${common[@]}" --rw=write --hostname="$srv" --verb="$verb") \
	>"$work/client.log" 2>&1
pair_end "$spid" $?
for side in client server; do
	grep -q 'err= 0:' "$work/$side.log" || errs+=("the $side reported an error")
done
grep -Eq "WRITE: .*io=64.0MiB" "$work/client.log" ||
	errs+=("the client did not report io=64.0MiB")
grep -E 'WRITE: ' "$work/client.log"
apps_end
