#!/bin/bash
# SPDX-License-Identifier: MIT
#
# An interop test bed: a QEMU guest running Debian's own kernel with the
# kernel's Soft-RoCE (rdma_rxe) and rdma-core's tools, on a tap link to this
# host, so that uroce on the host can talk to rxe in the guest.
#
#   vm.sh build                 download the .debs (cached) and build the
#                               guest (kernel + initramfs, cached)
#   vm.sh up                    build if needed, create the tap, boot the
#                               guest, wait until it is ready, add rxe0
#   vm.sh exec [-t SECS] -- CMD run the shell command CMD in the guest; its
#                               output (stdout and stderr) comes back here,
#                               its exit status is ours (124: timed out)
#   vm.sh down                  power the guest off, kill QEMU, remove the tap
#   vm.sh check                 exit 77 (with the reason) if this machine
#                               cannot run the guest, 0 if it can
#   vm.sh status                print the guest's state
#   vm.sh require               for a test that needs the guest: exit 77
#                               (SKIP: why) if this machine cannot run
#                               it, 1 (FAIL) if it is not running, else 0
#   vm.sh dump                  what a guest that stopped answering is
#                               doing: QEMU's view (monitor), the kernel's
#                               (sysrq w, l, t) and its console since the
#                               last dump.  `exec` does this by itself when
#                               the guest does not answer
#   vm.sh answers               exit 0 if the guest runs a command within
#                               5 s, 1 if not (no dump)
#   vm.sh pause                 stop the guest's vCPU (QEMU's monitor), as a
#                               guest that stopped answering, for a test
#
# Everything runs on this machine: the guest is reachable only over the tap
# link, a private /24 of its own (10.77.0.0/24 by default, no NAT: the
# ICRC covers the IP addresses).  Host side 10.77.0.1, guest 10.77.0.2.
#
# The guest is an initramfs: busybox-static, the rdma-core packages and the
# few kernel modules needed, extracted from Debian's .debs (apt-get
# download).  Its /init loads the modules, configures eth0, runs
# `rdma link add rxe0 type rxe netdev eth0`, and serves commands on TCP
# port 7777 of the guest (busybox nc -ll): each connection sends a shell
# script, half-closes, and reads the script's output followed by a line
# "__uroce_rc=<status>".  Commands run side by side, each on its own
# connection, so a guest server and a host client can run together.
#
# Needs root (tap device).  A machine without /dev/net/tun, without
# qemu-system-x86_64 or without root makes `up` and `check` exit 77.
#
# Environment:
#   UROCE_INTEROP_CACHE  download and build cache
#                        (default ${XDG_CACHE_HOME:-~/.cache}/uroce-interop)
#   UROCE_INTEROP_STATE  run-time state: pid file, console log, monitor
#                        (default /tmp/uroce-interop)
#   UROCE_INTEROP_NET    the first three octets of the link (default 10.77.0)
#   UROCE_INTEROP_TAP    the tap's name (default uroce-tap0)
#   UROCE_INTEROP_QEMU   the QEMU program (default qemu-system-x86_64)
#   UROCE_INTEROP_ACCEL  QEMU accelerator (default tcg; KVM does not boot
#                        guests on every host)
#   UROCE_INTEROP_SMP    guest CPUs (default 1: under TCG each one takes a
#                        host core, and the host side needs one too)
#   UROCE_INTEROP_BOOT_TIMEOUT  seconds to wait for the guest (default 180)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${UROCE_INTEROP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uroce-interop}
state=${UROCE_INTEROP_STATE:-/tmp/uroce-interop}
net=${UROCE_INTEROP_NET:-10.77.0}
tap=${UROCE_INTEROP_TAP:-uroce-tap0}
accel=${UROCE_INTEROP_ACCEL:-tcg}
qemu=${UROCE_INTEROP_QEMU:-qemu-system-x86_64}
smp=${UROCE_INTEROP_SMP:-1}
boot_timeout=${UROCE_INTEROP_BOOT_TIMEOUT:-180}
host_ip=$net.1
guest_ip=$net.2
ctl_port=7777
# Bump when the guest's layout or /init changes in a way the cache key
# (package file names + this script + init) would not notice.
layout_version=1

