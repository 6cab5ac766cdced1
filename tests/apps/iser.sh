#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# iSER storage over uroce: Debian's tgt (tgtd, an iSCSI target with an
# iSER portal) serves a file-backed LUN on tmpfs, and libiscsi's tools
# reach it over iser://, each program through `uroce run`.
#
#   iser.sh --scenario S [--verify PATH]
#
# Scenarios:
#   tools      one host: iscsi-inq, iscsi-readcapacity16, iscsi_verify
#              (ours: 16 MiB written and read back over iSER,
#              every byte checked, the backing file checked too), what
#              iSER wrote read back over TCP and what TCP wrote read over
#              iSER (the two targets share one backing file), iscsi-perf
#              for 2 s; tgtd's uroce device must have carried the data
#   tools-2ns  the same with tgtd in one namespace and the initiators in
#              another, over a veth pair (UDP)
#   test-cu    libiscsi's iscsi-test-cu against one tgtd: the suites in
#              $cu_suites over iscsi:// (TCP) and then over iser://; every
#              test that passed over TCP must pass over iSER
#
# tgtd is started as `uroce run -- tgtd -f` and configured by tgtadm like
# any tgtd; its control socket lives in a tmpfs of this test's own mount
# namespace, so that tests (and other tgtds) on the host do not meet.  At
# the end it is shut down as its service file does (offline, delete the
# targets, delete the system): a target with a session left (a connection
# whose end tgtd never learnt) refuses to go, and tgtd must exit 0.
# (libiscsi 1.19's iscsi-ls takes only iscsi:// URLs: it has no iSER.)
# tgt 1.0.85's iSER login checks the initiator name against the target's
# IQN ACL even when its address ACL admits everyone (its TCP login does
# not), so the iSER targets list the initiator names the tools use.
set -u

name='' verify=''
while [ $# -gt 0 ]; do
	case $1 in
	--scenario) name=$2; shift 2 ;;
	--verify) verify=$2; shift 2 ;;
	*) echo "iser.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
case $name in
tools) net=10.81.1 ;;
tools-2ns) net=10.81.2 ;;
test-cu) net=10.81.3 ;;
*) echo "iser.sh: --scenario tools|tools-2ns|test-cu" >&2; exit 2 ;;
esac
name=iser-$name

for p in tgtd tgtadm iscsi-inq iscsi-readcapacity16 iscsi-perf iscsi-test-cu; do
	command -v "$p" >/dev/null ||
		{ echo "SKIP: $p is not installed (tgt, libiscsi-bin)"; exit 77; }
done
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: tgtd and network namespaces need root"
	exit 77
fi
# a mount namespace of our own, for tgtd's control socket
if [ -z "${APPS_OWN_MOUNTS:-}" ]; then
	APPS_OWN_MOUNTS=1 exec unshare -m --propagation private "$0" \
		--scenario "${name#iser-}" --verify "$verify"
fi
if ! { mkdir -p /run/tgtd && mount -t tmpfs -o mode=0755 tgtd /run/tgtd; }; then
	echo "iser.sh: cannot mount a tmpfs on /run/tgtd"
	exit 1
fi

# shellcheck source=tests/apps/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IQN=iqn.2026-01.org.uroce
INIT=$IQN:initiator	# every tool's initiator name (-i)
INIT2=$IQN:initiator-2	# iscsi-test-cu's second one (-I)

apps_up
lun=$(mktemp -d /dev/shm/uroce_apps_lun.XXXXXX) || fail "mktemp on /dev/shm"
scratch+=("$lun")

# tgtd in A, reached at $taddr; initiators in $ini
if [ "$name" = iser-tools-2ns ]; then
	ini=B taddr=$addrA
	topts=(--ifname vA) iopts=(--ifname vB)
else
	ini=A taddr=127.0.0.1
	topts=(--addr 127.0.0.1) iopts=()
fi

tgt() { tgtadm "$@" >>"$work/tgtadm.log" 2>&1 || fail "tgtadm $*"; }

# target TID LLD NAME FILE: a target with FILE as LUN 1, open to everyone
tids=()
target() {
	tids+=("$1:$2")
	tgt --lld "$2" --op new --mode target --tid "$1" -T "$IQN:$3"
	tgt --lld "$2" --op new --mode logicalunit --tid "$1" --lun 1 -b "$4"
	tgt --lld "$2" --op bind --mode target --tid "$1" -I ALL
	if [ "$2" = iser ]; then
		tgt --lld iser --op bind --mode target --tid "$1" -Q "$INIT"
		tgt --lld iser --op bind --mode target --tid "$1" -Q "$INIT2"
	fi
}

