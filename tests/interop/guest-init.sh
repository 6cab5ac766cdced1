#!/bin/busybox sh
# shellcheck shell=dash
# SPDX-License-Identifier: MIT
#
# /init of the interop guest (see vm.sh): loads the modules, configures
# eth0, adds the Soft-RoCE device rxe0 on it and serves shell commands on
# TCP (busybox nc -ll).  Prints "uroce-guest: ready" on the console when
# done, "uroce-guest: FAIL ..." if something went wrong.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:/bb
export HOME=/root

/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run

fail() { echo "uroce-guest: FAIL $*" >/dev/console; exec sh </dev/console >/dev/console 2>&1; }

ip=10.77.0.2/24 port=7777
for arg in $(cat /proc/cmdline); do
	case $arg in
	uroce.ip=*) ip=${arg#uroce.ip=} ;;
	uroce.port=*) port=${arg#uroce.port=} ;;
	esac
done

while read -r m; do
	insmod "/lib/modules-load/$m" || fail "insmod $m"
done </lib/modules-load/order

ip link set lo up
# virtio_net probes asynchronously.
i=0
while ! ip link show eth0 >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 100 ] && fail "no eth0"
	sleep 0.1
done
ip addr add "$ip" dev eth0 || fail "ip addr add $ip"
ip link set eth0 up || fail "ip link set eth0 up"
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0"

# The command server: each connection's script runs in its own shell.
cat >/bin/uroce-ctl <<'EOF'
#!/bin/sh
f=$(mktemp /tmp/ctl.XXXXXX)
cat >"$f"
cd /tmp
sh "$f" </dev/null 2>&1
rm -f "$f"
EOF
chmod 755 /bin/uroce-ctl
nc -ll -p "$port" -e /bin/uroce-ctl &

# Wait until the rxe port has its IPv4 GID (it comes with the address).
i=0
while ! grep -qs '0000:0000:0000:0000:0000:ffff' /sys/class/infiniband/rxe0/ports/1/gids/*; do
	i=$((i + 1)); [ $i -gt 100 ] && fail "rxe0 has no IPv4 GID"
	sleep 0.1
done
echo "uroce-guest: ready" >/dev/console

# PID 1 never exits.
while :; do sleep 3600; done
