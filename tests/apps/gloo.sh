#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# gloo's ibverbs transport over uroce: N ranks of gloo_coll (ours, on
# Debian's libgloo) started at once, each through `uroce run`, meeting in
# a FileStore directory; every rank must check every element of every
# allreduce, broadcast and barrier and exit 0.
#
#   gloo.sh --ranks N [--two-hosts] --prog PATH
#
# One host: all ranks in one namespace, each on the default address
# `uroce run` gives it (so N programs start at once and must not take the
# same one).  --two-hosts: half the ranks in each of two namespaces
# joined by veth, each on its namespace's one address.
set -u

n=0 two=0 prog=''
while [ $# -gt 0 ]; do
	case $1 in
	--ranks) n=$2; shift 2 ;;
	--two-hosts) two=1; shift ;;
	--prog) prog=$2; shift 2 ;;
	*) echo "gloo.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
[ "$n" -ge 2 ] || { echo "gloo.sh: --ranks N (N >= 2)" >&2; exit 2; }
if [ ! -x "$prog" ]; then
	echo "SKIP: gloo_coll is not built (libgloo-dev)"
	exit 77
fi
name=gloo-$n net=10.81.$((10 + n))
if ((two)); then
	name=gloo-$n-2ns net=10.81.$((30 + n))
fi
# shellcheck source=tests/apps/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

apps_up
mkdir "$work/store" || fail "mkdir"
# a second or two on a quiet machine; with 8 ranks at load average 400
# on 2 cores, 86 s (ctest's TIMEOUT is above this)
limit=$((60 + 15 * n))
rpids=()
for ((r = 0; r < n; r++)); do
	side=A opts=()
	if ((two)); then
		if ((r % 2)); then side=B opts=(--ifname vB)
		else opts=(--ifname vA); fi
	fi
	urun -t "$limit" "$side" "${opts[@]}" --stats -- \
		"$prog" "$r" "$n" "$work/store" >"$work/rank$r.log" 2>&1 &
	rpids+=($!)
	pids+=($!)
done
for ((r = 0; r < n; r++)); do
	wait "${rpids[$r]}"
	rc=$?
	[ $rc -eq 0 ] || errs+=("rank $r: $(uroce_rc_text $rc)")
	grep -q "^gloo_coll: rank $r OK $n ranks, ibverbs" "$work/rank$r.log" ||
		errs+=("rank $r did not report OK")
	# its device carried its share (the 1 MiB allreduces alone are
	# several MiB per rank)
	rx=$(stats_field "$work/rank$r.log" rx_bytes)
	[ "${rx:-0}" -ge $((1 << 20)) ] ||
		errs+=("rank $r's device received ${rx:-no} bytes")
done
pids=()
apps_end
