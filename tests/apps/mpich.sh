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
#   mpich.sh --scenario starts --prog PATH
#
#   2ns     four ranks of mpi_check, two in each of two namespaces (one
#           address each, shared by its two ranks), launched by hydra
#           through AGENT (tests/shared/ns_agent.sh, as ssh would); every
#           rank checks every byte, and each rank's device has received
#           at least the data its rank was sent (UROCE_STATS=1 at exit)
#   starts  `mpiexec.mpich -n 4` started 20 times in a row on one host,
#           every rank on the default address `uroce run` gives it (four
#           programs starting at once take four): all 20 pass
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

two_ns() {
	local rc n
	[ -x "$agent" ] || fail "--agent: '$agent' is not executable"
	# hydra gives a rank the environment mpiexec passes, not its
	# proxy's: each host's ranks are told their interface here, one
	# section each (ranks fill -hosts in order: 0, 1 on A; 2, 3 on B)
	in_ns A env NS_AGENT_HOSTS="$addrA=$nsA:vA $addrB=$nsB:vB" \
		timeout -k 5 120 mpiexec.mpich -launcher rsh \
		-launcher-exec "$agent" -iface vA -hosts "$addrA:2,$addrB:2" \
		"${mpienv[@]}" \
		-n 2 "$UROCE_TOOL" run --ifname vA -- "$prog" 5 : \
		-n 2 "$UROCE_TOOL" run --ifname vB -- "$prog" 5 \
		>"$work/mpiexec.log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || errs+=("mpiexec: $(uroce_rc_text $rc)")
	n=$(grep -Ec '^mpi_check: rank [0-3] of 4 OK 5 rounds' "$work/mpiexec.log")
	[ "$n" -eq 4 ] || errs+=("$n of 4 ranks report OK")
	# each rank is sent, per round, 1 MiB + 64 KiB + 8 B by its ring
	# neighbour and 16 KiB blocks by the collectives
	n=$(stats_field "$work/mpiexec.log" rx_bytes |
	    awk '$1 >= 5 * 1048576 { n++ } END { print n + 0 }')
	[ "$n" -eq 4 ] || errs+=("$n of 4 devices received >= 5 MiB")
}

starts() {
	local i rc n bad=0
	for ((i = 1; i <= 20; i++)); do
		in_ns A timeout -k 5 60 mpiexec.mpich -n 4 "${mpienv[@]}" \
			"$UROCE_TOOL" run -- "$prog" 1 >"$work/start$i.log" 2>&1
		rc=$?
		n=$(grep -Ec '^mpi_check: rank [0-3] of 4 OK' "$work/start$i.log")
		if [ $rc -ne 0 ] || [ "$n" -ne 4 ]; then
			errs+=("start $i: mpiexec $(uroce_rc_text $rc), $n of 4 ranks OK: $(grep -m1 -E 'uroce|rror' "$work/start$i.log")")
			bad=$((bad + 1))
			continue
		fi
		n=$(stats_field "$work/start$i.log" rx_bytes |
		    awk '$1 >= 1048576 { n++ } END { print n + 0 }')
		[ "$n" -eq 4 ] || errs+=("start $i: $n of 4 devices received >= 1 MiB")
		rm -f "$work/start$i.log"
	done
	echo "apps[$name]: $((20 - bad)) of 20 starts passed"
}

case $scenario in
2ns) two_ns ;;
starts) starts ;;
esac
apps_end
