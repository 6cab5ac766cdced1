#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Many processes on two shared addresses, members killed (issue 23,
# docs/scale.md "Many processes"):
#
#   run_mesh.sh --mesh PATH --libdir DIR [--na N] [--nb N] [--seconds S]
#               [--kill-every S] [--ping-ms MS] [--fanout K] [--name NAME]
#
# NB `mesh serve` processes on B's one address (10.84.0.2, one rdma_cm
# port each) and NA `mesh connect` processes on A's one address
# (10.84.0.1), each with an RC connection to every B member: NA x NB
# connections, a checked ping and echo on each about once a second.
# With --fanout K (a divisor of NB) A member i connects to the K B
# members from (i x K) mod NB on instead: NA x K connections, every B
# member serving NA x K / NB of them (the processes of a full mesh, the
# connections a CPU can carry).
# Once all are up, for S seconds, every --kill-every seconds one member
# (B and A in turn, a random one) is killed with SIGKILL and replaced by
# a new process of the same index.  Passes if no byte was wrong, every
# connection failure any process reports is one to a killed process,
# B members took no more than 5 % of their datagrams by way of another
# member (forwarded), and at the end every A member holds all its
# connections, each of which echoed within the last 10 s (with --ping-ms
# above 2500, within 4 pings: 16 384 connections pinged every second are
# more than two cores can carry for 256 processes, docs/scale.md "Many
# processes").  Namespaces uroce-mesh-NAME-{a,b}; exits 77 (skip) where
# namespaces cannot be made.

set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/netns.sh
source "$here/../lib/netns.sh"

mesh= libdir= na=128 nb=128 secs=60 every=3 name=mesh ping_ms=1000 fanout=

die() {
	echo "run_mesh: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--mesh) mesh=$2; shift 2 ;;
	--libdir) libdir=$2; shift 2 ;;
	--na) na=$2; shift 2 ;;
	--nb) nb=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--kill-every) every=$2; shift 2 ;;
	--ping-ms) ping_ms=$2; shift 2 ;;
	--fanout) fanout=$2; shift 2 ;;
	--name) name=$2; shift 2 ;;
	*) die "unknown option $1" ;;
	esac
done
[ -x "$mesh" ] || die "--mesh: '$mesh' is not executable"
[ -n "$libdir" ] || die "--libdir is required"
: "${fanout:=$nb}"
{ ((fanout >= 1 && fanout <= nb && nb % fanout == 0)); } 2>/dev/null ||
	die "--fanout $fanout: not a divisor of --nb $nb"

nsA=uroce-mesh-$name-a
nsB=uroce-mesh-$name-b
addrA=10.84.0.1
addrB=10.84.0.2
port0=19000
work=$(mktemp -d "${TMPDIR:-/tmp}/uroce_mesh.XXXXXX") || die "mktemp failed"
pids=()

