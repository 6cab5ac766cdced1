#!/bin/bash
# SPDX-License-Identifier: MIT
#
# ABI checks of our libibverbs.so.1 against the installed Debian one.
#
#   check_symbols.sh symbols OUR_LIB [REF_LIB]
#	Every dynamic symbol REF_LIB defines, ours defines too, with the same
#	version, the same default (@@) or hidden (@) binding and the same kind
#	(function or object), and nothing more but the private functions
#	of include/uroce_private.h, under UROCE_PRIVATE_1; for librdmacm,
#	also exactly rdma-core's newer RDMACM_1.5 (repoll_*), which
#	Debian 12's lacks and a librspreload of 2026 needs.
#   check_symbols.sh load OUR_LIB_DIR [PROGRAM]
#	Debian's ibv_devices (by default) starts with our library under
#	LD_BIND_NOW without a symbol or version lookup failure.
#   check_symbols.sh resolve OUR_LIB_DIR PROGRAM...
#	`ldd -r` of each program, with our directory first on the path, picks
#	our library and leaves no symbol or version unresolved, including
#	those of the Debian libraries it pulls in (librdmacm, libmlx5 ...).
#
# Exit status: 0 pass, 1 fail, 77 skipped (a reference binary is missing).

set -u

SKIP=77
MULTIARCH_DIR=/usr/lib/x86_64-linux-gnu
# our librdmacm's calls into our libibverbs (include/uroce_private.h)
private_syms=(uroce_gsi_create uroce_dev_set_addr uroce_dev_get_addr
	uroce_dev_id_prefix uroce_dev_listen uroce_dev_rx_drain
	uroce_dev_send_acks uroce_dev_qp_unpolled uroce_dev_poll
	uroce_channel_direct)
# version nodes of rdma-core newer than Debian 12's that our librdmacm
# has (docs/rsocket.md, "epoll"): in the reference, as if it had them
newer_rdmacm=('F RDMACM_1.5 repoll_create' 'F RDMACM_1.5 repoll_ctl'
	'F RDMACM_1.5 repoll_wait' 'O RDMACM_1.5 RDMACM_1.5')
tmp=
trap '[ -n "$tmp" ] && rm -rf "$tmp"' EXIT

die() {
	echo "check_symbols: $*" >&2
	exit 1
}

skip() {
	echo "check_symbols: SKIP: $*" >&2
	exit $SKIP
}

# One line per defined dynamic symbol: "<kind> <version> <name>", where kind
# is F (function) or O (object) and a hidden, non-default version keeps its
# parentheses as objdump prints it: "(IBVERBS_1.0)".
dynsyms() {
	objdump -T "$1" | awk '
		/^[0-9a-f]+ / && $0 !~ /\*UND\*/ {
			kind = "?"
			for (i = 2; i < NF; i++)
				if ($i ~ /^D[FO]?$/ || $i ~ /^[FO]$/) {
					kind = substr($i, length($i), 1)
					break
				}
			print kind, $(NF - 1), $NF
		}' | LC_ALL=C sort -u
}

cmd_symbols() {
	local ours=$1
	local ref=${2:-$MULTIARCH_DIR/libibverbs.so.1}
	local rc=0

	[ -e "$ref" ] || skip "reference library $ref not installed"
	[ -e "$ours" ] || die "$ours does not exist"
	command -v objdump >/dev/null || skip "objdump not installed"

	tmp=$(mktemp -d) || die "mktemp failed"
	{
		dynsyms "$ref"
		[[ $(basename "$ref") != librdmacm.so* ]] ||
			printf '%s\n' "${newer_rdmacm[@]}"
	} | LC_ALL=C sort -u > "$tmp/ref"
	# our one private node (include/uroce_private.h) is the only extra
	# allowed: it must not leak into Debian's version nodes
	dynsyms "$ours" | grep -v ' (\?UROCE_PRIVATE_1)\? ' > "$tmp/ours"
	[ -s "$tmp/ref" ] || die "no symbols read from $ref"

	if ! cmp -s "$tmp/ref" "$tmp/ours"; then
		rc=1
		echo "ABI mismatch between $ref (reference) and $ours:"
		LC_ALL=C comm -23 "$tmp/ref" "$tmp/ours" | sed 's/^/  missing: /'
		LC_ALL=C comm -13 "$tmp/ref" "$tmp/ours" | sed 's/^/  extra:   /'
	fi
	# ... and libibverbs's holds exactly the functions
	# include/uroce_private.h declares
	dynsyms "$ours" | awk '$2 ~ /^\(?UROCE_PRIVATE_1\)?$/ &&
		$3 != "UROCE_PRIVATE_1" { print $1, $3 }' > "$tmp/priv"
	: > "$tmp/priv_want"
	[[ $(basename "$ref") == libibverbs.so* ]] &&
		printf 'F %s\n' "${private_syms[@]}" | LC_ALL=C sort > "$tmp/priv_want"
	if ! cmp -s "$tmp/priv_want" "$tmp/priv"; then
		rc=1
		echo "UROCE_PRIVATE_1 of $ours is not the private interface:"
		LC_ALL=C comm -23 "$tmp/priv_want" "$tmp/priv" | sed 's/^/  missing: /'
		LC_ALL=C comm -13 "$tmp/priv_want" "$tmp/priv" | sed 's/^/  extra:   /'
	fi
	echo "$(wc -l < "$tmp/ref") reference symbols," \
	     "$(wc -l < "$tmp/ours") ours"
	return $rc
}

