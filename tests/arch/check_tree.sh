#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The README's "Source tree" names what is in the tree:
#
#   check_tree.sh tree ROOT
#	every folder directly under ROOT/src and ROOT/tests starts a line of
#	the code block under "## Source tree" in ROOT/README.md (as
#	"src/NAME/" or "tests/NAME/"), and every ROOT/docs/*.md is named in
#	that block.  Entries for folders that do not exist (yet) are allowed:
#	the check goes from the tree to the list.
#   check_tree.sh selftest ROOT
#	copies ROOT's README.md and the folder and docs names into a scratch
#	tree, which must pass; then plants a folder under src/, one under
#	tests/ and a docs/*.md file, and the check must fail naming each.
#   check_tree.sh sources ROOT
#	every .c file under ROOT/src is named in a CMakeLists.txt of its
#	folder or one above it (by its path from there): the sources are
#	listed, not globbed, and a file no list names would not be built.
#	The selftest plants an unlisted src/core/planted.c.
#   check_tree.sh sizes ROOT
#	no source file (.c, .h) under ROOT/src/net has more than 900 lines
#	and none under ROOT/src more than 1500 (docs/architecture.md, "File
#	size"): a file past them is several modules.  The selftest plants a
#	901-line src/net file and a 1501-line src/core file.
#
# Each omission is one line "PATH: not named in README.md's Source tree"
# (or "PATH: in no CMakeLists.txt", "PATH: N lines, over M"); exit 1 if
# any.
set -u

