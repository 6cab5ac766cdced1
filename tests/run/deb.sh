#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The .deb (CPack): builds from the build tree, holds /usr/bin/uroce,
# /usr/lib/uroce/{libibverbs,librdmacm}.so.1 and the man page, does not
# depend on Debian's libibverbs1 (ours replaces it for uroce run's
# programs only), and, unpacked anywhere, runs programs on its own
# libraries.
#
#   deb.sh --build BUILD_DIR
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

[[ ${1:-} == --build && -n ${2:-} ]] || uroce_die "usage: deb.sh --build DIR"
build=$2
command -v cpack >/dev/null && command -v dpkg-deb >/dev/null ||
	{ echo "SKIP: cpack or dpkg-deb missing"; exit 77; }
out=$(mktemp -d "${TMPDIR:-/tmp}/uroce-deb.XXXXXX")
trap 'rm -rf "$out"' EXIT

(cd "$build" && cpack -G DEB -B "$out") >"$out/cpack.log" 2>&1 ||
	{ cat "$out/cpack.log"; uroce_die "cpack -G DEB failed"; }
debs=("$out"/uroce_*.deb)
[[ -f ${debs[0]} ]] || { cat "$out/cpack.log"; uroce_die "no uroce_*.deb"; }
deb=${debs[0]}
uroce_say "built $(basename "$deb")"
dpkg-deb -I "$deb" | sed -n '/Package:/,$p'
files=$(dpkg-deb -c "$deb" | awk '{ print $6 }')
for f in ./usr/bin/uroce ./usr/lib/uroce/libibverbs.so.1 \
	 ./usr/lib/uroce/librdmacm.so.1 ./usr/share/man/man1/uroce.1; do
	grep -Eq "^${f//./\\.}(\.gz)?\$" <<<"$files" || uroce_die "$f is not in the package"
done
deps=$(dpkg-deb -f "$deb" Depends)
[[ $deps != *libibverbs1* ]] || uroce_die "the package depends on libibverbs1: $deps"
dpkg-deb -x "$deb" "$out/root"
got=$("$out/root/usr/bin/uroce" run --no-namespace -- printenv LD_LIBRARY_PATH 2>/dev/null)
[[ ${got%%:*} == "$out/root/usr/lib/uroce" ]] ||
	uroce_die "the unpacked uroce runs programs on '$got'"
uroce_say "PASS: the .deb"
