# SPDX-License-Identifier: MIT
"""A shared bottleneck (issue 24; case `incast`), in namespaces of its own
whatever --paths says: two namespaces joined by a veth at link MTU 9000
(IB MTU 4096), the sender side's egress shaped to 2 Gbit/s by htb over a
1000-packet pfifo (this kernel has no netem, tbf, red or fq_codel).  In
one round, back to back:

- 8 iperf3 TCP flows into 8 servers for 8 s (the baseline);
- for each uroce congestion control (UROCE_CC off, dcqcn, delay):
  8 ib_write_bw processes (one shared address, uroce's default in one
  namespace) into 8 servers for 8 s; then one ib_write_bw next to one
  iperf3 flow for 8 s.

Per run: every flow's throughput (what it reports), their sum over the
bottleneck's rate (the utilisation), Jain's fairness index over the
flows, and the median round trip of a ping through the same queue during
the run (a UDP echo every 50 ms: this host has no ping(8)).  dcqcn runs
with a CE marker in front of the bottleneck's queue, since no qdisc of
this kernel marks ECN: bench/ce_marker.bpf.c, an eBPF tc classifier on
the htb's device, with a phantom queue drained at 98 % of the
bottleneck's rate (htb also counts each datagram's headers of a GSO
train), marking above INCAST_MARK_KB.  It is built for these figures
(bench/CMakeLists.txt: CE_MARKER_MBIT, CE_MARKER_KB): keep them equal."""

import os
import re
import statistics
import subprocess
import sys
import time

from . import parsers
from .common import Run, fmt, log

INCAST_MBIT = 2000
INCAST_FLOWS = 8
INCAST_SECS = 8
INCAST_MTU = 9000
INCAST_NET = "10.213.24"
INCAST_MODES = ("off", "dcqcn", "delay")
INCAST_MARK_KB = 64           # the CE marker's threshold (phantom queue)
INCAST_MARK_MBIT = 1960       # ... and its drain rate
INCAST_DEV = "ubv1"           # the client side's end (make_veth: server in A)
PING_PORT = 7024
# Both ends of the ping at a real-time priority: the 16 benchmark
# processes on 2 cores otherwise add the echo's and the pinger's own wait
# for a core to every sample (0.5-0.9 ms a round trip in this VM), which
# is the host's delay, not the queue's
PING_RT = ["chrt", "-f", "20"]

# The ping through the queue: a UDP echo (this host has no ping(8)), 64
# bytes every 50 ms, each answer printed as ping prints it ("time=X ms")
PING_ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
while True:
    d, a = s.recvfrom(2048)
    s.sendto(d, a)
"""
PING_CLIENT = """
import socket, sys, time
addr, port, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1.0)
end = time.monotonic() + secs
seq = 0
while time.monotonic() < end:
    seq += 1
    t = time.monotonic()
    s.sendto(seq.to_bytes(8, "big") + bytes(56), (addr, port))
    try:
        while True:
            d, _ = s.recvfrom(2048)
            if int.from_bytes(d[:8], "big") == seq:
                break
        print(f"seq={seq} time={(time.monotonic() - t) * 1e3:.3f} ms", flush=True)
    except socket.timeout:
        print(f"seq={seq} lost", flush=True)
    time.sleep(max(0.0, 0.05 - (time.monotonic() - t)))
