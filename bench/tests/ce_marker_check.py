#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench.ce_marker: the incast case's ECN marker (bench/ce_marker.bpf.c)
marks what a marking switch queue would, and nothing else.  Two network
namespaces joined by a veth (MTU 9000), the marker on the sender's egress
(as bench/uroce_bench/incast.py puts it), datagrams read with IP_RECVTOS:

- ECT(0) datagrams one at a time, 5 ms apart: the phantom queue drains
  between them, none is marked;
- a burst of ECT(0) datagrams far above the drain rate: the ones past
  the threshold are marked CE, the first ones are not;
- the same burst not ECN-capable (TOS 0): none is marked (a switch
  would drop them from a full queue, never mark them);
- every marked datagram arrives (the IP checksum was redone).

    ce_marker_check.py CE_MARKER_O

Needs root and network namespaces; exits 77 (skipped) without them.
"""

import ctypes
import os
import socket
import subprocess
import sys
import time

A, B = "uroce-cem-a", "uroce-cem-b"
ADDR_B = "10.213.77.2"
PORT = 4791
SIZE = 8000
BURST = 200


def sh(*args, check=True):
    return subprocess.run(args, capture_output=True, text=True, check=check)


LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def in_ns(ns):
    """This process into network namespace ns (os.setns is Python 3.12's)."""
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    if LIBC.setns(fd, CLONE_NEWNET):
        raise OSError(ctypes.get_errno(), f"setns {ns}")
    os.close(fd)


def setup(obj):
    for ns in (A, B):
        sh("ip", "netns", "del", ns, check=False)
    sh("ip", "netns", "add", A)
    sh("ip", "netns", "add", B)
    sh("ip", "link", "add", "cem0", "netns", A, "mtu", "9000", "type", "veth", "peer", "name",
       "cem1", "netns", B, "mtu", "9000")
    sh("ip", "-n", A, "addr", "add", "10.213.77.1/24", "dev", "cem0")
    sh("ip", "-n", B, "addr", "add", f"{ADDR_B}/24", "dev", "cem1")
    sh("ip", "-n", A, "link", "set", "cem0", "up")
    sh("ip", "-n", B, "link", "set", "cem1", "up")
    sh("ip", "netns", "exec", A, "tc", "qdisc", "add", "dev", "cem0", "clsact")
    sh("ip", "netns", "exec", A, "tc", "filter", "add", "dev", "cem0", "egress", "bpf",
       "direct-action", "obj", obj, "sec", "tc")


def send(tos, count, gap_s):
    """From A: count datagrams of SIZE bytes with this TOS, gap_s apart
    (0: back to back)."""
    pid = os.fork()
    if pid == 0:
        try:
            in_ns(A)
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
            for i in range(count):
                s.sendto(i.to_bytes(4, "big") + bytes(SIZE - 4), (ADDR_B, PORT))
                if gap_s:
                    time.sleep(gap_s)
            os._exit(0)
        except Exception as e:  # noqa: BLE001 - report, then fail the child
            print(f"sender: {e}", file=sys.stderr)
            os._exit(1)
    return pid


def run_case(rx, tos, count, gap_s):
    """The ECN bits of each datagram that arrived, in sequence order."""
    pid = send(tos, count, gap_s)
    got = {}
    rx.settimeout(1.0)
    try:
        while len(got) < count:
            data, anc, _, _ = rx.recvmsg(SIZE, socket.CMSG_SPACE(1))
            ecn = None
            for lvl, typ, val in anc:
                if lvl == socket.IPPROTO_IP and typ == socket.IP_TOS:
                    ecn = val[0] & 3
            got[int.from_bytes(data[:4], "big")] = ecn
    except socket.timeout:
        pass
    _, status = os.waitpid(pid, 0)
    if status:
        sys.exit("the sender failed")
    return [got[i] for i in sorted(got)]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    obj = sys.argv[1]
    if os.geteuid() != 0:
        print("skipped: needs root")
        sys.exit(77)
    try:
        setup(obj)
    except subprocess.CalledProcessError as e:
        if "netns" in " ".join(e.cmd) and "add" in e.cmd:
            print(f"skipped: {e.stderr.strip()}")
            sys.exit(77)
        sys.exit(f"{' '.join(e.cmd)}: {e.stderr.strip()}")
    failures = []
    try:
        in_ns(B)
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
        rx.bind((ADDR_B, PORT))

        paced = run_case(rx, 2, 20, 0.005)
        print(f"ECT(0) 5 ms apart: {len(paced)} arrived, {paced.count(3)} marked")
        if len(paced) < 20 or paced.count(3):
            failures.append("spaced datagrams: all arrive, none marked")

        burst = run_case(rx, 2, BURST, 0)
        marked = burst.count(3)
        print(f"ECT(0) burst of {BURST}: {len(burst)} arrived, {marked} marked, "
              f"first {burst[:4]}")
        if len(burst) < BURST // 2:
            failures.append(f"burst: only {len(burst)} of {BURST} arrived")
        if not marked or burst[0] == 3:
            failures.append("burst: the first datagrams unmarked, later ones CE")
        if any(e not in (2, 3) for e in burst):
            failures.append("burst: an ECT datagram lost its ECN bits")

        plain = run_case(rx, 0, BURST, 0)
        print(f"not ECT, burst of {BURST}: {len(plain)} arrived, {plain.count(3)} marked")
        if len(plain) < BURST // 2 or any(plain):
            failures.append("a datagram that is not ECN-capable was marked")
    finally:
        for ns in (A, B):
            sh("ip", "netns", "del", ns, check=False)
    for f in failures:
        print(f"FAILED: {f}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
