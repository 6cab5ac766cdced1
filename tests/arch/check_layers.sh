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
#   check_layers.sh netcalls OBJECT...
#	no object file of net/ references a symbol an object of engine/
#	defines but NET_ENGINE (uroce_progress_watch_bell): packets go up
#	through the receive entry the engine registers (struct
#	uroce_rx_entry, net/net.h), a table of pointers, not by name.
#   check_layers.sh fields SRCDIR
#	no file of verbs/ touches a QP's transport state (a field of its
#	req, resp or comp sub-struct): the front calls the engine's
#	uroce_qp_set_* / uroce_qp_reset (engine/qp_state.c) instead.
#   check_layers.sh owners SRCDIR
#	no file writes a field of another layer's sub-struct of struct
#	uroce_dev (dev.h: dev->net is net/'s; ->port, ->tx, ->ack, ->prog,
#	->flow, ->cc the engine's; ->obj obj/'s and the front's; ->stats
#	core/'s and the engine's): an assignment, ++/--, or an atomic store,
#	exchange, read-modify-write, memset or memcpy to its address.  It
#	calls the owner instead.  OWNER_EXCEPT lists the exceptions, each
#	with its reason.
#   check_layers.sh selftest
#	every check fails, naming file and include/symbol/line, on a
#	planted violation.
#
# Each violation is one line "FILE: includes X (RULE)"; exit 1 if any.
set -u

UPWARD="uroce_cq_push uroce_async_event uroce_cq_bells_defer uroce_cq_bells_take uroce_cq_bells_pay"
# what net/ may call of the engine by name (at most two; docs/architecture.md)
NET_ENGINE="uroce_progress_watch_bell"

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
	report_refs "$lower" "$tmp/front" references \
		"defined in verbs/ (only $UPWARD may go up)"
	bad=$?
	rm -rf "$tmp"
	return $bad
}

# report_refs OBJECTS FORBIDDEN VERB WHY: a line "OBJ: VERB SYM, WHY"
# for each symbol listed in the file FORBIDDEN that an object of OBJECTS
# references; returns 1 if any (uses $tmp)
report_refs() {
	bad=0
	for o in $1; do
		nm -u "$o" | awk '{ print $NF }' | sort -u | comm -12 - "$2" |
		while read -r s; do
			echo "${o##*/src/}: $3 $s, $4"
		done >"$tmp/out"
		if [ -s "$tmp/out" ]; then
			cat "$tmp/out"
			bad=1
		fi
	done
	return $bad
}

