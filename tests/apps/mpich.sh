#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# MPICH (Debian's mpich: the ch4 device on UCX) over uroce.  Every rank
# runs through `uroce run`; UCX may use only its verbs transports
# (UCX_TLS=rc_verbs,ud_verbs,self) and MPICH's own shared memory is off
# (MPIR_CVAR_NOLOCAL=1: every peer is remote), so every message between
# ranks goes through uroce.  mpich's explicit binary (mpiexec.mpich) is
# used: Open MPI's mpirun is the system's default MPI.
#
#   mpich.sh --scenario 2ns --prog PATH --agent PATH
#   mpich.sh --scenario starts --prog PATH --agent PATH
#
#   2ns     four ranks of mpi_check, two in each of two namespaces (one
#           address each, shared by its two ranks), launched by hydra
#           through AGENT (tests/shared/ns_agent.sh, as ssh would); every
#           rank checks every byte, and each rank's device has received
#           at least the data its rank was sent (UROCE_STATS=1 at exit);
#           then four ranks on one host, each on the default address
#           `uroce run` gives it (four programs starting at once take four)
#   starts  the same, one round each, started 20 times in a row: all 20
#           pass (each start a new set of processes sharing the two
#           addresses: their devices, CM and QPs come and go every time)
set -u

scenario='' prog='' agent=''
while [ $# -gt 0 ]; do
	case $1 in
	--scenario) scenario=$2; shift 2 ;;
	--prog) prog=$2; shift 2 ;;
	--agent) agent=$2; shift 2 ;;
	*) echo "mpich.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
case $scenario in
2ns) net=10.81.50 ;;
starts) net=10.81.51 ;;
*) echo "mpich.sh: --scenario 2ns|starts" >&2; exit 2 ;;
esac
name=mpich-$scenario
command -v mpiexec.mpich >/dev/null ||
	{ echo "SKIP: mpiexec.mpich is not installed (mpich)"; exit 77; }
[ -x "$prog" ] || { echo "SKIP: mpi_check is not built (libmpich-dev)"; exit 77; }
if [ -n "${UROCE_PRELOAD:-}" ]; then
	# (as tests/mpi: MPI's and UCX's plugins under a preloaded
	# sanitizer runtime are not ours to debug)
	echo "SKIP: MPICH under a sanitizer runtime"
	exit 77
fi
# shellcheck source=tests/apps/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

apps_up
mpienv=(-genv UCX_TLS rc_verbs,ud_verbs,self -genv UCX_NET_DEVICES uroce0:1
	-genv MPIR_CVAR_NOLOCAL 1 -genv UROCE_STATS 1)

# mpi_check ROUNDS times, four ranks, two in each namespace, launched by
# hydra through the agent; output in LOG.  Prints what went wrong, if
# anything, one line each.
run_2ns() {
	local rounds=$1 log=$2 rc n
	# hydra gives a rank the environment mpiexec passes, not its
	# proxy's: each host's ranks are told their interface here, one
	# section each (ranks fill -hosts in order: 0, 1 on A; 2, 3 on B)
	in_ns A env NS_AGENT_HOSTS="$addrA=$nsA:vA $addrB=$nsB:vB" \
		timeout -k 5 120 mpiexec.mpich -launcher rsh \
		-launcher-exec "$agent" -iface vA -hosts "$addrA:2,$addrB:2" \
		"${mpienv[@]}" \
		-n 2 "$UROCE_TOOL" run --ifname vA -- "$prog" "$rounds" : \
		-n 2 "$UROCE_TOOL" run --ifname vB -- "$prog" "$rounds" \
		>"$log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || echo "mpiexec: $(uroce_rc_text $rc)"
	n=$(grep -Ec "^mpi_check: rank [0-3] of 4 OK $rounds rounds" "$log")
	[ "$n" -eq 4 ] || echo "$n of 4 ranks report OK"
	# each rank is sent, per round, 1 MiB + 64 KiB + 8 B by its ring
	# neighbour and 16 KiB blocks by the collectives
	n=$(stats_field "$log" rx_bytes |
	    awk -v min=$((rounds * 1048576)) '$1 >= min { n++ } END { print n + 0 }')
	[ "$n" -eq 4 ] || echo "$n of 4 devices received >= $rounds MiB"
}

two_ns() {
	local e rc n
	while IFS= read -r e; do
		errs+=("$e")
	done < <(run_2ns 5 "$work/mpiexec.log")
	# and four ranks started at once on one host, each on the default
	# address its `uroce run` takes (four programs, four addresses)
	in_ns A timeout -k 5 60 mpiexec.mpich -n 4 "${mpienv[@]}" \
		"$UROCE_TOOL" run -- "$prog" 1 >"$work/onehost.log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || errs+=("one host: mpiexec $(uroce_rc_text $rc)")
	n=$(grep -Ec '^mpi_check: rank [0-3] of 4 OK' "$work/onehost.log")
	[ "$n" -eq 4 ] || errs+=("one host: $n of 4 ranks report OK")
}

starts() {
	local i e bad=0 first

	for ((i = 1; i <= 20; i++)); do
		first=
		while IFS= read -r e; do
			[ -n "$first" ] || first=$e
			errs+=("start $i: $e")
		done < <(run_2ns 1 "$work/start$i.log")
		if [ -n "$first" ]; then
			errs+=("start $i said: $(grep -m1 -E 'uroce|rror' "$work/start$i.log")")
			bad=$((bad + 1))
		else
			rm -f "$work/start$i.log"
		fi
	done
	echo "apps[$name]: $((20 - bad)) of 20 starts passed"
}

case $scenario in
2ns) two_ns ;;
starts) starts ;;
esac
apps_end
