#!/bin/bash
# SPDX-License-Identifier: MIT
# expect_line.sh REGEX PROG ARGS...: runs PROG; passes if it exits 0 and
# its stderr has exactly one line matching REGEX (the library's one-line
# message for an error the program provokes).
set -u
re=$1
shift
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$@" 2>"$err"
rc=$?
cat "$err" >&2
if ((rc)); then
	echo "expect_line: $1 exited $rc" >&2
	exit 1
fi
n=$(grep -Ec "$re" "$err")
if [[ $n != 1 ]]; then
	echo "expect_line: $n lines match '$re', want 1" >&2
	exit 1
fi