truncate -s 64M "$lun/shared" "$lun/tcp" "$lun/iser" || fail "truncate"
urun A "${topts[@]}" -- tgtd -f >"$work/tgtd.log" 2>&1 &
tgtd_pid=$!
pids+=("$tgtd_pid")
hard_pids+=("$tgtd_pid")	# (tgtd ignores SIGTERM)
wait_for 20 "$tgtd_pid" test -S /run/tgtd/socket.0 ||
	fail "tgtd did not open its control socket"
# tgtd's iSER driver is up (it disables itself if its portal cannot
# listen: rdma_bind_addr on 0.0.0.0 and on [::])
tgtadm --lld iser --op show --mode target >/dev/null 2>"$work/driver.log" ||
	fail "tgtd's iser driver is not there: $(cat "$work/driver.log")"

# run_i WHO PROG ARGS...: an initiator through uroce run, its output in
# $work/WHO.log; fails the test unless it exits 0 within 120 s
run_i() {
	local who=$1 rc
	shift
	(urun -t 120 "$ini" "${iopts[@]}" -- "$@") >"$work/$who.log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || errs+=("$who: $(uroce_rc_text $rc)")
	return $rc
}
# a plain TCP initiator (no RDMA): in the initiators' namespace
run_tcp() {
	local who=$1 rc
	shift
	timeout -k 5 120 ip netns exec "$(ns_of "$ini")" "$@" \
		>"$work/$who.log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || errs+=("$who: $(uroce_rc_text $rc)")
	return $rc
}

tools() {
	local u_iser=iser://$taddr/$IQN:shared-iser/1
	local u_tcp=iscsi://$taddr/$IQN:shared-tcp/1
	local rx tx

	[ -x "$verify" ] || fail "--verify: '$verify' is not built"
	target 1 iscsi shared-tcp "$lun/shared"
	target 2 iser shared-iser "$lun/shared"

	run_i inq iscsi-inq -i "$INIT" "$u_iser" &&
		{ grep -q '^Vendor:IET' "$work/inq.log" ||
		  errs+=("iscsi-inq printed no Vendor:IET"); }
	run_i capacity iscsi-readcapacity16 -i "$INIT" "$u_iser" &&
		{ grep -qx 'Total size:67108864' "$work/capacity.log" ||
		  errs+=("iscsi-readcapacity16 did not find 64 MiB"); }
	run_i verify-iser "$verify" -i "$INIT" -s 11 -m 16 -q 8 \
		-f "$lun/shared" "$u_iser" &&
		{ grep -q '^iscsi_verify: OK .* bytes_verified=16777216 ' \
			"$work/verify-iser.log" ||
		  errs+=("iscsi_verify over iSER did not verify 16 MiB"); }
	# what iSER wrote, read over TCP, and the other way
	run_tcp verify-tcp-read "$verify" -i "$INIT" -s 11 -m 16 -r "$u_tcp"
	run_tcp verify-tcp-write "$verify" -i "$INIT" -s 12 -m 32 -w "$u_tcp"
	run_i verify-iser-read "$verify" -i "$INIT" -s 12 -m 32 -q 16 -r \
		"$u_iser" &&
		{ grep -q 'bytes_verified=33554432 ' "$work/verify-iser-read.log" ||
		  errs+=("iscsi_verify -r over iSER did not verify 32 MiB"); }
	run_i perf iscsi-perf -i "$INIT" -t 2 "$u_iser" &&
		{ grep -Eq 'iops average [1-9][0-9]* \([0-9]+ MB/s\)' \
			"$work/perf.log" ||
		  errs+=("iscsi-perf printed no rate"); }
	# the data went through tgtd's uroce device: the 16 MiB written over
	# iSER came in (tgtd RDMA READs it), the 48 MiB read went out (RDMA
	# WRITEs), besides iscsi-perf's reads
	rx=$(counter "$tgtd_pid" rx_bytes)
	tx=$(counter "$tgtd_pid" tx_bytes)
	[ "${rx:-0}" -ge $((16 << 20)) ] ||
		errs+=("tgtd's device received ${rx:-no} bytes, want >= 16 MiB")
	[ "${tx:-0}" -ge $((48 << 20)) ] ||
		errs+=("tgtd's device sent ${tx:-no} bytes, want >= 48 MiB")
	echo "apps[$name]: tgtd's device: rx_bytes=${rx:-?} tx_bytes=${tx:-?}"
}

