#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The layers hold (docs/architecture.md, "Layers"):
#
#   check_layers.sh includes SRCDIR
#	no file in core/ obj/ engine/ net/ wire/ (nor dev.h) includes a
#	verbs/ or rdmacm/ header, the front's umbrella uroce.h or
#	uroce_private.h; wire/ includes nothing of ours but wire/ and core/.
#   check_layers.sh symbols OBJECT...
#	no object file of those layers references a symbol that only an
#	object of verbs/ defines, except the upward interface
#	(uroce_cq_push, uroce_async_event and the receive burst's
#	uroce_cq_bells_defer/_take/_pay: obj/cq.h).
#   check_layers.sh fields SRCDIR
#	no file of verbs/ touches a QP's transport state (a field of its
#	req, resp or comp sub-struct): the front calls the engine's
#	uroce_qp_set_* / uroce_qp_reset (engine/qp_state.c) instead.
#   check_layers.sh selftest
#	every check fails, naming file and include/symbol/line, on a
#	planted violation.
#
# Each violation is one line "FILE: includes X (RULE)"; exit 1 if any.
set -u

UPWARD="uroce_cq_push uroce_async_event uroce_cq_bells_defer uroce_cq_bells_take uroce_cq_bells_pay"

check_includes() {
	src=$1
	bad=0
	for f in $(cd "$src" && find core obj engine net wire dev.h \
			\( -name '*.c' -o -name '*.h' \) 2>/dev/null | sort); do
		layer=${f%%/*}
		# the quoted includes: ours (system headers use <>)
		for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' \
				"$src/$f"); do
			case $inc in
			verbs/*|rdmacm/*|uroce.h|cm.h|uroce_private.h)
				echo "$f: includes \"$inc\" (below the verbs front: no verbs/ or rdmacm/ header)"
				bad=1
				continue ;;
			esac
			if [ "$layer" = wire ]; then
				case $inc in
				wire/*|core/*) ;;
				*)
					echo "$f: includes \"$inc\" (wire/ is pure: only wire/ and core/ headers)"
					bad=1 ;;
				esac
			fi
		done
	done
	return $bad
}

check_fields() {
	src=$1
	bad=0
	for f in $(cd "$src" && find verbs -name '*.c' 2>/dev/null | sort); do
		# "qp->req.psn", "qp->comp.wqe_state", "x.resp.epsn"
		hits=$(grep -nE '(->|\.)(req|resp|comp)\.[A-Za-z_]' "$src/$f")
		[ -n "$hits" ] || continue
		echo "$hits" | while IFS=: read -r line text; do
			echo "$f:$line: touches transport state (verbs/ calls engine/qp_state.c):$text"
		done
		bad=1
	done
	return $bad
}

check_symbols() {
	lower=""
	verbs=""
	# (ctest hands $<TARGET_OBJECTS:...> over as one ;-separated list)
	for o in $(printf '%s\n' "$@" | tr ';' '\n'); do
		case $o in
		*/src/verbs/*) verbs="$verbs $o" ;;
		*/src/core/*|*/src/obj/*|*/src/engine/*|*/src/net/*|*/src/wire/*)
			lower="$lower $o" ;;
		esac
	done
	if [ -z "$lower" ] || [ -z "$verbs" ]; then
		echo "check_layers: no objects of verbs/ or of the layers below given" >&2
		return 2
	fi
	tmp=$(mktemp -d) || return 2
	# shellcheck disable=SC2086
	nm -g --defined-only $verbs | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/verbs"
	# shellcheck disable=SC2086
	nm -g --defined-only $lower | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/lower"
	for s in $UPWARD; do echo "$s"; done | sort >"$tmp/allowed"
	# only in verbs/ (a symbol both define would not link anyway)
	comm -23 "$tmp/verbs" "$tmp/lower" | comm -23 - "$tmp/allowed" >"$tmp/front"
	bad=0
	for o in $lower; do
		nm -u "$o" | awk '{ print $NF }' | sort -u | comm -12 - "$tmp/front" |
		while read -r s; do
			echo "${o##*/src/}: references $s, defined in verbs/ (only $UPWARD may go up)"
		done >"$tmp/out"
		if [ -s "$tmp/out" ]; then
			cat "$tmp/out"
			bad=1
		fi
	done
	rm -rf "$tmp"
	return $bad
}

