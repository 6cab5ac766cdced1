# shellcheck shell=bash
# SPDX-License-Identifier: MIT
# Shell helpers for tests and scripts that run programs over uroce.
# Source this file from bash; it defines functions and UROCE_FAIL_RE.
#
# Environment it reads:
#   UROCE_LIBDIR   directory holding our libibverbs.so.1 (required)
#   UROCE_PRELOAD  sanitizer runtime to LD_PRELOAD into uninstrumented
#                  programs (set by the test build when UROCE_SANITIZE has
#                  address or thread); empty otherwise
#   ASAN_OPTIONS, UBSAN_OPTIONS, TSAN_OPTIONS are passed through.

# Log lines that mean a program failed even if it exited 0: rc_pingpong
# prints "invalid data in page N" and still returns 0; perftest prints
# "Failed to destroy resources" on teardown problems; sanitizers report
# "ERROR: AddressSanitizer" or "runtime error:".
# shellcheck disable=SC2034  # used by the scripts that source this
UROCE_FAIL_RE="Couldn't|[Ff]ailed|[Ee]rror|ERROR|Unable|invalid data|Sanitizer|Segmentation fault|core dumped|Aborted|symbol lookup|not found"

# uroce_log_errors FILE...: print (at most 3 of) the lines of the logs
# that match UROCE_FAIL_RE, and succeed if there is one.  The counter
# summaries that UROCE_STATS=1 prints at exit (uroce-stats:,
# uroce-cm-stats:, to stderr, so possibly after a program's unfinished
# last line of stdout) are not the program's words and are cut off: a
# counter named tx_send_failed is not a failure.
uroce_log_errors() {
	sed 's/uroce-\(cm-\)\{0,1\}stats:.*//' "$@" |
		grep -E -m 3 "$UROCE_FAIL_RE"
}

uroce_say() { printf '%s\n' "$*"; }
uroce_die() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

# The environment an unmodified program runs under: our library first, and
# the sanitizer runtime preloaded when the library was built with one (an
# uninstrumented executable must load the ASan/TSan runtime before anything
# else).  Leak checking is off by default for these programs: their leaks
# are not ours, and LSan would turn them into failures.
uroce_prog_env() {
	local -a e=("LD_LIBRARY_PATH=$UROCE_LIBDIR")
	if [[ -n "${UROCE_PRELOAD:-}" ]]; then
		e+=("LD_PRELOAD=$UROCE_PRELOAD")
		e+=("ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}")
	fi
	printf '%s\n' "${e[@]}"
}

# uroce_rspreload RSP: the LD_PRELOAD value for a program under
# librspreload RSP and the sanitizer runtime (UROCE_PRELOAD).  ASan's
# must come first (it checks); TSan's after librspreload, so that the
# program's poll() reaches our instrumented rpoll directly, not through
# TSan's poll interceptor, inside which TSan tracks no lock
# (docs/testing.md, "TSan and librspreload").
uroce_rspreload() {
	case ${UROCE_PRELOAD:-} in
	'') printf '%s\n' "$1" ;;
	*tsan*) printf '%s %s\n' "$1" "$UROCE_PRELOAD" ;;
	*) printf '%s %s\n' "$UROCE_PRELOAD" "$1" ;;
	esac
}

# Fails unless PROG exists and, with our LD_LIBRARY_PATH, resolves
# libibverbs.so.1 to our library and finds every symbol version it needs.
uroce_preflight() {
	local prog=$1 path ours got ldd_out missing
	[[ -n "${UROCE_LIBDIR:-}" ]] || uroce_die "UROCE_LIBDIR is not set"
	ours="$UROCE_LIBDIR/libibverbs.so.1"
	[[ -e "$ours" ]] || uroce_die "$ours does not exist (library not built?)"
	path=$(command -v "$prog") ||
		uroce_die "$prog is not installed (run scripts/setup)"
	command -v ss >/dev/null || uroce_die "ss (iproute2) is not installed"
	# ldd -r resolves every symbol, as the BIND_NOW binaries do at start
	# (including those of Debian's libmlx5/libefa/librdmacm they load).
	ldd_out=$(LD_LIBRARY_PATH="$UROCE_LIBDIR" ldd -r "$path" 2>&1) ||
		uroce_die "ldd -r $path failed: $ldd_out"
	missing=$(grep -E 'not found|undefined symbol|no version information' <<<"$ldd_out" | sort -u)
	if [[ -n $missing ]]; then
		uroce_die "$prog cannot load over $UROCE_LIBDIR ($(wc -l <<<"$missing") problems):"$'\n'"$(head -n 40 <<<"$missing")"
	fi
	got=$(awk '$1 == "libibverbs.so.1" { print $3 }' <<<"$ldd_out")
	[[ -n "$got" && "$(realpath "$got")" == "$(realpath "$ours")" ]] ||
		uroce_die "$prog would load libibverbs.so.1 from '$got', not $ours"
}

