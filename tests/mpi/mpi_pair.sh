#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Open MPI (Debian's openmpi-bin) over UCX over uroce: mpirun starts two
# ranks of PROGRAM on this host with the UCX PML and only UCX's verbs
# transports, so their messages cannot go through shared memory or TCP.
# Both ranks must report 0 bad rounds, and each rank's uroce device must
# have sent at least MIN_BYTES (UROCE_STATS=1 at exit).
#
#   mpi_pair.sh --min-bytes N [--timeout S] -- PROGRAM [ARGS...]
#
# UCX needs a /dev/infiniband node: uroce_uverbs_node (tests/lib).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

min='' tmo=120
orig=("$@")
while (($#)); do
	case $1 in
	--min-bytes) min=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	--) shift; break ;;
	*) uroce_die "unknown option $1" ;;
	esac
done
[[ -n $min && $# -gt 0 ]] || uroce_die "usage: $0 --min-bytes N [--timeout S] -- PROGRAM [ARGS...]"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (openmpi-bin)"; exit 77; }
if [[ -n "${UROCE_PRELOAD:-}" ]]; then
	echo "SKIP: UCX under a sanitizer runtime"	# (ucx_pair.sh)
	exit 77
fi
uroce_uverbs_node "${BASH_SOURCE[0]}" "${orig[@]}"
uroce_ucx_preflight

log=$(mktemp)
trap 'rm -f "$log"' EXIT
root=()
[[ $(id -u) -ne 0 ]] || root=(--allow-run-as-root)
timeout "$tmo" mpirun "${root[@]}" --oversubscribe -np 2 \
	--mca pml ucx --mca btl self \
	-x LD_LIBRARY_PATH="$UROCE_LIBDIR" -x UROCE_STATS=1 \
	-x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_NET_DEVICES=uroce0:1 \
	"$@" >"$log" 2>&1
rc=$?

fail=''
((rc == 0)) || fail+="mpirun: $(uroce_rc_text $rc); "
n=$(grep -Ec '^rank [01]: .* 0 bad' "$log")
((n == 2)) || fail+="$n of 2 ranks report 0 bad rounds; "
# each device's tx_bytes at exit
sent=$(grep -o 'uroce-stats: tx_pkts=[0-9]* tx_bytes=[0-9]*' "$log" |
       sed 's/.*tx_bytes=//' | sort -n)
[[ $(wc -w <<<"$sent") -eq 2 && $(head -n1 <<<"$sent") -ge $min ]] ||
	fail+="uroce devices sent '$(echo $sent)' bytes, want 2 devices >= $min; "
if [[ -n $fail ]]; then
	uroce_print_log "mpirun $*" "$log"
	uroce_die "$fail"
fi
grep -E '^rank ' "$log"
uroce_say "PASS: $*"
