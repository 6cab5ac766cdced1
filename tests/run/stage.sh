#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The run tests start their programs as UROCE_TEST_USER (nobody) when the
# suite is root, and the build tree may be where that user cannot read it
# (a CI clone under /root, mode 700).  So they run what they start from a
# copy in DIR that everyone may read: `cmake --install` of the build
# (bin/uroce, lib/uroce/, which the installed uroce finds next to itself)
# and the test programs given, in DIR/tests.  The ctest fixture
# uroce_run_stage: run_stage sets it up, run_unstage removes it.
#
#   stage.sh --build BUILD_DIR --dir DIR [PROGRAM...]
#   stage.sh --remove DIR
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/uroce_test.sh
source "$here/../lib/uroce_test.sh"

if [[ ${1:-} == --remove && -n ${2:-} ]]; then
	rm -rf -- "$2"
	exit
fi
[[ ${1:-} == --build && -n ${2:-} && ${3:-} == --dir && -n ${4:-} ]] ||
	uroce_die "usage: stage.sh --build BUILD_DIR --dir DIR [PROGRAM...]"
build=$2 dir=$4
shift 4

# a copy left by a run that was killed goes; mkdir (not -p) fails on
# anything that took its place since
umask 022
rm -rf -- "$dir"
mkdir -m 755 -- "$dir" || uroce_die "cannot make $dir"
out=$(cmake --install "$build" --prefix "$dir" 2>&1) ||
	{ printf '%s\n' "$out"; uroce_die "cmake --install $build --prefix $dir failed"; }
if (($#)); then
	install -m 755 -D -t "$dir/tests" -- "$@" ||
		uroce_die "cannot copy the test programs to $dir/tests"
fi
uroce_say "staged $build in $dir: $(cd "$dir" && find bin lib/uroce tests ! -type d 2>/dev/null | sort | tr '\n' ' ')"
