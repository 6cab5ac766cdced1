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

uroce_port_listening() {
	[[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]
}

# Waits until PID listens on TCP PORT.  Fails early if PID exits, and
# after DEADLINE (seconds since the epoch, as from `date +%s`).
uroce_wait_listen() {
	local pid=$1 port=$2 deadline=$3
	while ! uroce_port_listening "$port"; do
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

# UCX (1.13) lists an IB device only if /dev/infiniband/<dev_name> is a
# character device it may read and write (uct_ib_device_is_accessible);
# it never opens it, all goes through libibverbs.  uroce has no kernel
# device, so as root the calling script is run again in a mount namespace
# of its own with a tmpfs on /dev/infiniband holding uverbs0 as a node
# like /dev/null's: the host's /dev is left as it was (but for an empty
# /dev/infiniband directory if there was none).  Not root and no such
# node: skip (exit 77).  Usage: uroce_uverbs_node "${BASH_SOURCE[0]}" "$@"
uroce_uverbs_node() {
	local script=$1 node=/dev/infiniband/uverbs0
	shift
	if [[ -n "${UROCE_UVERBS_NS:-}" ]]; then
		mount -t tmpfs -o size=64k,mode=755 uroce-uverbs /dev/infiniband &&
		mknod -m 666 "$node" c 1 3 ||
			uroce_die "cannot make $node in the namespace"
		return 0
	fi
	[[ -c $node && -r $node && -w $node ]] && return 0
	if [[ $(id -u) -ne 0 ]] || ! command -v unshare >/dev/null; then
		echo "SKIP: UCX needs $node (a character device) and this is not root"
		exit 77
	fi
	mkdir -p /dev/infiniband || uroce_die "cannot create /dev/infiniband"
	exec unshare --mount --propagation private env UROCE_UVERBS_NS=1 \
		bash "$script" "$@"
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
