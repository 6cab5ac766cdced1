#!/bin/bash
# SPDX-License-Identifier: MIT
#
# ib_write_bw, server and client, each capturing with UROCE_PCAP; then
#  - tshark (Debian's) dissects every frame of both files as InfiniBand
#    over UDP (eth:ethertype:ip:udp:infiniband), none malformed, IP and
#    UDP checksums valid, and RDMA WRITEs and ACKs are among them;
#  - pcap_icrc (our ICRC code) finds every ICRC right, and fails on a copy
#    with one bit flipped (so the check is known to be able to fail);
#  - with UROCE_PCAP_MAX the client's capture rotates: both files within
#    the cap, both valid.
#
#   capture.sh --port TCP_PORT --checker PCAP_ICRC [--timeout S]
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

port='' checker='' tmo=120
while (($#)); do
	case $1 in
	--port) port=$2; shift 2 ;;
	--checker) checker=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	*) uroce_die "capture.sh: unknown option $1" ;;
	esac
done
[[ $port =~ ^[0-9]+$ ]] || uroce_die "capture.sh: --port needs a number"
[[ -x $checker ]] || uroce_die "capture.sh: --checker '$checker' is not executable"
command -v tshark >/dev/null || uroce_die "tshark is not installed (run scripts/setup)"
uroce_preflight ib_write_bw

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-capture.XXXXXX")
spid=
cleanup() {
	if [[ -n $spid ]] && kill -0 "$spid" 2>/dev/null; then
		kill -TERM "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
	fi
	[[ -n ${keep:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
fail() {
	printf 'FAIL: %s\n' "$*"
	uroce_print_log server "$work/server.log"
	uroce_print_log client "$work/client.log"
	keep=1
	echo "files kept in $work"
	exit 1
}

mapfile -t penv < <(uroce_prog_env)
max=$((1 << 20))
args=(-F -s 65536 -n 300)
start=$(date +%s)
timeout -k 5 "$tmo" env "${penv[@]}" UROCE_PCAP="$work/server.pcap" \
	ib_write_bw "${args[@]}" -p "$port" >"$work/server.log" 2>&1 &
spid=$!
uroce_wait_listen "$spid" "$port" $((start + tmo)) ||
	fail "server did not listen on port $port"
left=$((start + tmo - $(date +%s)))
timeout -k 5 "$((left > 0 ? left : 1))" env "${penv[@]}" \
	UROCE_PCAP="$work/client.%p.pcap" UROCE_PCAP_MAX=$max \
	ib_write_bw "${args[@]}" -p "$port" 127.0.0.1 >"$work/client.log" 2>&1
crc=$?
wait "$spid"
src=$?
spid=
((crc == 0)) || fail "client: $(uroce_rc_text $crc)"
((src == 0)) || fail "server: $(uroce_rc_text $src)"
grep -q "capturing RoCE packets to $work/server.pcap" "$work/server.log" ||
	fail "the server did not announce its capture"

# The client's file name had %p: exactly one file and its rotated copy.
cfiles=("$work"/client.*.pcap)
((${#cfiles[@]} == 1)) && [[ -s ${cfiles[0]} ]] ||
	fail "expected one client capture file, got: ${cfiles[*]}"
client=${cfiles[0]}
[[ -s $client.1 ]] || fail "UROCE_PCAP_MAX=$max: no rotated $client.1"
for f in "$client" "$client.1"; do
	size=$(stat -c %s "$f")
	((size <= max)) || fail "$f is $size bytes, over UROCE_PCAP_MAX=$max"
done

files=("$work/server.pcap" "$client" "$client.1")
for f in "${files[@]}"; do
	n=$(tshark -r "$f" -T fields -e frame.number 2>/dev/null | wc -l)
	((n > 0)) || fail "tshark read no frames from $f"
	# every frame's protocol stack
	stacks=$(tshark -r "$f" -T fields -e frame.protocols 2>/dev/null |
		 sort | uniq -c)
	odd=$(grep -Ev ' eth:ethertype:ip:udp:infiniband(:data)?$' <<<"$stacks")
	[[ -z $odd ]] || fail "$f: frames that are not InfiniBand over UDP:"$'\n'"$odd"
	# malformed frames, expert errors, bad IP or UDP checksums
	badf=$(tshark -r "$f" -o ip.check_checksum:TRUE \
		-o udp.check_checksum:TRUE \
		-Y '_ws.malformed || _ws.expert.severity >= error || ip.checksum.status == 0 || udp.checksum.status == 0 || !infiniband.bth' \
		2>/dev/null | head -n 5)
	[[ -z $badf ]] || fail "$f: tshark reports:"$'\n'"$badf"
	out=$("$checker" "$f") || fail "$f: ICRC check failed:"$'\n'"$out"
	uroce_say "$f: $n frames, all RoCE v2; $(tail -n 1 <<<"$out")"
done

# What was captured is the traffic: WRITEs one way, ACKs the other
# (IBA opcodes RC RDMA WRITE First/Middle/Last/Only 0x06..0x0a, ACK 0x11).
writes=$(tshark -r "$work/server.pcap" -Y 'infiniband.bth.opcode >= 6 && infiniband.bth.opcode <= 10' 2>/dev/null | wc -l)
acks=$(tshark -r "$work/server.pcap" -Y 'infiniband.bth.opcode == 17' 2>/dev/null | wc -l)
((writes > 0 && acks > 0)) ||
	fail "server capture: $writes RDMA WRITE packets, $acks ACKs"

# The ICRC check must be able to fail: flip one bit of frame 2.
"$checker" "$work/server.pcap" --corrupt 2 "$work/bad.pcap" ||
	fail "could not write the corrupted copy"
if out=$("$checker" "$work/bad.pcap"); then
	fail "pcap_icrc accepted a capture with a flipped bit:"$'\n'"$out"
fi
grep -q '^frame 2: ICRC' <<<"$out" ||
	fail "pcap_icrc did not blame frame 2's ICRC: $out"

uroce_say "PASS: capture of ib_write_bw ($writes WRITE packets, $acks ACKs at the server)"