# What the guest runs: rdma-core's tools and their libraries (librdmacm1
# has librspreload.so, rdmacm-utils rstream); iperf3 for rsockets under
# librspreload; busybox for everything else (iproute2 for `rdma` and `ip`).
guest_packages=(libibverbs1 ibverbs-providers ibverbs-utils perftest
	librdmacm1 rdmacm-utils qperf iperf3 busybox-static iproute2)
# Pulled in by the dependency closure but never run in the guest (iperf3's
# package scripts bring perl and the init system's helpers).
guest_skip='^(adduser|passwd|cdebconf|debconf|dpkg|install-info|tar|libpam-modules|libpam-modules-bin|libdebian-installer4|libnewt0\.52|libtextwrap1|libslang2|libsemanage-common|libsemanage2|pci\.ids|readline-common|libreadline8|perl-base|perl|perl-modules-.*|libperl.*|lib.*-perl|libgdbm.*|init-system-helpers|usrmerge|usr-is-merged)$'
# Kernel modules the guest loads; their dependencies are found from the
# modules' own "depends=" fields.  rxe asks the crypto API for "crc32" (the
# ICRC), which the kernel would modprobe; we load crc32_generic ourselves.
# rdma_ucm brings the kernel's rdma_cm and IB CM (librdmacm's programs).
guest_modules=(virtio_pci virtio_net crc32_generic rdma_rxe ib_uverbs rdma_ucm)

say() { printf 'vm: %s\n' "$*" >&2; }
die() { printf 'vm: FAIL: %s\n' "$*" >&2; exit 1; }
skip() { printf 'vm: SKIP: %s\n' "$*" >&2; exit 77; }

# ---------------------------------------------------------------- check
# Why this machine cannot run the guest, or nothing.
cannot_run() {
	if [[ $(id -u) -ne 0 ]]; then
		echo "not root: the tap link to the guest needs root"; return
	fi
	if [[ ! -c /dev/net/tun ]]; then
		echo "no /dev/net/tun on this machine: cannot create the tap link to the guest"; return
	fi
	if ! command -v "$qemu" >/dev/null; then
		echo "$qemu is not installed (apt-get install qemu-system-x86; scripts/setup does it)"; return
	fi
	if ! command -v ip >/dev/null; then
		echo "ip (iproute2) is not installed"; return
	fi
	if ! command -v python3 >/dev/null; then
		echo "python3 is not installed (the guest's command channel uses it)"; return
	fi
	if ! ip tuntap add dev uroce-tuntest mode tap 2>/dev/null; then
		echo "cannot create a tap device here (ip tuntap add failed: no CAP_NET_ADMIN or no tun support)"; return
	fi
	ip link del uroce-tuntest 2>/dev/null
}

cmd_check() {
	local why
	why=$(cannot_run)
	[[ -z $why ]] || skip "$why"
	say "this machine can run the interop guest"
}

# ---------------------------------------------------------------- build
# Prints "package-name" lines: the guest packages and everything they
# depend on, minus $guest_skip.
package_closure() {
	apt-cache depends --recurse --no-recommends --no-suggests \
		--no-conflicts --no-breaks --no-replaces --no-enhances \
		"${guest_packages[@]}" 2>/dev/null |
		grep -v '^[ <]' | sort -u | grep -Ev "$guest_skip"
}

kernel_package() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}