# iscsi-test-cu: the suites below of its ALL family (LINUX repeats them),
# one run per suite for each transport.  Left out, for what libiscsi
# 1.19's iSER initiator itself cannot do whatever the RDMA device (its
# lib/iser.c; each crash's backtrace is in libiscsi or in a thread of
# its own):
#  - ProutReserve, Reserve6: their tests that log in a second session or
#    log out and in again crash in libiscsi's iSER CM thread:
#    iscsi_destroy_context calls the transport's disconnect only when
#    iscsi->fd is set, which iSER never sets, so the thread outlives
#    the freed context and handles the target's DISCONNECTED with it
#    (the suites that only log in again, PreventAllow, Sanitize,
#    StartStopUnit, MultipathIO, ..., pass: the crash needs the event
#    to arrive after the free);
#  - ExtendedCopy: its first test writes and reads 1 MiB in one command,
#    which iSER refuses (DATA_BUFFER_SIZE, 256 KiB), and the next
#    crashes;
#  - GetLBAStatus: after BeyondEol (which fails over TCP too) UnmapSingle
#    frees a pointer from a reply whose length iSER took from the
#    allocation length, not from what the target sent: SIGSEGV in free;
#  - iSCSIcmdsn: expects a command to go unanswered, and iSER's
#    iscsi_service fails on a poll that timed out ("revents is not
#    POLLIN");
#  - iSCSIResiduals (crashes in iscsi_scsi_command_async), iSCSITMF
#    (crashes in iscsi_task_mgmt_async);
#  - Read10.Async, Write10.Async: 1000 commands in flight, and iSER has
#    256 send descriptors (a crash when they run out);
#  - Inquiry.AllocLength, Inquiry.BlockLimits, ModeSense6.Residuals:
#    iSER reports a READ's data length as the allocation length, not
#    what the target sent, and no residual underflow;
#  - WriteSame10.ZeroBlocks, WriteSame16.ZeroBlocks: a WRITE SAME of 0
#    blocks at LBA 0 writes the whole LUN, which tgt does a block at a
#    time; past 1 s (a busy machine) the sync call's poll times out, and
#    iSER's iscsi_service fails on it as for iSCSIcmdsn.
# The same teardown crash can end a run after its last test (the
# session's CM thread outlives it): a run that crashed after printing
# its summary counts by its results.  iscsi-test-cu logs in anew for
# every test, and each context it destroys leaves that thread behind:
# when it is scheduled late (a loaded machine), it reads the freed
# context and dies of SIGSEGV in rdma_get_cm_event (gdb: a channel
# pointer of 0x31) in whatever suite runs then.  So an iSER run killed
# by SIGSEGV before its summary is run once more; crashing twice fails.
# A process that died keeps its session in tgtd (nothing speaks for a
# dead process: docs/rdmacm.md), so after such a crash tgtd is killed
# instead of shut down (tgt 1.0.85 asserts when a target is deleted by
# force with an iSER connection left); apps.iser checks the shutdown.
cu_suites="CompareAndWrite Inquiry Mandatory ModeSense6 MultipathIO NoMedia
	OrWrite Prefetch10 Prefetch16 PreventAllow PrinReadKeys
	PrinReportCapabilities PrinServiceactionRange ProutClear ProutPreempt
	ProutRegister Read6 Read10 Read12 Read16 ReadCapacity10 ReadCapacity16
	ReadDefectData10 ReadDefectData12 ReadOnly ReceiveCopyResults
	ReportSupportedOpcodes Sanitize StartStopUnit TestUnitReady Unmap
	Verify10 Verify12 Verify16 Write10 Write12 Write16 WriteAtomic16
	WriteSame10 WriteSame16 WriteVerify10 WriteVerify12 WriteVerify16
	iSCSIdatasn"
cu_known='^(Read10\.Async|Write10\.Async|Inquiry\.AllocLength|Inquiry\.BlockLimits|ModeSense6\.Residuals|WriteSame1[06]\.ZeroBlocks)$'

# cu_run tcp|iser URL: each suite in a run of its own, the verbose output
# of all in $work/cu-T.log
cu_crashes=0
cu_run() {
	local t=$1 url=$2 s rc pat out try
	local -a args
	for s in $cu_suites; do
		pat=ALL.$s
		# (fnmatch: every test of the suite but Async)
		case $s in Read10|Write10) pat="ALL.$s.[!A]*" ;; esac
		args=(iscsi-test-cu -d -v -i "$INIT" -I "$INIT2" -t "$pat" "$url")
		out=$work/cu-$t.$s.out
		for try in 1 2; do
			if [ "$t" = iser ]; then
				(urun -t 60 "$ini" "${iopts[@]}" -- "${args[@]}")
			else
				timeout -k 5 60 ip netns exec "$(ns_of "$ini")" "${args[@]}"
			fi >"$out" 2>&1
			rc=$?
			if [ "$t" != iser ] || [ $rc -ne 139 ] ||
			   grep -q '^Run Summary:' "$out"; then
				break
			fi
			cu_crashes=$((cu_crashes + 1))
			((try == 1)) || break
			echo "apps[$name]: $pat over iSER: SIGSEGV before its summary (libiscsi's CM thread): once more"
		done
		cat "$out" >>"$work/cu-$t.log"
		# (it exits 1 when a test failed: the comparison judges those)
		if [ $rc -gt 1 ] && ! grep -q '^Run Summary:' "$out"; then
			errs+=("iscsi-test-cu -t $pat over $t: $(uroce_rc_text $rc) before its summary")
		fi
		rm -f "$out"
	done
}

