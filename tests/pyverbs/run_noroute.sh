#!/bin/bash
# SPDX-License-Identifier: MIT
# pyverbs_send_errors_noroute: test_send_errors in a network namespace
# with only lo (the device on 127.0.0.1), the refused destination an
# address with no route there, so sendmsg says ENETUNREACH.  Needs root
# for the namespace: exits 77 (SKIP) without.
#	run_noroute.sh PYTHON RUN_PY MODULE
set -u
ns=uroce-states-noroute
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
	echo "run_noroute: SKIP: a network namespace needs root and iproute2"
	exit 77
fi
ip netns del "$ns" 2>/dev/null
if ! ip netns add "$ns"; then
	echo "run_noroute: SKIP: cannot create a network namespace"
	exit 77
fi
trap 'ip netns del "$ns" 2>/dev/null' EXIT
ip -n "$ns" link set lo up || { echo "run_noroute: lo up failed"; exit 1; }
ip netns exec "$ns" env UROCE_IFNAME=lo UROCE_TEST_REFUSED_IPV4=10.99.0.1 "$@"