fail() {
	echo "run_mesh[$name]: FAIL: $*"
	for f in $(grep -l -E 'FATAL|MISMATCH|stale' "$work"/*.log 2>/dev/null | head -5); do
		echo "---- $f"
		tail -n 20 "$f"
	done
	echo "---- logs kept in $work"
	exit 1
}

trap netns_cleanup EXIT
trap 'exit 130' INT TERM
netns_up "run_mesh[$name]"

stale_s=$(( ping_ms > 2500 ? (4 * ping_ms + 999) / 1000 : 10 ))
env_of() {	# env_of ADDR: the environment of a member
	echo "LD_LIBRARY_PATH=$libdir UROCE_ADDR=$1 MESH_PING_MS=$ping_ms" \
		"MESH_STALE_S=$stale_s"
}

declare -A pid gen
start() {	# start A|B INDEX: the member's next generation, in background
	local side=$1 i=$2 g ns
	g=$(( ${gen[$side$i]:--1} + 1 ))
	gen[$side$i]=$g
	if [ "$side" = B ]; then
		ip netns exec "$nsB" env $(env_of $addrB) "$mesh" serve "$i" "$g" \
			$addrB $((port0 + i)) >"$work/B$i.$g.log" 2>&1 &
	else
		ip netns exec "$nsA" env $(env_of $addrA) "$mesh" connect "$i" "$g" \
			$addrB $((port0 + i * fanout % nb)) "$fanout" \
			$((i * fanout % nb)) >"$work/A$i.$g.log" 2>&1 &
	fi
	pid[$side$i]=$!
	pids+=($!)
}

# count_lines PATTERN FILES...: how many of FILES hold PATTERN
count_lines() {
	local pat=$1
	shift
	grep -l -- "$pat" "$@" 2>/dev/null | wc -l
}

wait_all() {	# wait_all WHAT PATTERN N SECONDS FILES_GLOB
	local what=$1 pat=$2 n=$3 t=$4 glob=$5 i got
	for ((i = 0; i < t * 10; i++)); do
		# shellcheck disable=SC2086
		got=$(count_lines "$pat" $glob)
		[ "$got" -ge "$n" ] && return 0
		sleep 0.1
	done
	fail "$what: $got of $n after $t s"
}

t0=$SECONDS
for ((i = 0; i < nb; i++)); do start B $i; done
wait_all "B members listening" "listening" "$nb" 60 "$work/B*.0.log"
for ((i = 0; i < na; i++)); do start A $i; done
wait_all "A members connected to all $fanout" "up conns=$fanout" "$na" 300 "$work/A*.0.log"
echo "run_mesh[$name]: $na + $nb members up, $((na * fanout)) connections, in $((SECONDS - t0)) s"

# the kills: B and A in turn, a random member, replaced at once
killed=()
t1=$SECONDS k=0
while ((SECONDS - t1 < secs)); do
	sleep "$every"
	if ((k % 2 == 0)); then side=B n=$nb; else side=A n=$na; fi
	i=$((RANDOM % n))
	victim=${pid[$side$i]}
	kill -KILL "$victim" 2>/dev/null
	wait "$victim" 2>/dev/null
	killed+=("$side$i.${gen[$side$i]}")
	start $side $i
	if [ $side = B ]; then
		# (a bounded wait: its A peers reconnect once it listens)
		wait_all "replacement B$i" "listening" 1 30 "$work/B$i.${gen[B$i]}.log"
	fi
	k=$((k + 1))
done
echo "run_mesh[$name]: ${#killed[@]} members killed and replaced: ${killed[*]}"

# every A member back to all its connections: the last replaced ones too
for ((i = 0; i < na; i++)); do
	f="$work/A$i.${gen[A$i]}.log"
	for ((j = 0; j < 600; j++)); do
		grep -q "up conns=$fanout" "$f" && break
		sleep 0.1
	done
done
sleep $((stale_s + 2))	# every connection must have echoed since

# no member takes another's datagrams in a running mesh: GSO runs and CM
# MADs reach their own member (docs/shared.md); a few go astray in kills
fwd_err=
uroce=$libdir/../bin/uroce
if [ -x "$uroce" ]; then
	rx=0 fwd=0
	for ((i = 0; i < nb; i++)); do
		read -r r f < <("$uroce" stats "${pid[B$i]}" 2>/dev/null |
			awk '{ for (k = 1; k < NF; k++) {
				if ($k == "rx_pkts") r = $(k + 1)
				if ($k == "share_fwd_out") f = $(k + 1) } }
			END { print r + 0, f + 0 }')
		rx=$((rx + r)) fwd=$((fwd + f))
	done
	echo "run_mesh[$name]: B members forwarded $fwd of the $rx datagrams they received"
	[ $((fwd * 20)) -le "$rx" ] || fwd_err="B members forwarded $fwd of $rx datagrams (over 5 %)"
fi

for p in "${pid[@]}"; do kill -TERM "$p" 2>/dev/null; done
errs=()
[ -z "$fwd_err" ] || errs+=("$fwd_err")
for key in "${!pid[@]}"; do
	wait "${pid[$key]}"
	rc=$?
	[ $rc -eq 0 ] || errs+=("$key.${gen[$key]} exit $rc")
done

grep -h 'MISMATCH\|FATAL' "$work"/*.log | head -5 | while read -r l; do
	echo "run_mesh[$name]: $l"
done
n=$(cat "$work"/*.log | grep -c 'MISMATCH\|FATAL')
[ "$n" -eq 0 ] || errs+=("$n MISMATCH/FATAL lines")

# every failure is one to a killed member
declare -A was_killed
for v in "${killed[@]}"; do was_killed[$v]=1; done
nfail=0 bad=0
while read -r peer; do
	nfail=$((nfail + 1))
	if [ -z "${was_killed[$peer]:-}" ]; then
		bad=$((bad + 1))
		[ $bad -le 5 ] && errs+=("a connection to $peer failed, which was not killed")
	fi
done < <(sed -n 's/^mesh [AB][0-9]*\.[0-9]*: fail peer \([AB][0-9]*\.[0-9]*\) .*/\1/p' "$work"/*.log)

# the survivors' summaries
for ((i = 0; i < na; i++)); do
	f="$work/A$i.${gen[A$i]}.log"
	grep -q "done conns=$fanout .* stale=0 mismatches=0" "$f" ||
		errs+=("A$i.${gen[A$i]}: $(grep -h 'done' "$f" || echo 'no summary')")
done
verified=$(sed -n 's/.* done .*verified=\([0-9]*\).*/\1/p' "$work"/*.log | awk '{ s += $1 } END { print s + 0 }')
echo "run_mesh[$name]: $nfail connection failures, all to killed members: $([ $bad -eq 0 ] && echo yes || echo "no, $bad not")"
echo "run_mesh[$name]: $verified bytes checked (pings and echoes)"
[ ${#errs[@]} -eq 0 ] || fail "$(printf '%s; ' "${errs[@]:0:10}")"
echo "run_mesh[$name]: PASS in $((SECONDS - t0)) s"
rm -rf "$work"
