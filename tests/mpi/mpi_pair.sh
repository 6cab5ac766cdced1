#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Open MPI (Debian's openmpi-bin) over UCX over uroce: mpirun starts two
# (or NP) ranks of PROGRAM on this host with the UCX PML and only UCX's
# verbs transports, so their messages cannot go through shared memory or
# TCP.  Every rank must print a line that matches OK (by default its
# "rank R: ... 0 bad" line), and each rank's uroce device must have sent
# at least MIN_BYTES (UROCE_STATS=1 at exit).  --osc COMPONENT picks Open
# MPI's one-sided component (ucx: UCX's RMA).
#
#   mpi_pair.sh --min-bytes N [--timeout S] [--np NP] [--ok REGEX]
#               [--osc COMPONENT] -- PROGRAM [ARGS...]
#
# Each rank runs through `uroce run` (mpirun ... uroce run -- PROGRAM),
# which gives UCX the /dev/infiniband node it looks for and each rank a
# device of its own; mpirun runs as UROCE_TEST_USER if set.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

min='' tmo=120 np=2 ok='^rank [0-9]+: .* 0 bad' osc=()
while (($#)); do
	case $1 in
	--min-bytes) min=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	--np) np=$2; shift 2 ;;
	--ok) ok=$2; shift 2 ;;
	--osc) osc=(--mca osc "$2"); shift 2 ;;
	--) shift; break ;;
	*) uroce_die "unknown option $1" ;;
	esac
done
[[ -n $min && $# -gt 0 ]] || uroce_die "usage: $0 --min-bytes N [--timeout S] [--np NP] [--ok REGEX] [--osc C] -- PROGRAM [ARGS...]"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (openmpi-bin)"; exit 77; }
if [[ -n "${UROCE_PRELOAD:-}" ]]; then
	echo "SKIP: UCX under a sanitizer runtime"	# (ucx_pair.sh)
	exit 77
fi
uroce_run_preflight "$1"
uroce_run_needs_dev
uroce_ucx_preflight

log=$(mktemp)
trap 'rm -f "$log"' EXIT
mapfile -t launch < <(uroce_launch)
# the words before `uroce run` start mpirun, `uroce run --` each rank
n=${#launch[@]}
root=()
[[ $(id -u) -ne 0 || -n ${UROCE_TEST_USER:-} ]] || root=(--allow-run-as-root)
timeout "$tmo" "${launch[@]:0:n-3}" mpirun "${root[@]}" --oversubscribe -np "$np" \
	--mca pml ucx --mca btl self "${osc[@]}" -x UROCE_STATS=1 \
	-x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_NET_DEVICES=uroce0:1 \
	"${launch[@]:n-3}" "$@" >"$log" 2>&1
rc=$?

fail=''
((rc == 0)) || fail+="mpirun: $(uroce_rc_text $rc); "
n=$(grep -Ec "$ok" "$log")
((n == np)) || fail+="$n of $np ranks print '$ok'; "
# each device's tx_bytes at exit
sent=$(grep -o 'uroce-stats: tx_pkts=[0-9]* tx_bytes=[0-9]*' "$log" |
       sed 's/.*tx_bytes=//' | sort -n)
[[ $(wc -w <<<"$sent") -eq $np && $(head -n1 <<<"$sent") -ge $min ]] ||
	fail+="uroce devices sent '$(echo $sent)' bytes, want $np devices >= $min; "
if [[ -n $fail ]]; then
	uroce_print_log "mpirun $*" "$log"
	uroce_die "$fail"
fi
grep -E "$ok" "$log"
uroce_say "PASS: $*"