selftest() {
	tmp=$(mktemp -d) || return 2
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/src/engine" "$tmp/src/wire" "$tmp/src/verbs" "$tmp/src/net"
	printf '#include "dev.h"\n#include "verbs/verbs.h"\n' >"$tmp/src/engine/bad.c"
	printf '#include "wire/wire.h"\n#include "net/net.h"\n' >"$tmp/src/wire/bad.h"
	printf '#include "dev.h"\n' >"$tmp/src/net/good.c"
	out=$(check_includes "$tmp/src")
	rc=$?
	echo "$out"
	[ $rc -eq 1 ] || { echo "selftest: includes check passed a planted violation"; return 1; }
	echo "$out" | grep -q '^engine/bad.c: includes "verbs/verbs.h"' &&
	echo "$out" | grep -q '^wire/bad.h: includes "net/net.h"' &&
	! echo "$out" | grep -q 'good.c' ||
		{ echo "selftest: includes check did not name file and include"; return 1; }
	printf 'static void f(struct uroce_qp *qp)\n{\n\tqp->req.psn = 1;\n}\n' >"$tmp/src/verbs/bad.c"
	printf 'static int g(const struct t *t)\n{\n\treturn t->req;\n}\n' >"$tmp/src/verbs/good.c"
	out=$(check_fields "$tmp/src")
	rc=$?
	echo "$out"
	[ $rc -eq 1 ] || { echo "selftest: fields check passed a planted violation"; return 1; }
	echo "$out" | grep -q '^verbs/bad.c:3: touches transport state' &&
	! echo "$out" | grep -q 'good.c' ||
		{ echo "selftest: fields check did not name file and line"; return 1; }
	rm -f "$tmp/src/verbs/bad.c" "$tmp/src/verbs/good.c"
	cc=${CC:-cc}
	printf 'int uroce_front_only(void) { return 1; }\nint uroce_cq_push(void) { return 0; }\n' >"$tmp/src/verbs/front.c"
	printf 'int uroce_front_only(void);\nint uroce_cq_push(void);\nint uroce_engine_x(void) { return uroce_front_only() + uroce_cq_push(); }\n' >"$tmp/src/engine/up.c"
	"$cc" -c -o "$tmp/src/verbs/front.o" "$tmp/src/verbs/front.c" &&
	"$cc" -c -o "$tmp/src/engine/up.o" "$tmp/src/engine/up.c" || return 2
	out=$(check_symbols "$tmp/src/verbs/front.o" "$tmp/src/engine/up.o")
	rc=$?
	echo "$out"
	[ $rc -eq 1 ] || { echo "selftest: symbols check passed a planted violation"; return 1; }
	echo "$out" | grep -q '^engine/up.o: references uroce_front_only' &&
	! echo "$out" | grep -q 'references uroce_cq_push' ||
		{ echo "selftest: symbols check did not name object and symbol"; return 1; }
	echo "selftest: every check catches a planted violation"
}

mode=${1:-}
[ $# -gt 0 ] && shift
case $mode in
includes) check_includes "${1:?SRCDIR}" ;;
fields) check_fields "${1:?SRCDIR}" ;;
symbols) check_symbols "$@" ;;
selftest) selftest ;;
*) echo "usage: $0 includes SRCDIR | fields SRCDIR | symbols OBJECT... | selftest" >&2; exit 2 ;;
esac
rc=$?
[ $rc -eq 0 ] && [ "$mode" != selftest ] && echo "check_layers $mode: the layers hold"
exit $rc
