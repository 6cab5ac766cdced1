#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Run uroce_traffic as a server/client pair on this host and judge the run.
#
#   run_pair.sh --bin PATH [--libdir DIR] [--timeout SEC] [--name NAME]
#               [--env VAR=VAL]... [--server-env VAR=VAL]...
#               [--client-env VAR=VAL]... [--server-arg ARG]...
#               [--expect-stat WHO:NAME OP VALUE]... -- CLIENT_ARGS...
#
# The server listens on an ephemeral port and writes it to a file; we poll
# for that file (bounded), start the client, and wait for both under
# `timeout`.  Both must exit 0 and print "uroce_traffic: OK ... errors=0".
# Both run with UROCE_STATS=1; each --expect-stat checks a counter from the
# "uroce-stats:" line the library prints on stderr at exit, e.g.
#   --expect-stat client:retransmits>0
#   --expect-stat server:tx_rnr_nak>=3
#   --expect-stat sum:duplicates>0        (server + client)
# On failure every log is printed and the work directory kept.

set -u
# shellcheck source=tests/lib/uroce_test.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/uroce_test.sh"

bin=
libdir=
tmo=300
name=pair
senv=()
cenv=()
sargs=()
expects=()

die() {
	echo "run_pair: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--bin) bin=$2; shift 2 ;;
	--libdir) libdir=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	--name) name=$2; shift 2 ;;
	--env) senv+=("$2"); cenv+=("$2"); shift 2 ;;
	--server-env) senv+=("$2"); shift 2 ;;
	--client-env) cenv+=("$2"); shift 2 ;;
	--server-arg) sargs+=("$2"); shift 2 ;;
	--expect-stat) expects+=("$2"); shift 2 ;;
	--) shift; break ;;
	*) die "unknown option $1" ;;
	esac
done
cargs=("$@")

[ -n "$bin" ] && [ -x "$bin" ] || die "--bin: '$bin' is not executable"
for e in "${expects[@]}"; do
	[[ $e =~ ^(server|client|sum):([A-Za-z0-9_]+)(\>=|\<=|==|!=|\>|\<)([0-9]+)$ ]] ||
		die "bad --expect-stat '$e'"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce_${name}.XXXXXX") || die "mktemp failed"
common=(UROCE_STATS=1)
if [ -n "$libdir" ]; then
	common+=("LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi

spid=
cleanup() {
	if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
	fi
}
trap cleanup EXIT

show_logs() {
	local f
	for f in server.out server.err client.out client.err; do
		[ -e "$work/$f" ] || continue
		echo "---- $name: $f ----"
		tail -n 200 "$work/$f"
	done
	echo "---- $name: logs kept in $work ----"
}

fail() {
	echo "run_pair[$name]: FAIL: $*"
	show_logs
	exit 1
}

env "${common[@]}" "${senv[@]}" timeout -k 5 "$tmo" "$bin" -p 0 \
	--port-file "$work/port" "${sargs[@]}" \
	>"$work/server.out" 2>"$work/server.err" &
spid=$!

# Bounded poll for the listening port (about 20 s).
port=
for ((i = 0; i < 400; i++)); do
	if [ -s "$work/port" ]; then
		port=$(<"$work/port")
		break
	fi
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.05
done
if [ -z "$port" ]; then
	wait "$spid"
	src=$?
	spid=
	fail "server did not start listening (exit status $src)"
fi

t0=$(date +%s.%N)
env "${common[@]}" "${cenv[@]}" timeout -k 5 "$tmo" "$bin" -s 127.0.0.1 \
	-p "$port" "${cargs[@]}" >"$work/client.out" 2>"$work/client.err"
crc=$?
wait "$spid"
src=$?
spid=
t1=$(date +%s.%N)

status() {
	case $1 in
	0) echo "0" ;;
	124|137) echo "$1 (timed out after $tmo s)" ;;
	*) echo "$1" ;;
	esac
}

errs=()
[ "$crc" -eq 0 ] || errs+=("client exit status $(status "$crc")")
[ "$src" -eq 0 ] || errs+=("server exit status $(status "$src")")
for who in server client; do
	grep -Eq '^uroce_traffic: OK bytes_moved=[0-9]+ bytes_verified=[0-9]+ completions=[0-9]+ errors=0$' \
		"$work/$who.out" || errs+=("no OK summary from the $who")
done

for e in "${expects[@]}"; do
	[[ $e =~ ^(server|client|sum):([A-Za-z0-9_]+)(\>=|\<=|==|!=|\>|\<)([0-9]+)$ ]]
	who=${BASH_REMATCH[1]} cnt=${BASH_REMATCH[2]}
	op=${BASH_REMATCH[3]} want=${BASH_REMATCH[4]}
	val=
	if [ "$who" = sum ]; then
		a=$(uroce_stat "$work/server.err" "$cnt")
		b=$(uroce_stat "$work/client.err" "$cnt")
		[ -n "$a" ] && [ -n "$b" ] && val=$((a + b))
	else
		val=$(uroce_stat "$work/$who.err" "$cnt")
	fi
	if [ -z "$val" ]; then
		errs+=("counter $cnt missing from the $who's uroce-stats line (UROCE_STATS=1)")
		continue
	fi
	case $op in
	'>') ok=$((val > want)) ;;
	'>=') ok=$((val >= want)) ;;
	'<') ok=$((val < want)) ;;
	'<=') ok=$((val <= want)) ;;
	'==') ok=$((val == want)) ;;
	'!=') ok=$((val != want)) ;;
	esac
	if [ "$ok" -ne 1 ]; then
		errs+=("counter $who:$cnt is $val, expected $op $want")
	else
		echo "run_pair[$name]: $who:$cnt=$val ($op $want) ok"
	fi
done

if [ ${#errs[@]} -gt 0 ]; then
	fail "$(printf '%s; ' "${errs[@]}")"
fi
grep -h '^uroce_traffic: OK' "$work/server.out" | sed 's/^/server: /'
grep -h '^uroce_traffic: OK' "$work/client.out" | sed 's/^/client: /'
grep -h '^uroce-stats:' "$work/server.err" | tail -n 1 | sed 's/^/server: /'
grep -h '^uroce-stats:' "$work/client.err" | tail -n 1 | sed 's/^/client: /'
awk -v a="$t0" -v b="$t1" -v n="$name" \
	'BEGIN { printf "run_pair[%s]: PASS in %.1f s\n", n, b - a }'
rm -rf "$work"
exit 0