check_netcalls() {
	net=""
	engine=""
	for o in $(printf '%s\n' "$@" | tr ';' '\n'); do
		case $o in
		*/src/net/*) net="$net $o" ;;
		*/src/engine/*) engine="$engine $o" ;;
		esac
	done
	if [ -z "$net" ] || [ -z "$engine" ]; then
		echo "check_layers: no objects of net/ or of engine/ given" >&2
		return 2
	fi
	tmp=$(mktemp -d) || return 2
	# shellcheck disable=SC2086
	nm -g --defined-only $engine | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/engine"
	for s in $NET_ENGINE; do echo "$s"; done | sort >"$tmp/allowed"
	comm -23 "$tmp/engine" "$tmp/allowed" >"$tmp/named"
	report_refs "$net" "$tmp/named" calls \
		"an engine function (net/ goes up through the registered receive entry; by name only $NET_ENGINE)"
	bad=$?
	rm -rf "$tmp"
	return $bad
}

# FILE:SUB pairs that write another layer's sub-struct, and why:
#   core/dev.c builds the device (dev_init): every module's starting
#	state (descriptors -1, the object tables) before any module runs;
#	core/ is below them all and cannot call an init of theirs.
#   net/udp.c, net/share.c set the QPN ranges (dev->obj.qpn_range),
#	which follow the address's shared-device slot: at bind, at rebind
#	under the rx pause, and a range more under dev->lock; obj/ is above
#	net/, so net/ cannot call it.
OWNER_EXCEPT="core/dev.c:net core/dev.c:prog core/dev.c:port core/dev.c:obj
net/udp.c:obj net/share.c:obj"

owner_of() {
	case $1 in
	net) echo net ;;
	port|tx|ack|prog|flow|cc) echo engine ;;
	obj) echo "obj verbs" ;;
	stats) echo "core engine" ;;
	esac
}

check_owners() {
	src=$1
	tmpd=$(mktemp -d) || return 2
	subs='(net|port|tx|ack|prog|flow|cc|obj|stats)'
	write="(dev|d)->$subs\\.[][A-Za-z_0-9.>-]*[[:space:]]*(=[^=]|\\+=|-=|\\|=|&=|\\+\\+|--)"
	write="$write|(atomic_store|atomic_exchange|atomic_fetch_[a-z]+|atomic_compare_exchange_[a-z]+|__atomic_(store|exchange|add_fetch|sub_fetch|fetch_[a-z]+|compare_exchange)[a-z_]*|memset|memcpy)(_explicit)?\\(&(dev|d)->$subs\\."
	write="$write|(\\+\\+|--)(dev|d)->$subs\\."
	for f in $(cd "$src" && find core wire net obj engine verbs \
			\( -name '*.c' -o -name '*.h' \) 2>/dev/null | sort); do
		layer=${f%%/*}
		grep -nE "$write" "$src/$f" >"$tmpd/hits" 2>/dev/null
		while IFS= read -r hit; do
			sub=$(printf '%s\n' "$hit" | grep -oE "(dev|d)->$subs\\." |
				head -n 1 | sed 's/.*->//; s/\.$//')
			case " $(owner_of "$sub") " in
			*" $layer "*) continue ;;
			esac
			case " $(echo $OWNER_EXCEPT) " in
			*" $f:$sub "*) continue ;;
			esac
			echo "$f:${hit%%:*}: writes dev->$sub, $(owner_of "$sub" | sed 's/ / or /')'s (call its owner):${hit#*:}"
			echo bad >>"$tmpd/bad"
		done <"$tmpd/hits"
	done
	if [ -f "$tmpd/bad" ]; then
		rm -rf "$tmpd"
		return 1
	fi
	rm -rf "$tmpd"
	return 0
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
	printf 'int uroce_recv(void) { return 1; }\nint uroce_progress_watch_bell(void) { return 0; }\n' >"$tmp/src/engine/recv.c"
	printf 'int uroce_recv(void);\nint uroce_progress_watch_bell(void);\nint uroce_net_x(void) { return uroce_recv() + uroce_progress_watch_bell(); }\n' >"$tmp/src/net/up.c"
	"$cc" -c -o "$tmp/src/engine/recv.o" "$tmp/src/engine/recv.c" &&
	"$cc" -c -o "$tmp/src/net/up.o" "$tmp/src/net/up.c" || return 2
	out=$(check_netcalls "$tmp/src/engine/recv.o" "$tmp/src/net/up.o")
	rc=$?
	echo "$out"
	[ $rc -eq 1 ] || { echo "selftest: netcalls check passed a planted violation"; return 1; }
	echo "$out" | grep -q '^net/up.o: calls uroce_recv' &&
	! echo "$out" | grep -q 'calls uroce_progress_watch_bell' ||
		{ echo "selftest: netcalls check did not name object and symbol"; return 1; }
	mkdir -p "$tmp/own/net" "$tmp/own/engine" "$tmp/own/core"
	printf 'static void f(struct uroce_dev *dev)\n{\n\tdev->obj.nranges = 1;\n\tdev->net.sock = 2;\n}\n' >"$tmp/own/net/bad.c"
	printf 'static void g(struct uroce_dev *dev)\n{\n\tif (dev->net.sock == 3)\n\t\tatomic_store(&dev->net.gso, 0);\n}\n' >"$tmp/own/engine/bad.c"
	printf 'static int h(struct uroce_dev *dev)\n{\n\treturn dev->net.sock == dev->prog.epfd;\n}\n' >"$tmp/own/core/good.c"
	out=$(check_owners "$tmp/own")
	rc=$?
	echo "$out"
	[ $rc -eq 1 ] || { echo "selftest: owners check passed a planted violation"; return 1; }
	echo "$out" | grep -q '^net/bad.c:3: writes dev->obj' &&
	echo "$out" | grep -q '^engine/bad.c:4: writes dev->net' &&
	! echo "$out" | grep -q '^net/bad.c:4' &&
	! echo "$out" | grep -q 'good.c' ||
		{ echo "selftest: owners check did not name file, line and field"; return 1; }
	echo "selftest: every check catches a planted violation"
}

mode=${1:-}
[ $# -gt 0 ] && shift
case $mode in
includes) check_includes "${1:?SRCDIR}" ;;
fields) check_fields "${1:?SRCDIR}" ;;
symbols) check_symbols "$@" ;;
netcalls) check_netcalls "$@" ;;
owners) check_owners "${1:?SRCDIR}" ;;
selftest) selftest ;;
*) echo "usage: $0 includes SRCDIR | fields SRCDIR | symbols OBJECT... | netcalls OBJECT... | owners SRCDIR | selftest" >&2; exit 2 ;;
esac
rc=$?
[ $rc -eq 0 ] && [ "$mode" != selftest ] && echo "check_layers $mode: the layers hold"
exit $rc