# Sanitizer runtimes our library was linked with: an uninstrumented
# program must preload them, or ASan/TSan refuse to start.
sanitizer_preload() {
	ldd "$1" 2>/dev/null |
		awk '$1 ~ /^lib(asan|tsan|ubsan|lsan)\.so/ && $3 ~ /^\// { print $3 }' |
		paste -sd: -
}

cmd_load() {
	local dir=$1 prog=${2:-/usr/bin/ibv_devices}
	local err preload rc

	[ -x "$prog" ] || skip "$prog not installed"
	[ -e "$dir/libibverbs.so.1" ] || die "no libibverbs.so.1 in $dir"

	tmp=$(mktemp -d) || die "mktemp failed"
	err=$tmp/stderr
	preload=$(sanitizer_preload "$dir/libibverbs.so.1")
	LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		LD_PRELOAD="$preload${LD_PRELOAD:+:$LD_PRELOAD}" \
		LD_BIND_NOW=1 timeout 30 "$prog" 2> "$err"
	rc=$?
	cat "$err" >&2
	if grep -Eq 'symbol lookup error|undefined symbol|version `[^'\'']*'\'' not found|error while loading shared libraries' "$err"; then
		echo "$prog: dynamic linking failed with our library" >&2
		return 1
	fi
	if grep -Eq '^==[0-9]+==|Sanitizer' "$err"; then
		echo "$prog: sanitizer runtime complained" >&2
		return 1
	fi
	# 124: hung; 126/127: could not be run at all; >128: killed by a signal.
	if [ $rc -ge 124 ]; then
		echo "$prog: exit status $rc" >&2
		return 1
	fi
	echo "$prog ran with our library (exit status $rc)"
	return 0
}

cmd_resolve() {
	local dir=$1 prog out bad=0 ran=0
	shift

	[ -e "$dir/libibverbs.so.1" ] || die "no libibverbs.so.1 in $dir"
	command -v ldd >/dev/null || skip "ldd not installed"
	dir=$(cd "$dir" && pwd -P)

	for prog in "$@"; do
		if [ ! -x "$prog" ]; then
			echo "skipping $prog: not installed"
			continue
		fi
		ran=$((ran + 1))
		out=$(LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		      LD_BIND_NOW=1 ldd -r "$prog" 2>&1)
		if ! grep -Fq "libibverbs.so.1 => $dir/libibverbs.so.1 " <<< "$out"; then
			echo "$prog: does not resolve libibverbs.so.1 to $dir:"
			printf '%s\n' "$out"
			bad=1
			continue
		fi
		if grep -Eq 'undefined symbol|not found|symbol lookup error' <<< "$out"; then
			echo "$prog: unresolved with our library:"
			grep -E 'undefined symbol|not found|symbol lookup error' \
				<<< "$out" | sed 's/^/  /'
			bad=1
			continue
		fi
		echo "$prog: all symbols resolve"
	done
	[ $ran -gt 0 ] || skip "none of the programs is installed"
	return $bad
}

[ $# -ge 2 ] || die "usage: $0 symbols|load|resolve PATH [ARGS...]"
mode=$1
shift
case $mode in
symbols) cmd_symbols "$@" ;;
load) cmd_load "$@" ;;
resolve) cmd_resolve "$@" ;;
*) die "unknown mode $mode" ;;
esac
