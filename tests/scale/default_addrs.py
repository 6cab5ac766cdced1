#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Zero configuration, every default address taken.

A process given no UROCE_ADDR takes the first free loopback address
127.0.0.1-254 (docs/shared.md).  With all 254 held, here by plain UDP
sockets on port 4791 in a namespace of our own, opening the device must
fail with one line that says why and what to do, not a bare errno; once
one address is free again, the next process gets exactly that one.

    default_addrs.py IBV_DEVINFO  (as root: it makes a network namespace)
"""
import os
import socket
import subprocess
import sys

PORT = 4791
HINT = "no free default address"


def devinfo(prog):
    env = dict(os.environ)
    env.pop("UROCE_ADDR", None)
    env.pop("UROCE_IFNAME", None)
    # an unmodified program, as tests/lib/uroce_test.sh runs one: our
    # library, and the sanitizer runtime first when it was built with one
    if env.get("UROCE_LIBDIR"):
        env["LD_LIBRARY_PATH"] = env["UROCE_LIBDIR"]
    if env.get("UROCE_PRELOAD"):
        env["LD_PRELOAD"] = env["UROCE_PRELOAD"]
        env["ASAN_OPTIONS"] = ":".join(
            x for x in ("detect_leaks=0", env.get("ASAN_OPTIONS")) if x)
    return subprocess.run([prog, "-v"], env=env, capture_output=True,
                          text=True, timeout=60)


def inside(prog):
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    held = {}
    for i in range(1, 255):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((f"127.0.0.{i}", PORT))
        held[i] = s
    r = devinfo(prog)
    lines = [l for l in r.stderr.splitlines() if HINT in l]
    if r.returncode == 0 or len(lines) != 1:
        sys.exit(f"FAIL: with 254 addresses held, ibv_devinfo exited "
                 f"{r.returncode} and printed {len(lines)} lines with "
                 f"'{HINT}':\n{r.stdout}{r.stderr}")
    print(f"all held: {lines[0]}")
    held.pop(200).close()
    r = devinfo(prog)
    if r.returncode != 0 or "127.0.0.200" not in r.stdout + r.stderr:
        sys.exit(f"FAIL: with 127.0.0.200 free, ibv_devinfo exited "
                 f"{r.returncode} without naming it:\n{r.stdout}{r.stderr}")
    print("one free: the device took 127.0.0.200")
    print("PASS")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--inside":
        inside(sys.argv[2])
        return
    if len(sys.argv) != 2:
        sys.exit("usage: default_addrs.py IBV_DEVINFO")
    if os.geteuid() != 0:
        print("SKIP: needs root for a network namespace")
        sys.exit(77)
    r = subprocess.run(["unshare", "-n", sys.executable, __file__,
                        "--inside", sys.argv[1]])
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