"""


def incast_key(kind, what):
    """Where a figure is kept: incast/tcp/incast, incast/uroce-delay/pair."""
    return f"incast/{kind}/{what}"


def jain(xs):
    xs = [x for x in xs if x is not None]
    if not xs or not any(xs):
        return None
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def ping_times(text):
    return [float(m) for m in re.findall(r"time=([\d.]+) ms", text)]


class Incast:
    """Mixed into Bench: needs make_veth, next_port, logpath, fail,
    uroce_env, plain_env, wait_tcp, put, build."""

    def incast_path(self):
        """The shaped pair of namespaces, made once per run."""
        if getattr(self, "_incast", None) is not None:
            return self._incast
        p, why = self.make_veth("incast", INCAST_MTU, INCAST_NET)
        if not p:
            log(f"incast skipped: {why}")
            self._incast = False
            return False
        dev = INCAST_DEV
        for c in (["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb",
                   "default", "1"],
                  ["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
                   "rate", f"{INCAST_MBIT}mbit", "ceil", f"{INCAST_MBIT}mbit"],
                  ["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:",
                   "pfifo", "limit", "1000"]):
            r = subprocess.run(["ip", "netns", "exec", p.client_ns] + c, capture_output=True,
                               text=True)
            if r.returncode:
                log(f"incast skipped: {' '.join(c)}: {r.stderr.strip()}")
                self._incast = False
                return False
        self._incast = p
        return p

    def incast_ping(self, p, secs):
        if not getattr(self, "_echo", None):
            self._echo = Run(p.wrap(PING_RT + [sys.executable, "-c", PING_ECHO, str(PING_PORT)],
                                    "server"), self.plain_env(), self.logpath("incast-echo"))
        return Run(p.wrap(PING_RT + [sys.executable, "-c", PING_CLIENT, p.server_addr,
                                str(PING_PORT), str(secs)], "client"),
                   self.plain_env(), self.logpath("incast-ping"))

    def marker(self, p, on):
        """The CE marker on the bottleneck (dcqcn), or off: ce_marker.o
        (bench/ce_marker.bpf.c) on the egress of the htb's device, in
        front of its queue."""
        tc = ["tc", "qdisc", "add" if on else "del", "dev", INCAST_DEV, "clsact"]
        if not on:
            subprocess.run(p.wrap(tc, "client"), capture_output=True)
            return True
        obj = os.path.join(self.build, "bench", "ce_marker.o")
        if not os.path.exists(obj):
            return False
        filt = ["tc", "filter", "add", "dev", INCAST_DEV, "egress", "bpf",
                "direct-action", "obj", obj, "sec", "tc"]
        for c in (tc, filt):
            r = subprocess.run(p.wrap(c, "client"), capture_output=True, text=True)
            if r.returncode:
                log(f"  no CE marker: {' '.join(c)}: {r.stderr.strip()}")
                self.marker(p, False)
                return False
        return True

    def incast_run(self, p, tag, nroce, ntcp, mode):
        """nroce ib_write_bw and ntcp iperf3 flows at once, INCAST_SECS
        each, a ping through the queue meanwhile: per-flow Gbit/s."""
        env_extra = {"UROCE_CC": mode} if mode != "off" else {}
        servers, clients = [], []
        roce_ports = [self.next_port() for _ in range(nroce)]
        tcp_ports = [self.next_port() for _ in range(ntcp)]
        for i, port in enumerate(roce_ports):
            args = ["ib_write_bw", "-F", "-p", str(port), "-D", str(INCAST_SECS),
                    "--report_gbits"]
            servers.append(Run(p.wrap(args, "server"), self.uroce_env(p, "server", env_extra),
                               self.logpath(f"{tag}-roce{i}-srv")))
        for i, port in enumerate(tcp_ports):
            servers.append(Run(p.wrap(["iperf3", "-s", "-1", "-p", str(port)], "server"),
                               self.plain_env(), self.logpath(f"{tag}-tcp{i}-srv")))
        for s, port in zip(servers, roce_ports + tcp_ports):
            if not self.wait_tcp(p, port, s):
                for x in servers:
                    x.kill()
                self.fail(tag, f"a server on port {port} did not listen", s)
                return None
        marked = mode == "dcqcn" and self.marker(p, True)
        if mode == "dcqcn" and not marked:
            log(f"  {tag}: no CE marker (bench/ce_marker.o not built?)")
        for i, port in enumerate(roce_ports):
            args = ["ib_write_bw", "-F", "-p", str(port), "-D", str(INCAST_SECS),
                    "--report_gbits", p.server_addr]
            clients.append(("roce", Run(p.wrap(args, "client"),
                                        self.uroce_env(p, "client", env_extra),
                                        self.logpath(f"{tag}-roce{i}-cli"))))
        for i, port in enumerate(tcp_ports):
            clients.append(("tcp", Run(p.wrap(["iperf3", "-c", p.server_addr, "-p", str(port),
                                               "-t", str(INCAST_SECS), "-J"], "client"),
                                       self.plain_env(), self.logpath(f"{tag}-tcp{i}-cli"))))
        time.sleep(1.5)             # the ping samples the run's middle
        ping = self.incast_ping(p, INCAST_SECS - 3)
        load = os.getloadavg()[0]
        ok = all(c.wait(INCAST_SECS + 60) for _, c in clients)
        ping.wait(10)
        for s in servers:
            s.wait(10 if ok else 1)
            s.kill()
        if marked:
            self.marker(p, False)
        res = {"roce": [], "tcp": [], "mode": mode, "load1": load}
        for kind, c in clients:
            g = None
            if kind == "roce":
                r = parsers.perftest_bw(c.text()) if c.rc == 0 else None
                g = r["gbps"] if r else None
            else:
                try:
                    nbytes, secs = parsers.iperf3_received(c.text())
                    g = nbytes * 8 / secs / 1e9
                except (ValueError, KeyError):
                    g = None
            if g is None:
                self.fail(tag, f"a {kind} flow gave no result (rc={c.rc})", c)
            res[kind].append(g)
        flows = [g for g in res["roce"] + res["tcp"] if g is not None]
        if not flows:
            return None
        res["gbps"] = sum(flows)
        res["util"] = res["gbps"] / (INCAST_MBIT / 1000)
        res["jain"] = jain(res["roce"] + res["tcp"])
        times = ping_times(ping.text())
        res["ping_ms"] = statistics.median(times) if times else None
        res["ping_n"] = len(times)
        res["ping_lost"] = ping.text().count(" lost")
        if ntcp and nroce and None not in res["roce"] + res["tcp"]:
            res["share"] = sum(res["roce"]) / res["gbps"]
        return res

    def incast_round(self):
        """One round: TCP's incast, then each uroce mode's incast and pair."""
        p = self.incast_path()
        if not p:
            return
        if not getattr(self, "_incast_idle", None):
            ping = self.incast_ping(p, 2)
            ping.wait(10)
            t = ping_times(ping.text())
            self._incast_idle = True
            self.put(incast_key("idle", "ping"),
                     {"ping_ms": statistics.median(t) if t else None})
        n = INCAST_FLOWS
        rows = self.args.incast_rows.split(",")
        if "tcp" in rows:
            log(f"incast: {n} iperf3 TCP flows through {INCAST_MBIT} Mbit/s")
            self.put(incast_key("tcp", "incast"), self.incast_run(p, "incast-tcp", 0, n, "off"))
        for mode in [m for m in INCAST_MODES if m in rows]:
            log(f"incast: {n} ib_write_bw flows, UROCE_CC={mode}")
            self.put(incast_key(f"uroce-{mode}", "incast"),
                     self.incast_run(p, f"incast-{mode}", n, 0, mode))
            log(f"incast: 1 ib_write_bw (UROCE_CC={mode}) + 1 iperf3")
            self.put(incast_key(f"uroce-{mode}", "pair"),
                     self.incast_run(p, f"pair-{mode}", 1, 1, mode))

    def incast_cleanup(self):
        if getattr(self, "_echo", None):
            self._echo.kill()
            self._echo = None


def incast_section(R):
    """The lines of the shared-bottleneck section, [] when it did not run."""
    if not any(k.startswith("incast/") for k in R):
        return []
    idle = (R.get(incast_key("idle", "ping")) or {}).get("ping_ms")
    L = ["## A shared bottleneck: 8-flow incast, uroce against TCP (issue 24)\n",
         f"Two namespaces joined by veth (MTU {INCAST_MTU}, IB MTU 4096), the sender "
         f"side's egress shaped to {INCAST_MBIT} Mbit/s by htb over a 1000-packet pfifo. "
         f"{INCAST_FLOWS} flows for {INCAST_SECS} s: iperf3 TCP, or ib_write_bw 64 KiB "
         "(one shared address per side) with each UROCE_CC; dcqcn with an eBPF classifier "
         f"(bench/ce_marker.bpf.c) in front of the htb queue marking CE above "
         f"{INCAST_MARK_KB} KB of a phantom queue drained at {INCAST_MARK_MBIT} Mbit/s. "
         "Utilisation: the flows' own throughput summed over "
         f"{INCAST_MBIT / 1000:g} Gbit/s; ping: the median round trip of a 64-byte UDP "
         "echo every 50 ms through the queue during the run "
         f"(idle: {fmt(idle, 3)} ms); load: the 1-minute load "
         "average as the run started (2 cores). Medians of the rounds.\n",
         "| flows | utilisation (≥ 0.9) | Jain's index (≥ 0.95) | median ping ms (≤ 1) "
         "| per-flow Gbit/s | load |",
         "|---|---|---|---|---|---|"]
    rows = [("8 × iperf3 TCP", incast_key("tcp", "incast"))] + \
        [(f"8 × uroce, UROCE_CC={m}", incast_key(f"uroce-{m}", "incast")) for m in INCAST_MODES]
    for name, k in rows:
        r = R.get(k) or {}
        flows = ", ".join(fmt(x, 2) for x in (r.get("roce") or []) + (r.get("tcp") or []))
        L.append(f"| {name} | {fmt(r.get('util'), 3)} | {fmt(r.get('jain'), 3)} | "
                 f"{fmt(r.get('ping_ms'), 3)} | {flows} | {fmt(r.get('load1'), 1)} |")
    L += ["", "| 1 uroce flow + 1 iperf3 TCP flow | uroce's share (0.3–0.7) | uroce Gbit/s "
          "| TCP Gbit/s | median ping ms | load |", "|---|---|---|---|---|---|"]
    for m in INCAST_MODES:
        r = R.get(incast_key(f"uroce-{m}", "pair")) or {}
        L.append(f"| UROCE_CC={m} | {fmt(r.get('share'), 3)} | "
                 f"{fmt((r.get('roce') or [None])[0], 2)} | "
                 f"{fmt((r.get('tcp') or [None])[0], 2)} | {fmt(r.get('ping_ms'), 3)} | "
                 f"{fmt(r.get('load1'), 1)} |")
    L.append("")
    return L
