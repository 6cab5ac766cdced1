# shellcheck shell=bash disable=SC2154  # nsA nsB addrA addrB pids: the caller's
# SPDX-License-Identifier: MIT
# Two hosts for a test: network namespaces $nsA and $nsB joined by a veth
# pair, vA in nsA with $addrA/24 and vB in nsB with $addrB/24.  Source this
# file from bash; the caller sets nsA, nsB, addrA, addrB, keeps the pids it
# starts in the array pids, and defines fail MESSAGE (exits non-zero).
#
#	trap netns_cleanup EXIT
#	trap 'exit 130' INT TERM
#	netns_up "run_x[$name]" [MTU]
#
# UROCE_NS_TAG, when set, is appended to both names, so that two checkouts
# running the same test at once (two developers' worktrees on one
# machine) do not delete each other's namespaces.

# netns_del: end whatever still runs inside our two namespaces (only ours:
# a previous run of this very test that was killed), then delete them
netns_del() {
	local ns p
	for ns in "$nsA" "$nsB"; do
		[ -e "/run/netns/$ns" ] || continue
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$p" 2>/dev/null
		done
		ip netns del "$ns" 2>/dev/null
	done
}

# netns_cleanup: end the programs in pids, then the namespaces
netns_cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null
	done
	netns_del
}

# netns_up WHO [MTU]: make the namespaces and the link (MTU on both ends if
# given), stale ones of the same names deleted first.  Exits 77 (skip),
# saying so as WHO, only where namespaces cannot be made at all.
netns_up() {
	local who=$1 err
	local -a link=()
	if [ -n "${UROCE_NS_TAG:-}" ]; then
		nsA=$nsA-$UROCE_NS_TAG nsB=$nsB-$UROCE_NS_TAG
	fi
	[ $# -lt 2 ] || link=(mtu "$2")
	if [ "$(id -u)" -ne 0 ]; then
		echo "$who: SKIP: network namespaces need root (uid $(id -u))"
		exit 77
	fi
	command -v ip >/dev/null || fail "ip (iproute2) is not installed"
	netns_del
	if ! err=$(ip netns add "$nsA" 2>&1); then
		echo "$who: SKIP: cannot create network namespaces: $err"
		exit 77
	fi
	ip netns add "$nsB" || fail "ip netns add $nsB"
	ip link add vA netns "$nsA" "${link[@]}" type veth \
		peer name vB netns "$nsB" "${link[@]}" || fail "cannot create the veth pair"
	ip -n "$nsA" addr add "$addrA/24" dev vA &&
	ip -n "$nsB" addr add "$addrB/24" dev vB &&
	ip -n "$nsA" link set lo up && ip -n "$nsB" link set lo up &&
	ip -n "$nsA" link set vA up && ip -n "$nsB" link set vB up ||
		fail "cannot configure the veth pair"
}