# Downloads (into $cache/debs) the .debs of the given packages that are
# not there yet; prints their file paths.
fetch_debs() {
	local -a uris=() want=()
	local line url file
	mkdir -p "$cache/debs"
	# (--print-uris leaves out files already in the current directory, so
	# ask from an empty one.)
	mkdir -p "$cache/empty"
	mapfile -t uris < <(cd "$cache/empty" && apt-get download --print-uris "$@" 2>/dev/null)
	((${#uris[@]} == $#)) ||
		die "apt-get download --print-uris gave ${#uris[@]} URIs for $# packages (is the Debian archive reachable? apt-get update?)"
	for line in "${uris[@]}"; do
		# 'URL' FILE SIZE HASH
		file=$(awk '{ print $2 }' <<<"$line")
		url=$(awk '{ print $1 }' <<<"$line")
		[[ -s "$cache/debs/$file" ]] || want+=("$(basename "${url//\'/}" | sed 's/_.*//')")
		printf '%s\n' "$cache/debs/$file"
	done
	if ((${#want[@]})); then
		say "downloading ${#want[@]} packages into $cache/debs" >&2
		(cd "$cache/debs" && apt-get download -qq "${want[@]}" >&2 2>"$cache/debs/.apt.log") ||
			die "apt-get download failed: $(tail -n 5 "$cache/debs/.apt.log")"
	fi
}

# Dependency closure of kernel modules, in load order (dependencies first).
module_order() {
	local moddir=$1; shift
	local -A seen=()
	local -a order=()
	visit() {
		local m=$1 f dep deps
		m=${m//-/_}
		[[ -n ${seen[$m]:-} ]] && return
		seen[$m]=1
		f=$(find "$moddir/kernel" -name "$m.ko" -o -name "${m//_/-}.ko" | head -n 1)
		if [[ -z $f ]]; then
			# built in?
			grep -qE "/(${m}|${m//_/-})\.ko$" "$moddir/modules.builtin" && return
			die "kernel module $m not found in $moddir"
		fi
		deps=$(tr '\0' '\n' <"$f" | sed -n 's/^depends=//p' | head -n 1 | tr ',' ' ')
		for dep in $deps; do visit "$dep"; done
		order+=("$f")
	}
	for m in "$@"; do visit "$m"; done
	printf '%s\n' "${order[@]}"
}

guest_dir=
# Sets guest_dir to the cached guest build (vmlinuz, initrd.img), building
# it if it is not there.
cmd_build() {
	command -v apt-get >/dev/null || die "apt-get not found: the guest is built from Debian packages"
	command -v dpkg-deb >/dev/null || die "dpkg-deb not found"
	command -v cpio >/dev/null || die "cpio not found (apt-get install cpio)"
	local kpkg
	local -a pkgs debs kdeb
	kpkg=$(kernel_package)
	[[ -n $kpkg ]] || die "cannot resolve linux-image-amd64 to a kernel package (apt-get update?)"
	mapfile -t pkgs < <(package_closure)
	((${#pkgs[@]} > 5)) || die "cannot resolve the guest's packages (apt-get update?)"
	mapfile -t kdeb < <(fetch_debs "$kpkg") || exit 1
	mapfile -t debs < <(fetch_debs "${pkgs[@]}") || exit 1
	[[ ${#kdeb[@]} -eq 1 && ${#debs[@]} -eq ${#pkgs[@]} ]] || die "downloading the guest's packages failed"

	local key
	key=$( { printf '%s\n' "$layout_version" "${kdeb[@]##*/}" "${debs[@]##*/}" \
		"${guest_modules[@]}"; cat "$here/vm.sh" "$here/guest-init.sh"; } |
		sha256sum | cut -c1-16)
	guest_dir=$cache/guest-$key
	if [[ -s $guest_dir/initrd.img && -s $guest_dir/vmlinuz ]]; then
		return 0
	fi
	say "building the guest in $guest_dir"
	local work=$cache/work.$$
	rm -rf "$work"; mkdir -p "$work/root" "$work/kernel"
	# shellcheck disable=SC2064
	trap "rm -rf '$work'" RETURN
	local d
	for d in "${debs[@]}"; do
		dpkg-deb -x "$d" "$work/root" || die "dpkg-deb -x $d failed"
	done
	dpkg-deb -x "${kdeb[0]}" "$work/kernel" || die "dpkg-deb -x ${kdeb[0]} failed"
	local kver moddir
	kver=$(basename "$(ls -d "$work/kernel/lib/modules/"*)")
	moddir=$work/kernel/lib/modules/$kver
	busybox=$work/root/bin/busybox
	[[ -x $busybox ]] || die "busybox-static did not give /bin/busybox"

	local root=$work/root
	rm -rf "$root"/usr/share/{doc,man,info,locale,lintian,bash-completion,zsh}
	mkdir -p "$root"/{proc,sys,dev,tmp,run,mnt,root,etc,bb,lib/modules-load}
	# busybox applets in /bb, after the packages' own programs in PATH.
	"$busybox" --list | while read -r a; do ln -sf /bin/busybox "$root/bb/$a"; done
	[[ -e $root/bin/sh ]] || ln -s busybox "$root/bin/sh"
	local -a mods
	mapfile -t mods < <(module_order "$moddir" "${guest_modules[@]}")
	((${#mods[@]} > ${#guest_modules[@]})) || die "resolving the kernel modules' dependencies failed"
	: >"$root/lib/modules-load/order"
	local m
	for m in "${mods[@]}"; do
		cp "$m" "$root/lib/modules-load/"
		basename "$m" >>"$root/lib/modules-load/order"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
	printf 'root:x:0:\n' >"$root/etc/group"
	printf '127.0.0.1 localhost\n%s host\n%s guest\n' "$host_ip" "$guest_ip" >"$root/etc/hosts"
	install -m 0755 "$here/guest-init.sh" "$root/init"
	(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) \
		>"$work/initrd.img" || die "packing the initramfs failed"
	cp "$work/kernel/boot/vmlinuz-$kver" "$work/vmlinuz"
	rm -rf "$cache"/guest-*	# older builds
	mkdir -p "$guest_dir"
	mv "$work/initrd.img" "$work/vmlinuz" "$guest_dir/"
	say "guest built: kernel $kver, initramfs $(du -h "$guest_dir/initrd.img" | cut -f1), ${#mods[@]} modules"
}

# ---------------------------------------------------------------- exec
# gexec TIMEOUT SCRIPT: runs SCRIPT in the guest, output to stdout,
# returns its status (124 on timeout, 125 if the guest cannot be reached).
gexec() {
	local tmo=$1 script=$2
	python3 - "$guest_ip" "$ctl_port" "$tmo" "$script" <<'EOF'
import socket, sys, time, re
host, port, tmo, script = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
# The guest enforces the timeout itself (busybox timeout); we wait a bit
# longer, then give up on the connection.
wrapped = "timeout -s KILL %d sh -c %s\n" % (max(1, int(tmo)),
          "'" + script.replace("'", "'\\''") + "'")
wrapped += 'rc=$?; [ $rc -eq 137 ] && rc=124; echo "__uroce_rc=$rc"\n'
try:
    s = socket.create_connection((host, port), timeout=5)
except OSError as e:
    sys.stderr.write("vm: cannot reach the guest at %s:%d: %s\n" % (host, port, e))
    sys.exit(125)
s.sendall(wrapped.encode())
s.shutdown(socket.SHUT_WR)
deadline = time.time() + tmo + 15
buf = b""
tail = b""
rc = None
out = sys.stdout.buffer
while True:
    left = deadline - time.time()
    if left <= 0:
        sys.stderr.write("vm: guest command timed out (no answer after %ds)\n" % (tmo + 15))
        sys.exit(124)
    s.settimeout(left)
    try:
        chunk = s.recv(65536)
    except socket.timeout:
        continue
    except OSError as e:
        sys.stderr.write("vm: connection to the guest failed: %s\n" % e)
        sys.exit(125)
    if not chunk:
        break
    buf += chunk
    # Print complete lines as they come, keep the last partial one.
    nl = buf.rfind(b"\n")
    if nl >= 0:
        lines, buf = buf[:nl + 1], buf[nl + 1:]
        for line in lines.splitlines(True):
            m = re.match(rb"^__uroce_rc=(\d+)\s*$", line)
            if m:
                rc = int(m.group(1))
            else:
                out.write(line)
        out.flush()
out.write(buf)
out.flush()
if rc is None:
    sys.stderr.write("vm: the guest closed the connection without an exit status\n")
    sys.exit(125)
sys.exit(rc)
EOF
}

cmd_exec() {
	local tmo=60
	while (($#)); do
		case $1 in
		-t) tmo=$2; shift 2 ;;
		--) shift; break ;;
		*) break ;;
		esac
	done
	(($#)) || die "exec: no command"
	[[ -s $state/qemu.pid ]] || die "exec: the guest is not running (vm.sh up)"
	local rc=0
	gexec "$tmo" "$*" || rc=$?
	((rc == 124 || rc == 125)) && guest_post_mortem
	return "$rc"
}

# The monitor's socket: in the state directory unless that path is too
# long for a UNIX socket (108 bytes with the NUL), then in /tmp under a
# name made from the state directory's.
mon_sock() {
	local sock=$state/monitor.sock
	((${#sock} < 100)) || sock=/tmp/uroce-interop-$(cksum <<<"$state" | cut -d' ' -f1).sock
	echo "$sock"
}

# qmon COMMAND...: runs QEMU monitor (HMP) commands, prints their output.
qmon() {
	python3 - "$(mon_sock)" "$@" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
except OSError as e:
    sys.stderr.write("vm: no QEMU monitor at %s: %s\n" % (sys.argv[1], e))
    sys.exit(1)
def until_prompt():
    buf = b""
    while not buf.endswith(b"(qemu) "):
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        buf += chunk
    return buf.decode(errors="replace")
until_prompt()
for cmd in sys.argv[2:]:
    s.sendall(cmd.encode() + b"\n")
    lines = until_prompt().replace("\r", "").split("\n")[1:-1]
    print("(qemu) " + cmd)
    for l in lines:
        print("  " + l)
EOF
}

# guest_post_mortem: the guest did not answer.  Say whether QEMU is still
# there and show what the guest's console printed since the last time (a
# panic, an oops, a stuck queue: loglevel=5 lets warnings through), so a CI
# log says why the guest went away, once.
guest_post_mortem() {
	local log=$state/console.log shown=0 now
	if qemu_alive; then
		say "QEMU (pid $(cat "$state/qemu.pid")) is still running; its view of the guest (CPU, eth0's receive and send rings):"
		local vq=/machine/peripheral/nic0/virtio-backend
		qmon "info status" "info registers" "info virtio-queue-status $vq 0" \
			"info virtio-queue-status $vq 1" >&2
		# (the host's side of the link: what QEMU did not read from the
		# tap shows as its tx drops; whether the guest answers ARP)
		ip -s link show dev "$tap" >&2
		ip neigh show dev "$tap" >&2
		# The kernel's own view (sysrq_always_enabled): console
		# loglevel 8, blocked tasks, the CPU's stack, all tasks, back to
		# loglevel 5; then wait until the console has settled.
		qmon "sendkey alt-sysrq-8" "sendkey alt-sysrq-w" "sendkey alt-sysrq-l" \
			"sendkey alt-sysrq-t" "sendkey alt-sysrq-5" >/dev/null
		local size=-1 still=0
		for _ in $(seq 1 60); do
			sleep 0.5
			if [[ $(stat -c %s "$log") == "$size" ]]; then
				((++still >= 4)) && break
			else
				still=0 size=$(stat -c %s "$log")
			fi
		done
	else
		say "QEMU has exited: the guest rebooted or powered off (-no-reboot; panic=-1)"
	fi
	[[ -s $log ]] || return 0
	[[ -s $state/console_seen ]] && shown=$(cat "$state/console_seen")
	now=$(wc -l <"$log")
	if ((now > shown)); then
		say "the guest's console, lines $((shown + 1))-$now (last 2000 at most):"
		tail -n +"$((shown + 1))" "$log" | tail -n 2000 >&2
		echo "$now" >"$state/console_seen"
	fi
}

# ---------------------------------------------------------------- up/down
qemu_alive() {
	[[ -s $state/qemu.pid ]] && kill -0 "$(cat "$state/qemu.pid")" 2>/dev/null
}

cmd_up() {
	local why
	why=$(cannot_run)
	if [[ -n $why ]]; then
		mkdir -p "$state"; printf '%s\n' "$why" >"$state/skip"
		skip "$why"
	fi
	rm -f "$state/skip"
	if qemu_alive; then
		say "a guest from an earlier run is still up (pid $(cat "$state/qemu.pid")): tearing it down"
		cmd_down
	fi
	cmd_build || exit 1
	mkdir -p "$state"
	rm -rf "$state/console.log" "$state/console_seen" "$state/ready" "$state/accounting" "$state/logs"
	local t0=$SECONDS
	ip link del "$tap" 2>/dev/null
	ip tuntap add dev "$tap" mode tap || die "ip tuntap add $tap failed"
	ip addr add "$host_ip/24" dev "$tap" || die "ip addr add $host_ip/24 dev $tap failed"
	ip link set "$tap" up || die "ip link set $tap up failed"
	# Deterministic MAC for the guest, a locally administered one.  A
	# link speed, or rxe warns "speed is unknown" on the console (which
	# takes warnings) at every QP.  The monitor is for guest_post_mortem.
	"$qemu" -machine q35 -accel "$accel" -m 1024 -smp "$smp" \
		-kernel "$guest_dir/vmlinuz" -initrd "$guest_dir/initrd.img" \
		-append "console=ttyS0 quiet loglevel=5 panic=-1 sysrq_always_enabled uroce.ip=$guest_ip/24 uroce.port=$ctl_port" \
		-display none -serial "file:$state/console.log" \
		-monitor "unix:$(mon_sock),server=on,wait=off" \
		-no-reboot \
		-netdev "tap,id=n0,ifname=$tap,script=no,downscript=no" \
		-device virtio-net-pci,id=nic0,netdev=n0,mac=52:54:00:77:00:02,speed=10000,duplex=full \
		-pidfile "$state/qemu.pid" -daemonize ||
		{ cmd_down; die "$qemu failed to start"; }
	say "guest booting (qemu pid $(cat "$state/qemu.pid"), console in $state/console.log)"
	local deadline=$((SECONDS + boot_timeout)) out
	while :; do
		if ! qemu_alive; then
			tail -n 40 "$state/console.log" >&2
			cmd_down; die "QEMU exited while the guest was booting"
		fi
		if grep -q '^uroce-guest: ready' "$state/console.log" 2>/dev/null &&
		   out=$(gexec 10 'echo ok' 2>/dev/null) && [[ $out == ok ]]; then
			break
		fi
		if grep -q '^uroce-guest: FAIL' "$state/console.log" 2>/dev/null; then
			tail -n 40 "$state/console.log" >&2
			cmd_down; die "the guest's init failed"
		fi
		if ((SECONDS > deadline)); then
			tail -n 40 "$state/console.log" >&2
			cmd_down; die "the guest was not ready after ${boot_timeout}s"
		fi
		sleep 0.5
	done
	echo "$((SECONDS - t0))" >"$state/boot_seconds"
	touch "$state/ready"
	say "guest ready after $((SECONDS - t0))s (including the build/cache check)"
	gexec 30 'rdma link show; ibv_devices' >&2 || true
}

cmd_down() {
	local pid
	if [[ -s $state/skip ]]; then
		rm -f "$state/skip"
		skip "nothing to tear down: the guest could not run here"
	fi
	if qemu_alive; then
		pid=$(cat "$state/qemu.pid")
		# Ask the guest to power off (unmounts nothing of value: all in
		# RAM); then make sure QEMU is gone.
		gexec 5 'poweroff -f' >/dev/null 2>&1 &
		local gpid=$!
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 1 30); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null
		kill "$gpid" 2>/dev/null
		wait "$gpid" 2>/dev/null
	fi
	rm -f "$state/qemu.pid" "$state/ready" "$(mon_sock)"
	if ip link show "$tap" >/dev/null 2>&1; then
		ip link del "$tap" || say "could not remove $tap"
	fi
	say "guest down, $tap removed"
}

cmd_status() {
	if [[ -s $state/skip ]]; then echo "skipped: $(cat "$state/skip")"; return 77; fi
	if qemu_alive && [[ -e $state/ready ]]; then echo "running (pid $(cat "$state/qemu.pid"))"; return 0; fi
	if qemu_alive; then echo "booting"; return 1; fi
	echo "not running"; return 1
}

cmd_require() {
	local st rc

	st=$(cmd_status); rc=$?
	if ((rc == 77)); then
		echo "SKIP: the interop guest cannot run on this machine: ${st#skipped: }"
		exit 77
	fi
	((rc == 0)) && return 0
	echo "FAIL: the interop guest is not running ($st): run the interop_vm_up test first (ctest adds it as a fixture)"
	exit 1
}

# answers: does the guest run a command now?  (what run_scenario.sh asks
# after a scenario failed)
cmd_answers() {
	qemu_alive || return 1
	[[ $(gexec 5 'echo ok' 2>/dev/null) == ok ]]
}

sub=${1:-}
(($#)) && shift
case $sub in
build) cmd_build; say "guest in $guest_dir" ;;
up) cmd_up ;;
exec) cmd_exec "$@" ;;
down) cmd_down ;;
check) cmd_check ;;
status) cmd_status ;;
require) cmd_require ;;
dump) qemu_alive || die "the guest is not running"; guest_post_mortem ;;
answers) cmd_answers ;;
pause) qemu_alive || die "the guest is not running"; qmon stop >/dev/null ;;
*) sed -n '3,30p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
