#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The last interop test: reads rxe0's hw_counters in the guest after all
# scenarios and checks that rxe found nothing wrong with what uroce sent.
#
# rdma_rxe drops a packet with a bad ICRC, a wrong address or a malformed
# header silently, before it counts it in rcvd_pkts (and the 6.1 kernel
# has no counter for those drops), so the check is an accounting one: the
# packets uroce sent in all scenarios (their uroce-stats tx_pkts, from
# $UROCE_INTEROP_STATE/accounting) all show up in rxe0's rcvd_pkts.  Any
# counter whose name says ICRC or drop (newer kernels) must be zero, and
# so must the error counters that mean a QP failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vm=$here/vm.sh
state=${UROCE_INTEROP_STATE:-/tmp/uroce-interop}

"$vm" require || exit

out=$("$vm" exec -t 20 -- 'cd /sys/class/infiniband/rxe0/ports/1/hw_counters && for f in *; do echo "$f $(cat $f)"; done') ||
	{ echo "FAIL: cannot read rxe0's hw_counters"; exit 1; }
echo "rxe0 hw_counters after the interop runs:"
sed 's/^/  /' <<<"$out"
declare -A c
while read -r k v; do c[$k]=$v; done <<<"$out"

fail=0
bad() { echo "FAIL: $*"; fail=1; }
for k in "${!c[@]}"; do
	case $k in
	*icrc*|*drop*|*bad*)
		((c[$k] == 0)) || bad "rxe0 counter $k is ${c[$k]}" ;;
	esac
done
for k in retry_exceeded_err retry_rnr_exceeded_err send_err link_downed; do
	[[ -n ${c[$k]:-} ]] || continue
	((c[$k] == 0)) || bad "rxe0 counter $k is ${c[$k]} (a QP failed)"
done

if [[ -s $state/accounting ]]; then
	echo "per scenario: name uroce_tx rxe_accepted tap_dropped rxe_tx uroce_rx"
	sed 's/^/  /' "$state/accounting"
	read -r htx grcvd tapdrop late < <(awk '{ t += $2; r += $3; d += $4; l += $7 } END { print t + 0, r + 0, d + 0, l + 0 }' "$state/accounting")
	echo "total: uroce sent $htx packets, rxe0 accepted $grcvd, the tap dropped $tapdrop, $late were farewell ACKs or tail-loss probes (rxe may drop those, to a QP it destroyed)"
	((grcvd + tapdrop + late >= htx)) ||
		bad "rxe0 silently dropped $((htx - grcvd - tapdrop - late)) packets uroce sent (bad ICRC, wrong address or malformed header)"
	((htx > 0)) || bad "no packets were sent: did the scenarios run?"
else
	bad "no scenario recorded its packets ($state/accounting is missing): did the scenarios run?"
fi
if ((fail)); then
	"$vm" exec -t 20 -- 'dmesg | tail -n 30' 2>&1 | sed 's/^/guest dmesg: /'
	exit 1
fi
echo "PASS: rxe0 accepted every packet uroce sent; no QP errors"
