#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# OpenSHMEM (Open MPI's oshmem, from Debian's openmpi-bin) over UCX over
# uroce.  Every PE runs through `uroce run`; UCX may use only its verbs
# transports (UCX_TLS=rc_verbs,ud_verbs,self), so every put, get, atomic
# and collective between PEs goes through uroce.
#
#   shmem.sh host PROG
#   shmem.sh 2ns PROG AGENT
#
#   host    four PEs of shmem_check on one host (a namespace of its own),
#           each on the default address its `uroce run` takes
#   2ns     four PEs, two in each of two namespaces (one address each,
#           shared by its two PEs), oshrun starting B's through AGENT
#           (tests/shared/ns_agent.sh, as ssh would)
#
# Every PE checks every element (shmem_check.c), and each PE's device must
# have received at least the data its PE was sent or fetched (UROCE_STATS=1
# at exit).
#
# Open MPI 4.1's oshmem crashes in shmem_finalize on any transport (UCX's
# shared memory alone as well): its MPI one-sided component osc/rdma
# frees memory after the memory hooks' component was unloaded
# (open-mpi/ompi#11604).  SHMEM does not use MPI one-sided, so oshrun is
# told to leave that component out (--mca osc ^rdma), as a user of this
# Open MPI must.
set -u

scenario=${1:-} prog=${2:-} agent=${3:-}
case $scenario in
host) net=10.81.80 ;;
2ns) net=10.81.81 ;;
*) echo "usage: shmem.sh host|2ns PROG [AGENT]" >&2; exit 2 ;;
esac
name=shmem-$scenario
command -v oshrun >/dev/null ||
	{ echo "SKIP: oshrun is not installed (openmpi-bin)"; exit 77; }
[ -x "$prog" ] || { echo "SKIP: shmem_check is not built (libopenmpi-dev)"; exit 77; }
# (as tests/mpi: Open MPI's and UCX's plugins under a preloaded sanitizer
# runtime are not ours to debug)
[ -z "${UROCE_PRELOAD:-}" ] ||
	{ echo "SKIP: OpenSHMEM under a sanitizer runtime"; exit 77; }
# shellcheck source=tests/apps/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

apps_up
rounds=5
root=()
[ "$(id -u)" -ne 0 ] || root=(--allow-run-as-root)
opts=("${root[@]}" --oversubscribe --mca pml ucx --mca spml ucx
	--mca btl self --mca osc ^rdma
	-x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_NET_DEVICES=uroce0:1
	-x UROCE_STATS=1)
log=$work/oshrun.log

case $scenario in
host)
	in_ns A timeout -k 5 90 oshrun "${opts[@]}" -np 4 \
		"$UROCE_TOOL" run -- "$prog" "$rounds" >"$log" 2>&1
	;;
2ns)
	in_ns A env UROCE_IFNAME=vA \
		NS_AGENT_HOSTS="$addrA=$nsA:vA $addrB=$nsB:vB" \
		timeout -k 5 90 oshrun "${opts[@]}" \
		--host "$addrA:2,$addrB:2" -np 4 \
		--mca plm_rsh_agent "$agent" \
		--mca oob_tcp_if_include "$net.0/24" \
		"$UROCE_TOOL" run -- "$prog" "$rounds" >"$log" 2>&1
	;;
esac
rc=$?
[ $rc -eq 0 ] || errs+=("oshrun: $(uroce_rc_text $rc)")
n=$(grep -Ec "^shmem_check: pe [0-3] of 4 OK $rounds rounds" "$log")
[ "$n" -eq 4 ] || errs+=("$n of 4 PEs report OK")
# per round each PE is put 8 B + 64 KiB + 1 MiB + 64 KiB and gets 1 MiB
n=$(stats_field "$log" rx_bytes |
    awk -v min=$((rounds * 2 * 1048576)) '$1 >= min { n++ } END { print n + 0 }')
[ "$n" -eq 4 ] || errs+=("$n of 4 devices received >= $((rounds * 2)) MiB")
grep -E '^shmem_check: ' "$log"
apps_end
