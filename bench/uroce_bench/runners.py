# SPDX-License-Identifier: MIT
"""The runs: each program (perftest, iperf3, qperf, the UDP and memcpy
baselines, idle_qps, callgrind) started on a Path, its output handed to
parsers.py, and the plan that interleaves uroce with its baselines."""

import datetime
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import parsers
from .alternatives import Alternatives
from .apps import Apps
from .incast import Incast
from .common import (KIB, MIB, ROOT, SHARED_RUNS, VETHS, Path, Run, cpu_total, log,
                     median_result,
                     shared_key, size_name)

class Bench(Alternatives, Apps, Incast):
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.build = os.path.abspath(args.build)
        self.out = os.path.abspath(args.out)
        self.lib = os.path.join(self.build, "lib")
        self.bin = os.path.join(self.build, "bench")
        self.work = tempfile.mkdtemp(prefix="uroce-bench.")
        self.port = 20000 + (os.getpid() % 400) * 20
        self.nruns = 0
        self.ns = []
        self.res = {"runs": {}, "meta": {}}
        self.samples = {}                   # key: every run of it, for the median
        self.dead = set()                   # alternatives that failed once
        self.repeats = max(1, args.repeats)
        self.cases = set(args.cases.split(","))
        self.path_names = args.path_names
        self.failures = []

    # ------------------------------------------------------------ basics

    def next_port(self):
        self.port += 1
        if self.port > 29999:
            self.port = 20000
        return self.port

    def logpath(self, tag):
        self.nruns += 1
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", tag)
        return os.path.join(self.work, f"{self.nruns:04d}-{safe}.log")

    def uroce_env(self, path, side, extra=None):
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = self.lib
        env["UROCE_STATS"] = "1"
        env.pop("UROCE_FAULT", None)
        env.pop("UROCE_PCAP", None)
        addr = path.uroce_server_addr if side == "server" else path.uroce_client_addr
        if addr:
            env["UROCE_ADDR"] = addr
        else:
            env.pop("UROCE_ADDR", None)
        env.pop("UROCE_IFNAME", None)
        env.pop("UROCE_SHARE", None)
        env.update(path.env)
        if extra:
            env.update(extra)
        return env

    def plain_env(self):
        env = dict(os.environ)
        for k in ("LD_LIBRARY_PATH", "UROCE_ADDR", "UROCE_STATS"):
            env.pop(k, None)
        return env

    def fail(self, tag, why, *runs):
        self.failures.append((tag, why))
        log(f"  {tag}: FAILED ({why})")
        keep = os.path.join(self.out, "logs")
        os.makedirs(keep, exist_ok=True)
        for r in runs:
            if r and r.logfile and os.path.exists(r.logfile):
                shutil.copy(r.logfile, keep)

    def wait_tcp(self, path, port, server, timeout=15):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not server.alive():
                return False
            if path.tcp_listening(port):
                return True
            time.sleep(0.05)
        return False

    def wait_until(self, server, ready, timeout=15):
        """ready() before the timeout, while the server lives."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and server.alive():
            if ready():
                return True
            time.sleep(0.05)
        return False

    def wait_line(self, run, word, timeout=10):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if word in run.text():
                return True
            if not run.alive():
                return word in run.text()
            time.sleep(0.02)
        return False

    def record(self, key, value):
        self.res["runs"][key] = value

    # ------------------------------------------------------------ perftest

    def perftest(self, path, test, size, n, qps=1, timeout=90, extra=()):
        """One perftest run, tried up to three times when perftest reports
        zeros (its CPU-clock estimate fails now and then on a busy machine).
        extra: more perftest options (-e: event-driven)."""
        for attempt in range(3):
            res = self._perftest(path, test, size, n, qps, timeout, extra)
            if res is None or res.get("gbps", res.get("t_typical")):
                break
            log(f"  {test} {size_name(size)} -q {qps}: perftest reported 0 "
                "(clock estimate failed), again")
        else:
            self.fail(f"{path.name}-{test}-s{size}-q{qps}", "perftest reported 0 three times")
            return None
        if res is not None:
            res["attempts"] = attempt + 1
        return res

    def _perftest(self, path, test, size, n, qps, timeout, extra=()):
        tag = f"{path.name}-{test}{''.join(extra)}-s{size}-q{qps}"
        port = self.next_port()
        args = [test, "-F", "-p", str(port), "-s", str(size), "-n", str(n)] + list(extra)
        bw = test.endswith("_bw")
        if bw:
            args += ["--report_gbits"]
            if qps > 1:
                args += ["-q", str(qps)]
        srv = Run(path.wrap(args, "server"), self.uroce_env(path, "server"),
                  self.logpath(tag + "-srv"))
        if not self.wait_tcp(path, port, srv):
            srv.kill()
            self.fail(tag, "server did not listen", srv)
            return None
        cli = Run(path.wrap(args + [path.server_addr], "client"),
                  self.uroce_env(path, "client"), self.logpath(tag + "-cli"))
        ok = cli.wait(timeout)
        srv.wait(10 if ok else 1)
        text = cli.text()
        if not ok or cli.rc != 0:
            srv.kill()
            self.fail(tag, f"client rc={cli.rc}", srv, cli)
            return None
        res = {"test": test, "size": size, "n": n, "qps": qps}
        if bw:
            r = parsers.perftest_bw(text)
            if not r:
                self.fail(tag, "no result line", srv, cli)
                return None
            res.update(gbps=r["gbps"], peak_gbps=r["peak_gbps"], mpps=r["mpps"],
                       bytes=size * r["iters"])
            cpu = cpu_total(srv, cli)
            res["cpu_s"] = cpu
            res["cpu_user_s"] = srv.cpu[0] + cli.cpu[0]
            res["cpu_sys_s"] = srv.cpu[1] + cli.cpu[1]
            res["cpu_s_per_gb"] = cpu / (res["bytes"] / 1e9) if cpu is not None else None
            res["wall_s"] = cli.wall
        else:
            r = parsers.perftest_lat(text)
            if not r:
                self.fail(tag, "no result line", srv, cli)
                return None
            res.update(r)
        res["counters"] = parsers.perftest_counters(srv.text(), text)
        return res

    # ------------------------------------------------------------ baselines

    def iperf3(self, path, size, seconds):
        tag = f"{path.name}-iperf3-s{size}"
        port = self.next_port()
        srv = Run(path.wrap(["iperf3", "-s", "-1", "-p", str(port)], "server"),
                  self.plain_env(), self.logpath(tag + "-srv"))
        if not self.wait_tcp(path, port, srv):
            srv.kill()
            self.fail(tag, "iperf3 server did not listen", srv)
            return None
        wsize = min(size, MIB)          # iperf3's largest write is 1 MiB
        cli = Run(path.wrap(["iperf3", "-c", path.server_addr, "-p", str(port), "-t",
                             str(seconds), "-l", str(wsize), "-J"], "client"),
                  self.plain_env(), self.logpath(tag + "-cli"))
        ok = cli.wait(seconds + 30)
        srv.wait(10 if ok else 1)
        try:
            nbytes, secs = parsers.iperf3_received(cli.text())
        except (ValueError, KeyError) as e:
            srv.kill()
            self.fail(tag, f"iperf3 output: {e}", srv, cli)
            return None
        cpu = cpu_total(srv, cli)
        return {"size": size, "write_size": wsize, "gbps": nbytes * 8 / secs / 1e9, "bytes": nbytes,
                "cpu_s": cpu, "cpu_s_per_gb": cpu / (nbytes / 1e9) if cpu else None}

    # ------------------------------------------------------------ rsockets

    def rspreload(self):
        """Debian's librspreload.so, beside the system's librdmacm.so.1."""
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        lib = next((l.split()[-1] for l in out.splitlines()
                    if l.strip().startswith("librdmacm.so.1 ")), None)
        rsp = os.path.join(os.path.dirname(lib or "/usr/lib/x86_64-linux-gnu/x"),
                           "rsocket", "librspreload.so")
        return rsp if os.path.exists(rsp) else None

    def rs_env(self, path, side, extra):
        """uroce's environment for an rsocket program: on one host the
        client's device takes an address of its own (127.0.0.2)."""
        env = self.uroce_env(path, side, extra)
        env.pop("UROCE_STATS", None)        # iperf3 -J: nothing after its JSON
        if side == "client" and path.same_host() and not path.uroce_client_addr:
            env["UROCE_ADDR"] = "127.0.0.2"
        return env

    def rs_pair(self, tag, path, srv_argv, cli_argv, rsocket, extra=None, port=None):
        """A server and its client, over rsockets (uroce's environment; the
        server is ready at its rdma_listen) or over kernel TCP (ready when
        port listens); the client's Run once done, or None."""
        if not rsocket:
            env = self.plain_env()
            pair = self._pair(tag, path, srv_argv, cli_argv, env, env, port, 120)
            return pair and pair[1]
        lfile = os.path.join(self.work, f"listen-{self.nruns}")
        env_s = self.rs_env(path, "server", dict(extra or {}, UROCE_CM_LISTEN_FILE=lfile))
        env_c = self.rs_env(path, "client", extra)
        pair = self._pair(tag, path, srv_argv, cli_argv, env_s, env_c, port, 120,
                          lambda: os.path.exists(lfile) and os.path.getsize(lfile) > 0)
        return pair and pair[1]

    def rs_iperf3(self, path, seconds, rsocket):
        """iperf3 through librspreload over uroce, or plain iperf3 (TCP)."""
        tag = f"{path.name}-rs-iperf3-{'rsocket' if rsocket else 'tcp'}"
        rsp = self.rspreload()
        if rsocket and not rsp:
            return None
        port = self.next_port()
        extra = {"LD_PRELOAD": rsp} if rsocket else None
        cli = self.rs_pair(tag, path, ["iperf3", "-s", "-1", "-B", path.server_addr,
                                       "-p", str(port)],
                           ["iperf3", "-c", path.server_addr, "-p", str(port),
                            "-t", str(seconds), "-J"], rsocket, extra, port)
        try:
            nbytes, secs = parsers.iperf3_received(cli.text()) if cli else (None, None)
        except (ValueError, KeyError) as e:
            self.fail(tag, f"iperf3 output: {e}", cli)
            return None
        return {"gbps": nbytes * 8 / secs / 1e9} if nbytes else None

    def rs_rstream(self, path, rsocket, iters):
        """rstream's 64-byte round trip (µs): over rsockets, or its TCP mode
        (-T s) over the kernel."""
        tag = f"{path.name}-rs-rstream-{'rsocket' if rsocket else 'tcp'}"
        port = self.next_port()
        opts = ["-p", str(port), "-S", "64", "-C", "1", "-I", str(iters)] + \
            ([] if rsocket else ["-T", "s"])
        cli = self.rs_pair(tag, path, ["rstream", "-b", path.server_addr] + opts,
                           ["rstream", "-s", path.server_addr] + opts, rsocket, None, port)
        line = next((l for l in (cli.text() if cli else "").splitlines()
                     if l.startswith("custom")), None)
        # usec/xfer is half a round trip: -C 1 with -I n is n transfers each way
        return {"rtt_us": float(line.split()[-1]) * 2} if line else None

    def rsocket_round(self, p):
        """One interleaved round of the issue 26 ratios on path p."""
        secs = 2 if self.quick else 3
        iters = 2000 if self.quick else 10000
        for rs in (True, False):
            name = "rsocket" if rs else "tcp"
            self.put(f"{p.name}/rsocket/iperf3_{name}", self.rs_iperf3(p, secs, rs))
            self.put(f"{p.name}/rsocket/rstream_{name}", self.rs_rstream(p, rs, iters))

    def udp_stream(self, path, size, seconds):
        tag = f"{path.name}-udpgso-s{size}"
        port = self.next_port()
        srv = Run(path.wrap([f"{self.bin}/udp_gso_stream", "recv", path.server_addr,
                             str(port)], "server"), self.plain_env(), self.logpath(tag + "-rcv"))
        if not self.wait_line(srv, "ready"):
            srv.kill()
            self.fail(tag, "receiver not ready", srv)
            return None
        cli = Run(path.wrap([f"{self.bin}/udp_gso_stream", "send", path.server_addr,
                             str(port), str(size), str(path.seg), str(seconds)], "client"),
                  self.plain_env(), self.logpath(tag + "-snd"))
        cli.wait(seconds + 20)
        srv.wait(40)
        r = parsers.udp_stream(srv.text(), cli.text())
        if not r or cli.rc != 0:
            self.fail(tag, f"udp stream rc={cli.rc}/{srv.rc}", srv, cli)
            return None
        nbytes = r["bytes"]
        cpu = cpu_total(srv, cli)
        return {"size": size, "seg": path.seg, "gbps": r["gbps"], "bytes": nbytes,
                "sent_bytes": r["sent_bytes"],
                "cpu_s": cpu, "cpu_s_per_gb": cpu / (nbytes / 1e9) if cpu else None}

    def udp_pingpong(self, path, size, iters, spin):
        mode = "spin" if spin else "block"
        tag = f"{path.name}-udppp-{mode}-s{size}"
        port = self.next_port()
        flag = ["--spin"] if spin else []
        srv = Run(path.wrap([f"{self.bin}/udp_pingpong", "server"] + flag +
                            [path.server_addr, str(port)], "server"),
                  self.plain_env(), self.logpath(tag + "-srv"))
        if not self.wait_line(srv, "ready"):
            srv.kill()
            self.fail(tag, "server not ready", srv)
            return None
        sz = min(size, 65000)
        cli = Run(path.wrap([f"{self.bin}/udp_pingpong", "client"] + flag +
                            [path.server_addr, str(port), str(sz), str(iters)], "client"),
                  self.plain_env(), self.logpath(tag + "-cli"))
        ok = cli.wait(60)
        srv.wait(5)
        if srv.rc is None:
            srv.kill()
        r = parsers.udp_pingpong(cli.text())
        if not ok or not r:
            self.fail(tag, f"ping-pong rc={cli.rc}", srv, cli)
            return None
        return {"size": size, "sent_size": sz, "rtt_min": r["rtt_min"],
                "rtt_median": r["rtt_median"], "rtt_avg": r["rtt_avg"],
                "half_rtt_median": r["rtt_median"] / 2}

    def neighbour_beside(self, path, what, secs):
        """bench/neighbour for secs in a session of its own, beside a
        ping-pong that spins on both sides: ib_send_lat 2 B over uroce
        (what "uroce") or the spinning UDP ping-pong ("udp_spin")."""
        tag = f"{path.name}-neighbour-{what}"
        port = self.next_port()
        if what == "uroce":
            args = ["ib_send_lat", "-F", "-p", str(port), "-s", "2", "-n", "10000000"]
            env = self.uroce_env
        else:
            args = [f"{self.bin}/udp_pingpong", "server", "--spin", path.server_addr, str(port)]
            env = (lambda p, side: self.plain_env())
        srv = Run(path.wrap(args, "server"), env(path, "server"), self.logpath(tag + "-srv"))
        up = (self.wait_tcp(path, port, srv) if what == "uroce"
              else self.wait_line(srv, "ready"))
        if not up:
            srv.kill()
            self.fail(tag, "server not ready", srv)
            return None
        if what == "uroce":
            cargs = args + [path.server_addr]
        else:
            cargs = [f"{self.bin}/udp_pingpong", "client", "--spin", path.server_addr,
                     str(port), "2", "10000000"]
        cli = Run(path.wrap(cargs, "client"), env(path, "client"), self.logpath(tag + "-cli"))
        # (perftest says nothing before its end, its output a file's:
        # the ping-pong under way is both sides alive a second on)
        time.sleep(1.0)
        hog = Run([f"{self.bin}/neighbour", str(secs)], self.plain_env(),
                  self.logpath(tag + "-hog"))
        ok = hog.wait(secs + 60)
        running = cli.alive() and srv.alive()
        cli.kill()
        srv.kill()
        r = parsers.neighbour(hog.text())
        if not ok or not r or not running:
            self.fail(tag, f"neighbour rc={hog.rc}, ping-pong running {running}", srv, cli, hog)
            return None
        r["share"] = r["cpu_s"] / r["wall_s"]
        return r

    def neighbour(self, path):
        """A CPU-bound program started in another session beside two
        processes spinning on a ping-pong (docs/progress.md, "The
        looker"): uroce's ib_send_lat against the UDP ping-pong, round
        after round."""
        secs = 3 if self.quick else 5
        res = {}
        for _ in range(self.repeats):
            for what in ("udp_spin", "uroce"):
                r = self.neighbour_beside(path, what, secs)
                if r:
                    res.setdefault(what, []).append(r)
        return res

    def memcpy(self, size, seconds):
        r = Run([f"{self.bin}/memcpy_bw", str(seconds), str(size)], self.plain_env(),
                self.logpath(f"memcpy-s{size}"))
        r.wait(60)
        m = parsers.memcpy_bw(r.text())
        if not m:
            self.fail(f"memcpy-s{size}", f"rc={r.rc}", r)
            return None
        nbytes = m["bytes"]
        cpu = cpu_total(r)
        return {"size": size, "gbps": m["gbps"], "bytes": nbytes,
                "cpu_s_per_gb": cpu / (nbytes / 1e9) if cpu else None}

    # ------------------------------------------------------------ qperf

    def qperf(self, path, tests):
        """qperf over uroce through our librdmacm (-cm1).  The server's device
        owns a fixed address, which the client dials."""
        tag = f"{path.name}-qperf"
        port = self.next_port()
        env_s = self.uroce_env(path, "server")
        dial = path.uroce_server_addr
        if not dial:                            # loopback: an address of lo
            dial = f"127.77.{os.getpid() % 250}.1"
            env_s["UROCE_ADDR"] = dial
        srv = Run(path.wrap(["qperf", "-lp", str(port)], "server"), env_s,
                  self.logpath(tag + "-srv"))
        out = {}
        try:
            if not self.wait_tcp(path, port, srv):
                self.fail(tag, "qperf server did not listen", srv)
                return None
            for test, size in tests:
                t = f"{tag}-{test}-s{size}"
                c0 = srv.proc_cpu()
                # the kernel's own tests (udp_lat, tcp_lat) dial the host's
                # address: to the device's own, udp_lat read 1 s
                kernel = not test.startswith(("rc_", "uc_", "ud_"))
                cli = Run(path.wrap(["qperf", path.server_addr if kernel else dial,
                                     "-lp", str(port), "-cm1", "-t",
                                     str(1 if self.quick else 2), "-m", str(size), test],
                                    "client"), self.uroce_env(path, "client"), self.logpath(t))
                ok = cli.wait(40)
                text = cli.text()
                c1 = srv.proc_cpu() if srv.alive() else c0
                m = parsers.qperf(text)
                if not ok or not m:
                    self.fail(t, f"qperf rc={cli.rc}", cli)
                    out[f"{test}-{size}"] = None
                    if not srv.alive():
                        break
                    continue
                if "gbps" in m:
                    out[f"{test}-{size}"] = {"test": test, "size": size,
                                             "gbps": m["gbps"],
                                             "cpu_s": (c1 - c0) + sum(cli.cpu)}
                else:
                    out[f"{test}-{size}"] = {"test": test, "size": size,
                                             "lat_us": m["lat_us"]}
        finally:
            srv.kill()
        return out

    # ------------------------------------------------------------ idle QPs

    def idle_qps(self, nqps, depth, seconds=0):
        r = Run([f"{self.bin}/idle_qps", str(nqps), str(depth), str(seconds)],
                self.uroce_env(Path("loopback"), "client", {"UROCE_STATS": "0"}),
                self.logpath(f"idle-{nqps}-{depth}"))
        return r

    def idle(self):
        res = {}
        rss = {}
        for depth in (1, 128):
            for n in (1, 1025):
                r = self.idle_qps(n, depth, 0)
                r.wait(120)
                m = parsers.idle_rss(r.text())
                if not m:
                    self.fail(f"idle_qps {n} {depth}", f"rc={r.rc}", r)
                    continue
                rss[(n, depth)] = m
        for depth in (1, 128):
            if (1, depth) in rss and (1025, depth) in rss:
                per = (rss[(1025, depth)][2] - rss[(1, depth)][2]) * 1024 / 1024
                res[f"rss_per_qp_bytes_depth{depth}"] = per
                res[f"rss_kb_1qp_depth{depth}"] = rss[(1, depth)][2]
                res[f"rss_kb_1025qp_depth{depth}"] = rss[(1025, depth)][2]
                res[f"rss_kb_device_depth{depth}"] = rss[(1, depth)][1]
                res[f"rss_kb_before_depth{depth}"] = rss[(1, depth)][0]
        # CPU of 16 connected idle QPs, sampled from /proc over a window
        window = 5 if self.quick else 10
        r = self.idle_qps(16, 128, -1)
        if self.wait_line(r, "ready", 30):
            time.sleep(0.5)
            c0, t0 = r.proc_cpu(), time.monotonic()
            time.sleep(window)
            c1, t1 = r.proc_cpu(), time.monotonic()
            res["idle16_cpu_s"] = c1 - c0
            res["idle16_window_s"] = t1 - t0
            res["idle16_core_pct"] = (c1 - c0) / (t1 - t0) * 100
            res["idle16_rss_kb"] = r.rss_kb()
            res["idle16_threads"] = len(os.listdir(f"/proc/{r.pid}/task"))
        else:
            self.fail("idle_qps 16", "not ready", r)
        r.kill()
        return res

    # ------------------------------------------------------------ profile

    def profile(self, path):
        """callgrind on both sides of a short ib_write_bw 64 KiB run."""
        if not shutil.which("valgrind"):
            return None
        port = self.next_port()
        args = ["ib_write_bw", "-F", "-p", str(port), "-s", "65536", "-n", str(self.prof_iters),
                "--report_gbits"]
        res = {}
        outs = {}
        vg = ["valgrind", "--tool=callgrind", "--separate-threads=no"]
        for side in ("server", "client"):
            outs[side] = os.path.join(self.work, f"callgrind.{side}.out")
        srv = Run(path.wrap(vg + [f"--callgrind-out-file={outs['server']}"] + args, "server"),
                  self.uroce_env(path, "server"), self.logpath("profile-srv"))
        if not self.wait_tcp(path, port, srv, 60):
            srv.kill()
            self.fail("profile", "server did not listen", srv)
            return None
        cli = Run(path.wrap(vg + [f"--callgrind-out-file={outs['client']}"] + args +
                            [path.server_addr], "client"),
                  self.uroce_env(path, "client"), self.logpath("profile-cli"))
        cli.wait(300)
        srv.wait(60)
        for side, f in outs.items():
            if not os.path.exists(f):
                continue
            a = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=95", f],
                               capture_output=True, text=True).stdout
            total, rows = parsers.callgrind(a)
            res[side] = {"total_ir": total, "top": rows[:15]}
        res["iters"] = self.prof_iters
        return res

    # ------------------------------------------------------------ shared address

    def shared(self, nidle=2):
        """The single-pair figures on one address shared by server, client
        and nidle idle processes (every packet steered by the reuseport
        program, docs/shared.md), next to the same
        runs on dedicated addresses (UROCE_SHARE=0: each socket alone)."""
        ded = Path("dedicated", server_addr="127.0.0.201", uroce_server_addr="127.0.0.201",
                   uroce_client_addr="127.0.0.202",
                   env={"UROCE_SHARE": "0", "UROCE_LOCAL": "0"})
        sha = Path("shared", server_addr="127.0.0.200", uroce_server_addr="127.0.0.200",
                   uroce_client_addr="127.0.0.200", env={"UROCE_LOCAL": "0"})
        out = {}
        idle = []
        try:
            # an idle perftest server has joined the address once it listens
            for i in range(nidle):
                port = self.next_port()
                r = Run(sha.wrap(["ib_write_bw", "-p", str(port)], "server"),
                        self.uroce_env(sha, "server"), self.logpath(f"shared-idle{i}"))
                idle.append(r)
                if not self.wait_tcp(sha, port, r):
                    self.fail(f"shared-idle{i}", "idle server did not listen", r)
            for t, size, qps, _, _ in SHARED_RUNS:
                n = self.lat_iters(size) if t.endswith("_lat") else self.bw_iters(size, qps)
                for p in (ded, sha):
                    out[shared_key(p.name, t, size, qps)] = self.perftest(
                        p, t, size, n, qps, timeout=240 if qps > 1 else 90)
            # those that stayed through every run (one that died cannot rejoin)
            out["idle_members"] = sum(r.alive() for r in idle)
        finally:
            for r in idle:
                r.kill()
        return out

    # ------------------------------------------------------------ veth

    def make_veth(self, name, mtu, net):
        """Two namespaces joined by a veth pair at link MTU mtu on net.0/24;
        uroce picks its IB MTU from the link's (9000: 4096, 1500: 1024)."""
        if os.geteuid() != 0:
            return None, "network namespaces need root"
        a, b = f"ub2-{name}-A{os.getpid()}", f"ub2-{name}-B{os.getpid()}"
        for ns in (a, b):
            r = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
            if r.returncode:
                return None, f"ip netns add: {r.stderr.strip()}"
            self.ns.append(ns)
        cmds = [["ip", "link", "add", "ubv0", "netns", a, "mtu", str(mtu), "type", "veth",
                 "peer", "name", "ubv1", "netns", b, "mtu", str(mtu)],
                ["ip", "-n", a, "addr", "add", f"{net}.1/24", "dev", "ubv0"],
                ["ip", "-n", b, "addr", "add", f"{net}.2/24", "dev", "ubv1"],
                ["ip", "-n", a, "link", "set", "lo", "up"],
                ["ip", "-n", b, "link", "set", "lo", "up"],
                ["ip", "-n", a, "link", "set", "ubv0", "up"],
                ["ip", "-n", b, "link", "set", "ubv1", "up"]]
        for c in cmds:
            r = subprocess.run(c, capture_output=True, text=True)
            if r.returncode:
                return None, f"{' '.join(c)}: {r.stderr.strip()}"
        # wait for the carrier on both ends (a veth pair is up at once,
        # but its address leaves the tentative state only then)
        for _ in range(50):
            up = [subprocess.run(["ip", "-n", ns, "-o", "link", "show", dev],
                                 capture_output=True, text=True).stdout
                  for ns, dev in ((a, "ubv0"), (b, "ubv1"))]
            if all("LOWER_UP" in u for u in up):
                break
            time.sleep(0.1)
        ib_mtu = 4096 if mtu >= 4096 + 100 else 1024
        return Path(name, a, b, f"{net}.1", f"{net}.1", f"{net}.2",
                    seg=ib_mtu + 32, mtu=ib_mtu, link_mtu=mtu), None

    def cleanup(self):
        """Our namespaces, and what still runs in them (only ours: a far
        Open MPI daemon whose mpirun was killed, say)."""
        self.incast_cleanup()
        for ns in self.ns:
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.ns = []

    # ------------------------------------------------------------ the run

    def plan(self):
        q = self.quick
        # the size sweeps: ib_write_bw at every size, read and send where
        # the targets compare them (64 KiB); the repeats add the medians
        self.bw_sizes = [2, 64 * KIB, 1 * MIB] if q else \
            [2, 1 * KIB, 16 * KIB, 64 * KIB, 1 * MIB, 8 * MIB]
        self.lat_sizes = [2, 64 * KIB] if q else [2, 4 * KIB, 64 * KIB]
        self.bw_tests = ["ib_write_bw", "ib_read_bw", "ib_send_bw"]
        self.lat_tests = ["ib_write_lat", "ib_read_lat", "ib_send_lat"]
        self.qp_counts = [1, 1024] if q else [1, 16, 256, 1024]
        self.qp_tests = ["ib_write_bw"]
        self.base_secs = 1 if q else 2
        self.target_bytes = (96 if q else 256) * MIB
        self.max_iters = 20000 if q else 100000
        self.prof_iters = 2000

    def bw_iters(self, size, qps=1):
        return int(max(20 if qps == 1 else 10,
                       min(self.max_iters, self.target_bytes // (size * qps))))

    def lat_iters(self, size):
        base = 500 if self.quick else 2000
        return base if size < 16 * KIB else base // 4

    def pp_iters(self, size):
        """The UDP ping-pong beside a latency run: more round trips, as
        each is cheaper than perftest's start-up."""
        return self.lat_iters(size) * (5 if size < 16 * KIB else 2)

    # ------------------------------------------------------------ repeats

    def put(self, key, res):
        """One sample of key; the result kept is the median of its samples."""
        self.samples.setdefault(key, []).append(res)

    def bw_tests_at(self, size):
        return self.bw_tests if size == 64 * KIB else self.bw_tests[:1]

    def target_round(self, p):
        """The runs the issue 15 targets read, one round on path p."""
        size = 64 * KIB
        self.put(f"{p.name}/iperf3/{size}", self.iperf3(p, size, self.base_secs))
        one = self.perftest(p, "ib_write_bw", size, self.bw_iters(size))
        self.put(f"{p.name}/ib_write_bw/{size}/1", one)
        self.put(f"{p.name}/qp/ib_write_bw/1", one)     # the same command
        self.put(f"{p.name}/qp/ib_write_bw/1024",
                 self.perftest(p, "ib_write_bw", size, self.bw_iters(size, 1024), 1024,
                               timeout=240))
        it = self.lat_iters(2)
        self.put(f"{p.name}/udp_pp_spin/2", self.udp_pingpong(p, 2, self.pp_iters(2), True))
        for t in self.lat_tests:
            self.put(f"{p.name}/{t}/2", self.perftest(p, t, 2, it))

    def alt_round(self, p):
        for k, v in self.alternatives(p, self.dead).items():
            self.put(k, v)

    def want(self, case):
        return case in self.cases

    # ------------------------------------------------------------ the run

    def make_paths(self):
        """The paths asked for, in order: local and udp (loopback, the
        same-host path and UROCE_LOCAL=0), veth9000 and veth1500."""
        meta = self.res["meta"]
        paths = []
        for name in self.path_names:
            if name == "local":
                paths.append(Path("local"))
            elif name == "udp":
                paths.append(Path("udp", env={"UROCE_LOCAL": "0"}))
            else:
                mtu, net = next((m, n) for v, m, n in VETHS if v == name)
                p, why = self.make_veth(name, mtu, net)
                if p:
                    paths.append(p)
                else:
                    log(f"{name} path skipped: {why}")
                    meta.setdefault("skipped", {})[name] = why
        return paths

    def run(self):
        args = self.args
        self.plan()
        meta = self.res["meta"]
        meta["command"] = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], ROOT)]
                                   + sys.argv[1:])
        meta["started"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        meta["loadavg_start"] = os.getloadavg()
        meta["nproc"] = os.cpu_count()
        meta["kernel"] = os.uname().release
        meta["cpu"] = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                            if l.startswith("model name")), "?")
        meta["commit"] = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                                        capture_output=True, text=True).stdout.strip()
        meta["quick"] = self.quick
        meta["repeats"] = self.repeats
        meta["cases"] = sorted(self.cases)
        for pkg in ("perftest", "iperf3", "ucx-utils", "libfabric-bin", "openmpi-bin", "tgt",
                    "libiscsi-bin", "libgloo-dev"):
            meta[pkg] = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg],
                                       capture_output=True, text=True).stdout
        t_start = time.monotonic()

        paths = self.make_paths()
        meta["paths"] = [p.name for p in paths]
        meta["links"] = {p.name: {"link_mtu": p.link_mtu, "ib_mtu": p.mtu,
                                  "server": p.server_addr, "env": p.env} for p in paths}
        alt_paths = [p for p in paths if not p.same_host()][:1]
        meta["alt_paths"] = [p.name for p in alt_paths] if self.want("alt") else []
        have_cm = os.path.exists(os.path.join(self.lib, "librdmacm.so.1"))
        meta["qperf"] = "yes" if have_cm and shutil.which("qperf") else "n/a"
        R = self.res["runs"]

        # 1. bandwidth vs size, interleaved: for each size, for each path,
        #    the baselines and then uroce
        for size in self.bw_sizes if self.want("bw") else []:
            self.put(f"memcpy/{size}", self.memcpy(size, 0.1 if self.quick else 0.25))
            secs = self.base_secs if size == 64 * KIB else 1
            for p in paths:
                log(f"{p.name}: bandwidth, {size_name(size)}")
                self.put(f"{p.name}/iperf3/{size}", self.iperf3(p, size, secs))
                self.put(f"{p.name}/udp_gso/{size}", self.udp_stream(p, size, secs))
                for t in self.bw_tests_at(size):
                    self.put(f"{p.name}/{t}/{size}/1", self.perftest(p, t, size,
                                                                     self.bw_iters(size)))

        # 2. bandwidth vs QP count at 64 KiB, with the baselines again
        size = 64 * KIB
        for qps in self.qp_counts if self.want("qps") else []:
            for p in paths:
                log(f"{p.name}: bandwidth, 64K, {qps} QPs")
                if qps == self.qp_counts[0]:
                    self.put(f"{p.name}/iperf3/qpsweep", self.iperf3(p, size, self.base_secs))
                    self.put(f"{p.name}/udp_gso/qpsweep",
                             self.udp_stream(p, size, self.base_secs))
                for t in self.qp_tests:
                    self.put(f"{p.name}/qp/{t}/{qps}", self.perftest(
                        p, t, size, self.bw_iters(size, qps), qps,
                        timeout=240 if qps >= 256 else 90))

        # 3. latency vs size
        for size in self.lat_sizes if self.want("lat") else []:
            for p in paths:
                log(f"{p.name}: latency, {size_name(size)}")
                it = self.lat_iters(size)
                pp = self.pp_iters(size)
                self.put(f"{p.name}/udp_pp_spin/{size}", self.udp_pingpong(p, size, pp, True))
                self.put(f"{p.name}/udp_pp_block/{size}", self.udp_pingpong(p, size, pp, False))
                for t in self.lat_tests:
                    self.put(f"{p.name}/{t}/{size}", self.perftest(p, t, size, it))

        # 4. the user's alternatives, then the repeats of what the targets
        #    read (every path, and the alternatives, in turn), so that
        #    each target is a median of interleaved runs
        for r in range(self.repeats):
            for p in alt_paths if self.want("alt") else []:
                log(f"{p.name}: UCX, libfabric, Open MPI over TCP and over uroce "
                    f"({r + 1}/{self.repeats})")
                self.alt_round(p)
            if self.want("apps"):
                self.apps_round()
            if self.want("incast"):
                self.incast_round()
            if r == 0 and any(self.want(c) for c in ("bw", "qps", "lat")):
                continue        # the sweeps were the first round
            for p in paths if self.want("repeat") else []:
                log(f"{p.name}: the target runs, round {r + 1}/{self.repeats}")
                self.target_round(p)
        # 4b. rsockets against kernel TCP (issue 26), interleaved rounds
        for r in range(self.repeats) if self.want("rsocket") else []:
            for p in paths:
                log(f"{p.name}: rsockets against TCP, round {r + 1}/{self.repeats}")
                self.rsocket_round(p)
        for key, samples in self.samples.items():
            R[key] = median_result(samples)

        # 5. qperf over uroce (through our librdmacm)
        # (on the first path and the alternatives' path: the time a run allows)
        for p in [q for q in paths if q is paths[0] or q in alt_paths] \
                if self.want("qperf") else []:
            if meta["qperf"] != "yes":
                break
            log(f"{p.name}: qperf")
            tests = [("rc_bw", 64 * KIB), ("rc_rdma_write_bw", 64 * KIB),
                     ("rc_rdma_read_bw", 64 * KIB), ("rc_lat", 2), ("rc_rdma_write_lat", 2),
                     ("rc_rdma_read_lat", 2)]
            R[f"{p.name}/qperf"] = self.qperf(p, tests)

        # 5b. event-driven (docs/events.md): qperf with its defaults (it
        #     sleeps on a completion channel) against its own udp_lat and
        #     tcp_lat in the same server, perftest -e against the blocking
        #     UDP ping-pong and against perftest polling
        for p in paths if self.want("events") else []:
            log(f"{p.name}: event-driven")
            if meta["qperf"] == "yes":
                R[f"{p.name}/qperf_events"] = self.qperf(
                    p, [("udp_lat", 2), ("tcp_lat", 2), ("rc_lat", 2), ("ud_lat", 2),
                        ("rc_rdma_read_lat", 2)])
            it = self.lat_iters(2)
            R[f"{p.name}/events/udp_pp_block/2"] = self.udp_pingpong(
                p, 2, self.pp_iters(2), False)
            for t in ("ib_send_lat", "ib_read_lat"):
                R[f"{p.name}/events/{t}/2"] = self.perftest(p, t, 2, it, extra=("-e",))
            n = self.bw_iters(64 * KIB)
            R[f"{p.name}/events/ib_send_bw/{64 * KIB}"] = self.perftest(
                p, "ib_send_bw", 64 * KIB, n, extra=("-e",))
            R[f"{p.name}/events/ib_send_bw_poll/{64 * KIB}"] = self.perftest(
                p, "ib_send_bw", 64 * KIB, n)

        # 5c. a neighbour: a CPU-bound program in another session beside
        #     two spinning processes, its share and its longest stall
        for p in [q for q in paths if not q.same_host()][:1] if self.want("neighbour") else []:
            log(f"{p.name}: a neighbour in another session")
            R[f"{p.name}/neighbour"] = self.neighbour(p)

        # 6. idle QPs: memory per QP, CPU of 16 connected idle QPs
        if self.want("idle"):
            log("idle QPs: RSS per QP, CPU of 16 idle QPs")
            R["idle"] = self.idle()

        # 7. where the time goes
        if self.want("profile") and not args.no_profile and not self.quick and paths:
            log(f"callgrind profile of ib_write_bw 64K ({paths[0].name})")
            R["profile"] = self.profile(paths[0])
            meta["profile_path"] = paths[0].name

        # 8. one address shared by several processes (over UDP)
        if self.want("shared") and any(p.same_host() for p in paths):
            log("shared address vs dedicated addresses")
            R["shared"] = self.shared()

        meta["loadavg_end"] = os.getloadavg()
        meta["duration_s"] = time.monotonic() - t_start
        meta["failures"] = self.failures
        self.cleanup()

