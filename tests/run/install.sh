#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The installed form: `cmake --install` into a temporary prefix (readable
# by everyone, as a CI runner's would be) lays out bin/uroce,
# lib/uroce/{libibverbs,librdmacm}.so.1 (nothing in lib/ itself, where
# the loader would find them for every program) and the man page; that
# uroce runs programs on those libraries, not the build tree's; and the
# demo's pairs (ib_write_bw, ibv_rc_pingpong -g 0) pass through it, as
# UROCE_TEST_USER when root.
#
#   install.sh --build BUILD_DIR --port TCP_PORT (uses PORT and PORT+1)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

build='' port=''
while (($#)); do
	case $1 in
	--build) build=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	*) uroce_die "install.sh: unknown option $1" ;;
	esac
done
[[ -n $build && -n $port ]] || uroce_die "usage: install.sh --build DIR --port P"
prefix=$(mktemp -d "${TMPDIR:-/tmp}/uroce-prefix.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
chmod 755 "$prefix"

cmake --install "$build" --prefix "$prefix" >"$prefix.log" 2>&1 ||
	{ cat "$prefix.log"; rm -f "$prefix.log"; uroce_die "cmake --install failed"; }
rm -f "$prefix.log"
for f in bin/uroce lib/uroce/libibverbs.so.1 lib/uroce/librdmacm.so.1 \
	 share/man/man1/uroce.1; do
	[[ -e $prefix/$f ]] || uroce_die "$f is not installed"
done
stray=$(find "$prefix/lib" -mindepth 1 -maxdepth 1 -name 'lib*')
[[ -z $stray ]] || uroce_die "libraries in the loader's reach: $stray"

export UROCE_TOOL=$prefix/bin/uroce UROCE_LIBDIR=$prefix/lib/uroce
uroce_run_preflight
mapfile -t launch < <(uroce_launch)
got=$("${launch[@]}" printenv LD_LIBRARY_PATH) || uroce_die "uroce run printenv failed"
[[ ${got%%:*} == "$UROCE_LIBDIR" ]] ||
	uroce_die "the installed uroce runs programs on '$got', not $UROCE_LIBDIR"
# our librdmacm finds our libibverbs next to it without the build tree
deps=$(ldd "$UROCE_LIBDIR/librdmacm.so.1")
grep -q "libibverbs.so.1 => $UROCE_LIBDIR/" <<<"$deps" ||
	uroce_die "the installed librdmacm does not load the installed libibverbs"

"$here/../conformance/pair.sh" --kind perftest --port "$port" --timeout 60 -- \
	ib_write_bw -F || uroce_die "ib_write_bw through the installed uroce"
"$here/../conformance/pair.sh" --kind pingpong --port "$((port + 1))" --timeout 60 -- \
	ibv_rc_pingpong -g 0 -n 1000 || uroce_die "ibv_rc_pingpong through the installed uroce"
uroce_say "PASS: installed to a prefix, the demo pairs run from there"