# the lines of the code block under "## Source tree"
tree_block() {
	awk '/^## Source tree/ { sec = 1; next }
	     sec && /^## / { exit }
	     sec && /^```/ { blk = !blk; next }
	     sec && blk { print }' "$1/README.md"
}

check_tree() {
	root=$1
	bad=0
	if [ ! -f "$root/README.md" ]; then
		echo "$root/README.md: missing"
		return 1
	fi
	block=$(tree_block "$root")
	if [ -z "$block" ]; then
		echo "README.md: no code block under \"## Source tree\""
		return 1
	fi
	for top in src tests; do
		for d in $(cd "$root/$top" && find . -mindepth 1 -maxdepth 1 \
				-type d ! -name '.*' ! -name __pycache__ | sort); do
			d=${d#./}
			if ! printf '%s\n' "$block" | grep -q "^$top/$d/"; then
				echo "$top/$d/: not named in README.md's Source tree"
				bad=1
			fi
		done
	done
	for f in $(cd "$root/docs" && ls -- *.md 2>/dev/null); do
		if ! printf '%s\n' "$block" | grep -qFw -- "$f"; then
			echo "docs/$f: not named in README.md's Source tree"
			bad=1
		fi
	done
	return $bad
}

check_sources() {
	root=$1
	bad=0
	for f in $(cd "$root" && find src -name '*.c' | sort); do
		dir=${f%/*}
		found=0
		while :; do
			rel=${f#"$dir"/}
			if [ -f "$root/$dir/CMakeLists.txt" ] &&
			   grep -qE "(^|[[:space:]/}])$rel([[:space:])]|\$)" \
				"$root/$dir/CMakeLists.txt"; then
				found=1
				break
			fi
			case $dir in */*) dir=${dir%/*} ;; *) break ;; esac
		done
		# the top-level list names src/...
		if [ $found -eq 0 ] &&
		   grep -qE "(^|[[:space:]])$f([[:space:])]|\$)" "$root/CMakeLists.txt"; then
			found=1
		fi
		if [ $found -eq 0 ]; then
			echo "$f: in no CMakeLists.txt"
			bad=1
		fi
	done
	return $bad
}

check_sizes() {
	root=$1
	bad=0
	for f in $(cd "$root" && find src -name '*.[ch]' | sort); do
		case $f in src/net/*) max=900 ;; *) max=1500 ;; esac
		n=$(wc -l <"$root/$f")
		if [ "$n" -gt $max ]; then
			echo "$f: $n lines, over $max"
			bad=1
		fi
	done
	return $bad
}

# expect_fail DIR NAME [CHECK]: the check fails on DIR and its output
# names NAME
expect_fail() {
	out=$(${3:-check_tree} "$1")
	if [ $? -eq 0 ]; then
		echo "selftest: check passed with $2 planted"
		return 1
	fi
	if ! printf '%s\n' "$out" | grep -qF -- "$2"; then
		echo "selftest: failure does not name $2:"
		printf '%s\n' "$out"
		return 1
	fi
	return 0
}

selftest() {
	root=$1
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	fail=0

	cp "$root/README.md" "$tmp/"
	mkdir -p "$tmp/src" "$tmp/tests" "$tmp/docs"
	for top in src tests; do
		(cd "$root/$top" && find . -mindepth 1 -maxdepth 1 -type d) |
		while read -r d; do mkdir -p "$tmp/$top/$d"; done
	done
	for f in "$root"/docs/*.md; do
		: >"$tmp/docs/${f##*/}"
	done
	if ! out=$(check_tree "$tmp"); then
		echo "selftest: a copy of the tree fails:"
		printf '%s\n' "$out"
		fail=1
	fi

	mkdir "$tmp/src/planted"
	expect_fail "$tmp" "src/planted/" || fail=1
	rmdir "$tmp/src/planted"

	mkdir "$tmp/tests/planted"
	expect_fail "$tmp" "tests/planted/" || fail=1
	rmdir "$tmp/tests/planted"

	: >"$tmp/docs/planted.md"
	expect_fail "$tmp" "docs/planted.md" || fail=1
	rm "$tmp/docs/planted.md"

	# a name that only appears in prose outside the block does not count
	mkdir "$tmp/tests/prose"
	printf '\ntests/prose/ is mentioned here, outside the block\n' \
		>>"$tmp/README.md"
	expect_fail "$tmp" "tests/prose/" || fail=1

	# sources: a copy of the lists and of the .c files passes, a planted
	# .c file in no list fails
	(cd "$root" && find src -name '*.c' -o -name CMakeLists.txt) |
	while read -r f; do
		mkdir -p "$tmp/${f%/*}"
		cp "$root/$f" "$tmp/$f"
	done
	cp "$root/CMakeLists.txt" "$tmp/"
	if ! out=$(check_sources "$tmp"); then
		echo "selftest: a copy of the source lists fails:"
		printf '%s\n' "$out"
		fail=1
	fi
	mkdir -p "$tmp/src/core"
	: >"$tmp/src/core/planted.c"
	expect_fail "$tmp" "src/core/planted.c" check_sources || fail=1

	# sizes: the copied sources pass; a long file in net/ and one
	# elsewhere fail
	if ! out=$(check_sizes "$tmp"); then
		echo "selftest: a copy of the sources is too long:"
		printf '%s\n' "$out"
		fail=1
	fi
	mkdir -p "$tmp/src/net"
	seq 901 >"$tmp/src/net/planted.c"
	expect_fail "$tmp" "src/net/planted.c: 901 lines" check_sizes || fail=1
	rm "$tmp/src/net/planted.c"
	seq 1501 >"$tmp/src/core/planted.h"
	expect_fail "$tmp" "src/core/planted.h: 1501 lines" check_sizes ||
		fail=1

	[ $fail -eq 0 ] && echo "selftest: every planted omission caught"
	return $fail
}

case ${1:-} in
tree)		check_tree "${2:?ROOT}" ;;
sources)	check_sources "${2:?ROOT}" ;;
sizes)		check_sizes "${2:?ROOT}" ;;
selftest)	selftest "${2:?ROOT}" ;;
*)		echo "usage: $0 tree|sources|sizes|selftest ROOT" >&2; exit 2 ;;
esac
