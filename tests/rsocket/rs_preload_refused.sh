#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A program under librspreload connecting to a port nobody listens on gets
# ECONNREFUSED, as over TCP:
#
#   rs_preload_refused.sh ADDR PROGRAM ARGS...
#
# (librspreload answers a failed rconnect by retrying over a kernel socket;
# to make that socket it asks rgetsockname for the family with a null
# address: that must work.)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

lib=$(ldconfig -p | awk '$1 == "librdmacm.so.1" { print $NF; exit }')
rsp=$(dirname "${lib:-/usr/lib/x86_64-linux-gnu/x}")/rsocket/librspreload.so
[[ -e $rsp ]] || uroce_die "$rsp is not installed (librdmacm1)"
addr=$1
shift
mapfile -t launch < <(uroce_launch "LD_PRELOAD=$(uroce_rspreload "$rsp")" "UROCE_ADDR=$addr")
out=$(timeout -k 5 30 "${launch[@]}" "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
((rc != 0 && rc != 124 && rc < 128)) || uroce_die "expected a clean failure, got $(uroce_rc_text "$rc")"
grep -q "Connection refused" <<<"$out" || uroce_die "no 'Connection refused'"
uroce_say "PASS: ECONNREFUSED under librspreload"