# results T passed|ran: "Suite.Test" of each test of the runs over T (or
# of those that passed), from CUnit's verbose output: "  Test: NAME ..."
# and, after whatever the test printed, "passed" or "FAILED"
results() {
	awk -v want="$2" '
		/^Suite: / { s = $2 }
		/^  Test: / { t = $0; sub(/^  Test: /, "", t); sub(/ \.\.\..*/, "", t)
			cur = s "." t; if (want == "ran") print cur }
		cur != "" && /passed$/ { if (want == "passed") print cur; cur = "" }
		cur != "" && /FAILED$/ { cur = "" }' "$work/cu-$1.log" | sort -u
}
passed() { results "$1" passed | grep -Ev "$cu_known"; }
ran() { results "$1" ran; }

test_cu() {
	local n_tcp n_iser missing
	target 1 iscsi cu-tcp "$lun/tcp"
	target 2 iser cu-iser "$lun/iser"
	cu_run tcp "iscsi://$taddr/$IQN:cu-tcp/1"
	cu_run iser "iser://$taddr/$IQN:cu-iser/1"
	passed tcp >"$work/pass-tcp"
	passed iser >"$work/pass-iser"
	n_tcp=$(wc -l <"$work/pass-tcp")
	n_iser=$(wc -l <"$work/pass-iser")
	[ "$n_tcp" -ge 150 ] ||
		errs+=("only $n_tcp tests passed over TCP: the target is not set up as expected")
	[ "$(ran tcp | wc -l)" -eq "$(ran iser | wc -l)" ] ||
		errs+=("$(ran tcp | wc -l) tests ran over TCP, $(ran iser | wc -l) over iSER")
	missing=$(comm -23 "$work/pass-tcp" "$work/pass-iser")
	[ -z "$missing" ] ||
		errs+=("passed over TCP, not over iSER: $(echo $missing)")
	echo "apps[$name]: $(echo $cu_suites | wc -w) suites, $(ran tcp | wc -l) tests: $n_tcp passed over TCP, $n_iser over iSER"
	comm -13 "$work/pass-tcp" "$work/pass-iser" | sed 's/^/  passed over iSER only: /'
}

case $name in
iser-tools|iser-tools-2ns) tools ;;
iser-test-cu) test_cu ;;
esac

# tgtd still up: nothing killed it on the way (a signal delivered to a
# thread that does not block it, a crash); then its orderly shutdown
shutdown_tgtd() {
	local t rc
	tgt --op update --mode sys --name State -v offline
	for t in "${tids[@]}"; do
		# the initiators have all exited: their sessions end within
		# a few seconds (DREQ, or tgtd's own timeouts)
		for ((i = 0; i < 100; i++)); do
			tgtadm --lld "${t#*:}" --op delete --mode target \
				--tid "${t%%:*}" >"$work/delete.out" 2>&1 && break
			sleep 0.1
		done
		if ((i == 100)); then
			errs+=("target ${t%%:*} (${t#*:}) still has a session 10 s after its initiators exited: $(cat "$work/delete.out")")
			tgtadm --lld "${t#*:}" --op delete --mode target \
				--tid "${t%%:*}" --force >>"$work/tgtadm.log" 2>&1
		fi
	done
	tgt --op delete --mode system
	if ! wait_gone 10 "$tgtd_pid"; then
		errs+=("tgtd still runs 10 s after its shutdown")
		kill -KILL "$tgtd_pid"
	fi
	wait "$tgtd_pid"
	rc=$?
	[ $rc -eq 0 ] || errs+=("tgtd: $(uroce_rc_text $rc)")
	pids=() hard_pids=()
}
if alive "$tgtd_pid" && ((cu_crashes)); then
	echo "apps[$name]: $cu_crashes iSER run(s) died before logging out: tgtd killed, not shut down"
elif alive "$tgtd_pid"; then
	shutdown_tgtd
else
	errs+=("tgtd exited: $(tail -n 3 "$work/tgtd.log")")
fi
pids=()
apps_end