# The options of a test that runs one program, its messages as WHO:
#	uroce_one_opts WHO TIMEOUT "$@"
# where "$@" is [--timeout S] [--expect ERE]... -- PROGRAM [ARGS...].  Sets
# tmo (S, or TIMEOUT), expects (the EREs) and cmd (PROGRAM ARGS...).
uroce_one_opts() {
	local who=$1
	# shellcheck disable=SC2034  # used by the scripts that source this
	tmo=$2 expects=()
	shift 2
	while (($#)); do
		case $1 in
		--timeout) tmo=$2; shift 2 ;;
		--expect) expects+=("$2"); shift 2 ;;
		--) shift; break ;;
		*) uroce_die "$who: unknown option $1" ;;
		esac
	done
	(($#)) || uroce_die "$who: no program given"
	cmd=("$@")
}

# uroce_stat FILE NAME: counter NAME of the last summary UROCE_STATS=1
# printed at exit in FILE (the uroce-stats: line, on stderr), or empty
uroce_stat() {
	sed -n 's/.*uroce-stats: //p' "$1" | tail -n 1 | tr ' ' '\n' |
		sed -n "s/^$2=//p"
}

# uroce_port_listening PORT [NS]: something listens on TCP PORT, in
# network namespace NS if given
uroce_port_listening() {
	local -a in=()
	[[ -z ${2:-} ]] || in=(ip netns exec "$2")
	[[ -n "$("${in[@]}" ss -Hltn "sport = :$1" 2>/dev/null)" ]]
}

# Waits until PID listens on TCP PORT (in network namespace NS if given).
# Fails early if PID exits (1), and after DEADLINE (2; seconds since the
# epoch, as from `date +%s`).
uroce_wait_listen() {
	local pid=$1 port=$2 deadline=$3 ns=${4:-}
	while ! uroce_port_listening "$port" "$ns"; do
		kill -0 "$pid" 2>/dev/null || return 1
		(( $(date +%s) < deadline )) || return 2
		sleep 0.05
	done
}

uroce_print_log() {
	local title=$1 file=$2
	printf -- '----- %s (%s) -----\n' "$title" "$file"
	cat "$file" 2>/dev/null || true
	printf -- '----- end of %s -----\n' "$title"
}

# uroce_fail_logs DIR MESSAGE...: the last 20 lines of each *.out and
# *.err in DIR, then FAIL with MESSAGE and exit 1.  For a test's fail():
# fail() { uroce_fail_logs "$work" "NAME: $*"; }
uroce_fail_logs() {
	local dir=$1 f
	shift
	for f in "$dir"/*.out "$dir"/*.err; do
		[ -e "$f" ] && { echo "---- $f ----"; tail -n 20 "$f"; }
	done
	uroce_die "$*"
}

# uroce_fail_pair LOG MESSAGE...: FAIL with MESSAGE, then the server's and
# the client's output of the pair run last (LOG.srv, LOG.cli; none when LOG
# is empty), and exit 1.  For a test's fail(): fail() { uroce_fail_pair "$log" "$@"; }
uroce_fail_pair() {
	local log=$1
	shift
	printf 'FAIL: %s\n' "$*"
	if [[ -n $log ]]; then
		uroce_print_log server "$log.srv"
		uroce_print_log client "$log.cli"
	fi
	exit 1
}

# Explains an exit status from `timeout`.
uroce_rc_text() {
	case $1 in
	0) echo "exit 0" ;;
	124) echo "timed out" ;;
	137) echo "killed after timing out" ;;
	*) if (( $1 > 128 && $1 < 160 )); then echo "killed by signal $(( $1 - 128 ))"
	   else echo "exit $1"; fi ;;
	esac
}

# The words that run a command as UROCE_TEST_USER when that is set and
# this is root, one a line; none otherwise:
#	mapfile -t as < <(uroce_as_test_user)
#	"${as[@]}" prog ...
uroce_as_test_user() {
	[[ -n ${UROCE_TEST_USER:-} && $(id -u) -eq 0 ]] || return 0
	printf '%s\n' setpriv "--reuid=$UROCE_TEST_USER" \
		"--regid=$(id -g "$UROCE_TEST_USER")" --clear-groups
}

# Programs can be started on uroce two ways.  With UROCE_TOOL set (the
# build's bin/uroce) through `uroce run`, which also gives them the
# /dev/infiniband and /sys/class/infiniband entries of their device (UCX
# lists an IB device only if /dev/infiniband/<uverbs> is a character
# device it may open); as UROCE_TEST_USER when that is set and this is
# root (unprivileged ecosystem tests).  Without UROCE_TOOL, with
# LD_LIBRARY_PATH only.  uroce_launch [K=V...] prints the command words,
# one a line, that start a program that way with K=V in its environment:
#	mapfile -t launch < <(uroce_launch UCX_TLS=rc_verbs)
#	"${launch[@]}" ucx_perftest ...
# (the scripts that source this pass it K=V words; shellcheck sees only
# the call below, which passes none)
# shellcheck disable=SC2120
uroce_launch() {
	if [[ -z ${UROCE_TOOL:-} ]]; then
		printf '%s\n' env
		uroce_prog_env
		(($# == 0)) || printf '%s\n' "$@"
		return
	fi
	uroce_as_test_user
	printf '%s\n' env
	uroce_prog_env | grep -v '^LD_LIBRARY_PATH='
	(($# == 0)) || printf '%s\n' "$@"
	printf '%s\n' "$UROCE_TOOL" run --
}

# Fails unless programs can be started through `uroce run` (UROCE_TOOL
# set); skips (exit 77) if UROCE_TEST_USER cannot read the tool, our
# library or the FILES given.  The run tests stage what they start where
# everyone may read it (tests/run/stage.sh), so this skips only where
# even that copy is out of the user's reach.
uroce_run_preflight() {
	local f
	local -a as
	[[ -n ${UROCE_TOOL:-} ]] || uroce_die "UROCE_TOOL (bin/uroce, for uroce run) is not set"
	[[ -x $UROCE_TOOL ]] || uroce_die "$UROCE_TOOL is not built"
	mapfile -t as < <(uroce_as_test_user)
	((${#as[@]})) || return 0
	for f in "$UROCE_TOOL" "$UROCE_LIBDIR/libibverbs.so.1" "$@"; do
		if ! "${as[@]}" test -r "$f"; then
			echo "SKIP: $UROCE_TEST_USER cannot read $f (a directory on its path is closed to others)"
			exit 77
		fi
	done
}

# Skips (exit 77) unless `uroce run` can give programs the
# /dev/infiniband node UCX needs here (namespaces; `uroce doctor` says
# why not).
uroce_run_needs_dev() {
	local -a launch
	# shellcheck disable=SC2119
	mapfile -t launch < <(uroce_launch)
	if ! "${launch[@]}" test -c /dev/infiniband/uverbs0 2>/dev/null; then
		echo "SKIP: uroce run cannot give programs /dev/infiniband here:"
		"$UROCE_TOOL" doctor | grep -E '^(warn|FAIL) +namespaces' || true
		exit 77
	fi
}

# Fails unless UCX's IB module, which loads libibverbs for UCX (the
# programs do not link it themselves), resolves it to our library.
uroce_ucx_preflight() {
	local uct uct_ib got
	uct=$(ldconfig -p | awk '$1 == "libuct.so.0" { print $NF; exit }')
	uct_ib=${uct:+$(dirname "$uct")/ucx/libuct_ib.so.0}
	[[ -n $uct_ib && -e $uct_ib ]] ||
		uroce_die "UCX's IB module (ucx/libuct_ib.so.0) is not installed"
	got=$(LD_LIBRARY_PATH="$UROCE_LIBDIR" ldd "$uct_ib" |
	      awk '$1 == "libibverbs.so.1" { print $3 }')
	[[ -n $got && "$(realpath "$got")" == "$(realpath "$UROCE_LIBDIR/libibverbs.so.1")" ]] ||
		uroce_die "$uct_ib would load libibverbs.so.1 from '$got', not $UROCE_LIBDIR"
}
