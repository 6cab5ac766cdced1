#!/bin/bash
# SPDX-License-Identifier: MIT
#
# uroce doctor: one line per check (library, address, port, mtu, rmem_max,
# wmem_max, namespaces, memlock), each "ok", "warn" or "FAIL" with what to
# change; exit 0 on this host, where uroce works (wmem_max against
# UROCE_SNDBUF_KB's send buffer: ok by default, a warning for one larger
# than a user may have); exit 1 with a FAIL line
# when the address cannot be bound (not this host's) or UDP 4791 on it is
# taken.  As UROCE_TEST_USER when root.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

uroce_run_preflight
mapfile -t as < <(uroce_as_test_user)
taken=127.0.16.11
fails=0

# doctor WANT_RC [K=V...]: runs it, checks the shape and the status
doctor() {
	local want=$1 rc
	shift
	out=$(timeout 30 "${as[@]}" env "$@" "$UROCE_TOOL" doctor 2>&1)
	rc=$?
	printf '%s\n' "$out"
	if ((rc != want)); then
		echo "FAIL: uroce doctor $*: exit $rc, want $want"
		fails=$((fails + 1))
	fi
	for check in library address port mtu rmem_max wmem_max namespaces memlock; do
		grep -Eq "^(ok|warn|FAIL) +$check +[^ ]" <<<"$out" ||
			{ echo "FAIL: no '$check' line"; fails=$((fails + 1)); }
	done
	(($(wc -l <<<"$out") == 8)) || { echo "FAIL: not 8 lines"; fails=$((fails + 1)); }
}

expect_line() {
	grep -Eq -- "$1" <<<"$out" || { echo "FAIL: no line matches '$1'"; fails=$((fails + 1)); }
}

doctor 0
expect_line '^ok +address +127\.0\.0\.[0-9]+ on lo'
expect_line '^ok +mtu +interface lo MTU [0-9]+, IB MTU 4096'
expect_line '^ok +namespaces'
# the send buffer is small on purpose: the usual wmem_max holds it
expect_line '^ok +wmem_max +net\.core\.wmem_max [0-9]+: enough for the 128 KiB send buffer'

# ... and one larger than wmem_max allows a user is worth a word
big=$(($(cat /proc/sys/net/core/wmem_max) / 512 + 1024))
doctor 0 UROCE_SNDBUF_KB=$big
expect_line "^warn +wmem_max +.* less than the $big KiB send buffer asks for .*sysctl -w net\.core\.wmem_max="

doctor 1 UROCE_ADDR=192.0.2.1
expect_line '^FAIL +address +cannot bind UDP 192\.0\.2\.1 port 4791: .*set UROCE_ADDR'

# UDP 4791 on the address taken by another program
coproc holder { exec python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 4791))
print("bound", flush=True)
sys.stdin.read()' "$taken"; }
read -r -t 10 ready <&"${holder[0]}"
[[ ${ready:-} == bound ]] || uroce_die "could not take UDP $taken:4791 for the test"
doctor 1 UROCE_ADDR=$taken
expect_line "^FAIL +address +cannot bind UDP $taken port 4791: Address already in use"
expect_line '^FAIL +port +.*ss -ulpn'
kill "$holder_PID" 2>/dev/null

((fails == 0)) || uroce_die "$fails checks failed"
uroce_say "PASS: uroce doctor"
