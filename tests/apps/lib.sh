# shellcheck shell=bash
# SPDX-License-Identifier: MIT
# What the application tests share: two network namespaces as two hosts
# (tests/lib/netns.sh; a one-host test uses only the first), a work
# directory, and the words that start a program in a namespace through
# `uroce run`, the way a user starts it.  Source this file from bash after
# setting `name` (the test's name) and `net` (a /24 of its own, e.g.
# 10.81.3), and `apps_mtu` if the link between the two namespaces is to
# have an MTU other than veth's 1500; then
#
#	apps_up			# namespaces, work dir, traps; skips if not root
#	(urun [-t S] A [OPTS] -- PROG ARGS...)	# PROG in A's namespace
#				# under uroce run (killed after S seconds)
#	in_ns A PROG ARGS...		# a plain program (tgtadm, ss) in A
#	apps_end			# PASS, or FAIL with the errs collected
#
# Environment (set by ctest, tests/lib/test_env.cmake): UROCE_LIBDIR,
# UROCE_TOOL (bin/uroce), UROCE_PRELOAD (a sanitizer runtime, or empty).

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"
# shellcheck source=tests/lib/netns.sh
source "$here/../lib/netns.sh"

# shellcheck disable=SC2154  # name, net: the caller's
nsA=uroce-apps-$name-a
nsB=uroce-apps-$name-b
addrA=$net.1
addrB=$net.2
pids=()
hard_pids=()	# programs that ignore SIGTERM (tgtd): SIGKILLed at the end
scratch=()	# big files (LUNs on tmpfs): removed at the end, pass or fail
errs=()
work=

fail() {
	local f
	echo "apps[$name]: FAIL: $*"
	for f in "$work"/*.log; do
		[ -f "$f" ] || continue
		echo "---- $(basename "$f") (last 40 lines) ----"
		tail -n 40 "$f"
	done
	echo "---- logs kept in $work ----"
	trap - EXIT
	kill_hard
	netns_cleanup
	rm -rf "${scratch[@]}"
	exit 1
}

kill_hard() {
	local p
	for p in "${hard_pids[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
}

apps_cleanup() {
	kill_hard
	netns_cleanup
	rm -rf "${scratch[@]}"
	[ -z "$work" ] || rm -rf "$work"
}

apps_up() {
	[[ -n ${UROCE_TOOL:-} && -x $UROCE_TOOL ]] ||
		uroce_die "UROCE_TOOL (bin/uroce) is not set or not built"
	[[ -n ${UROCE_LIBDIR:-} ]] || uroce_die "UROCE_LIBDIR is not set"
	work=$(mktemp -d "${TMPDIR:-/tmp}/uroce_apps_$name.XXXXXX") ||
		uroce_die "mktemp failed"
	trap apps_cleanup EXIT
	trap 'exit 130' INT TERM
	netns_up "apps[$name]" ${apps_mtu:+"$apps_mtu"}
	# `uroce run` must be able to give programs /dev/infiniband and
	# /sys/class/infiniband (UCX, libfabric and others look there)
	if ! in_ns A "$UROCE_TOOL" run -- test -c /dev/infiniband/uverbs0; then
		echo "apps[$name]: SKIP: uroce run cannot give programs /dev/infiniband here"
		exit 77
	fi
}

ns_of() {
	case $1 in
	A) echo "$nsA" ;;
	B) echo "$nsB" ;;
	*) uroce_die "no namespace '$1'" ;;
	esac
}

in_ns() {	# in_ns A|B PROG ARGS...
	local ns
	ns=$(ns_of "$1")
	shift
	ip netns exec "$ns" "$@"
}

# The program's environment besides LD_LIBRARY_PATH, which uroce run sets:
# the sanitizer runtime when the library has one (tests/lib/uroce_test.sh)
prog_env() {
	uroce_prog_env | grep -v '^LD_LIBRARY_PATH='
}

# urun [-t SECONDS] A|B [UROCE RUN OPTIONS] -- PROG ARGS...: replaces the
# shell that runs it (exec all the way down, so that $! of `urun ... &`
# is the program's pid; timeout's with -t), so it is only ever started
# with & or in a subshell: `(urun ...)`
urun() {
	local ns
	local -a envv tmo=()
	if [ "$1" = -t ]; then
		tmo=(timeout -k 5 "$2")
		shift 2
	fi
	ns=$(ns_of "$1")
	shift
	mapfile -t envv < <(prog_env)
	exec ip netns exec "$ns" env "${envv[@]}" "${tmo[@]}" "$UROCE_TOOL" run "$@"
}

# alive PID: PID runs (a child that exited and was not waited for is a
# zombie, which kill -0 still finds)
alive() {
	local s
	s=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $s != Z* ]]
}

# wait_for SECONDS PID CMD...: polls CMD until it succeeds; fails early
# once PID (the program that should make it true) has exited
wait_for() {
	local n=$(($1 * 20)) pid=$2 i
	shift 2
	for ((i = 0; i < n; i++)); do
		"$@" && return 0
		alive "$pid" || return 1
		sleep 0.05
	done
	return 1
}

# wait_gone SECONDS PID: true once PID has exited, false after SECONDS
wait_gone() {
	local n=$(($1 * 20)) i
	for ((i = 0; i < n; i++)); do
		alive "$2" || return 0
		sleep 0.05
	done
	return 1
}

# counter PID NAME: a counter of a running uroce program (uroce stats)
counter() {
	"$UROCE_TOOL" --json stats "$1" 2>>"$work/uroce-stats.err" |
		grep -o "\"$2\": *[0-9]*" | head -n 1 | grep -o '[0-9]*$'
}

# exit_counters FILE: the uroce-stats line(s) UROCE_STATS=1 printed at exit
stats_field() {	# stats_field FILE FIELD: that field of each line, one a line
	grep -o "uroce-stats: .*" "$1" | grep -o " $2=[0-9]*" | cut -d= -f2
}

# pair_end SPID CLIENT_RC: the client's exit status (given) and the
# server's (waited for here) into errs
pair_end() {
	local rc=$2
	[ "$rc" -eq 0 ] || errs+=("client: $(uroce_rc_text "$rc")")
	wait "$1"
	rc=$?
	pids=()
	[ $rc -eq 0 ] || errs+=("server: $(uroce_rc_text $rc)")
}

apps_end() {
	if ((${#errs[@]})); then
		fail "$(printf '%s; ' "${errs[@]}")"
	fi
	echo "apps[$name]: PASS"
}
