#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""uroce under packet loss (issue 17).

    bench/run --loss [--quick] [--build DIR] [--baseline-rev REV |
                     --baseline-lib DIR] [--out DIR] [--seconds S] [--reps N]

In a private network namespace (root), the loopback drops datagrams with
iptables: `-m statistic --mode random --probability P -j DROP` on UDP 4791
and, with the same rule, on both directions of iperf3's TCP port (on
loopback a GSO/TSO super-packet is one unit for the rule, for TCP and for
us alike).  Measured, in one invocation and interleaved:

  - goodput of ib_write_bw, ib_read_bw and ib_send_bw (64 KiB, perftest's
    defaults, -D seconds) and of iperf3 TCP under iid loss P in
    0, 1e-4, 1e-3, 1e-2, 5e-2, 1e-1;
  - the same for ib_write_bw and iperf3 under drop periods: everything on
    those ports lost for D ms (1..50) every 500 ms;
  - ibv_rc_pingpong -s 1048576 at 10 % loss: time per iteration, ACK
    timeouts per 100 MiB exchanged, and RETRY_EXC_ERR over many runs.

Each uroce figure is taken for our build and, when a baseline is given
(a git revision built here, or a library directory), for the baseline in
the same run, so the report shows before and after.  Writes DIR/loss.md,
DIR/loss.json and DIR/loss.png (default DIR: bench/report).

A benchmark, not a test: it asserts nothing; the report compares the
ratios with issue 17's targets.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = f"uroce-loss-{os.getpid()}"
SRV, CLI = "127.0.0.1", "127.0.0.2"     # each side's uroce address in NS
RATES = [0, 1e-4, 1e-3, 1e-2, 5e-2, 1e-1]
PERIODS_MS = [1, 5, 20, 50]
BW_TESTS = ["ib_write_bw", "ib_read_bw", "ib_send_bw"]
COUNTERS = ["timeouts", "timeout_retries", "retransmits", "early_retransmits",
            "tlp_probes", "tx_nak_seq", "tx_nak_seq_resent", "rx_nak_seq",
            "tx_resent_bytes", "tx_delivered_bytes", "duplicates", "out_of_seq"]


def pkey(p):
    """the key of a loss rate in the results ("0", "0.001")"""
    return f"{float(p):g}"


def log(msg):
    print(f"[loss {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def nsexec(argv):
    return ["ip", "netns", "exec", NS] + argv


# ---------------------------------------------------------------- the path

class LossyLoopback:
    """A namespace whose loopback drops what the iptables rules say."""

    def __init__(self):
        sh("ip", "netns", "add", NS)
        sh("ip", "-n", NS, "link", "set", "lo", "up")
        self.tcp_port = None

    def close(self):
        sh("ip", "netns", "del", NS, check=False)

    def ipt(self, *args, check=True):
        return sh(*nsexec(["iptables"] + list(args)), check=check)

    def matches(self):
        m = [["-p", "udp", "--dport", "4791"]]
        if self.tcp_port:
            m += [["-p", "tcp", "--dport", str(self.tcp_port)],
                  ["-p", "tcp", "--sport", str(self.tcp_port)]]
        return m

    def set_loss(self, p, tcp_port=None):
        self.tcp_port = tcp_port
        self.ipt("-F", "INPUT")
        if p <= 0:
            return
        for m in self.matches():
            self.ipt("-A", "INPUT", *m, "-m", "statistic", "--mode", "random",
                     "--probability", f"{p:.6f}", "-j", "DROP")

    def blackout(self, on):
        if on:
            self.black = self.matches()
        for m in self.black:
            self.ipt("-I" if on else "-D", "INPUT", *(["1"] if on else []), *m, "-j", "DROP",
                     check=False)


class Periods(threading.Thread):
    """Everything lost for ms milliseconds every 500 ms, while a run lasts;
    records how long each blackout really was (iptables takes a while)."""

    def __init__(self, path, ms):
        super().__init__(daemon=True)
        self.path, self.ms, self.stop = path, ms, threading.Event()
        self.actual = []

    def run(self):
        time.sleep(0.5)
        while not self.stop.is_set():
            t0 = time.monotonic()
            self.path.blackout(True)
            t1 = time.monotonic()
            time.sleep(self.ms / 1000)
            t2 = time.monotonic()
            self.path.blackout(False)
            t3 = time.monotonic()
            # lost from somewhere in [t0, t1] to somewhere in [t2, t3]
            self.actual.append(((t2 - t1) + (t3 - t0)) / 2 * 1000)
            self.stop.wait(0.5)


# ---------------------------------------------------------------- runs

class Runner:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="uroce-loss.")
        self.port = 21000 + os.getpid() % 500 * 8
        self.n = 0

    def next_port(self):
        self.port += 1
        return self.port

    def logfile(self, tag):
        self.n += 1
        return os.path.join(self.work, f"{self.n:04d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', tag)}.log")

    def env(self, lib, addr):
        e = dict(os.environ)
        # UROCE_LOCAL=0: the two processes share a namespace, so they
        # would meet on the same-host path, where iptables drops nothing;
        # this measures recovery from loss on the network (UDP) path
        e.update(LD_LIBRARY_PATH=lib, UROCE_ADDR=addr, UROCE_STATS="1",
                 UROCE_LOCAL="0")
        for k in ("UROCE_FAULT", "UROCE_PCAP", "UROCE_IFNAME"):
            e.pop(k, None)
        return e

    def pair(self, tag, srv_argv, cli_argv, srv_env, cli_env, timeout, ready=None):
        """Start the server, wait until it listens, run the client; returns
        (client rc or None on timeout, server text, client text)."""
        fs, fc = self.logfile(tag + "-srv"), self.logfile(tag + "-cli")
        with open(fs, "w") as so, open(fc, "w") as co:
            s = subprocess.Popen(nsexec(srv_argv), env=srv_env, stdout=so,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if ready:
                end = time.monotonic() + 10
                while time.monotonic() < end and s.poll() is None:
                    r = sh(*nsexec(["ss", "-ltnH", f"sport = :{ready}"]), check=False)
                    if f":{ready}" in r.stdout:
                        break
                    time.sleep(0.05)
            c = subprocess.Popen(nsexec(cli_argv), env=cli_env, stdout=co,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                rc = c.wait(timeout)
            except subprocess.TimeoutExpired:
                c.kill()
                c.wait()
                rc = None
            try:
                s.wait(10 if rc == 0 else 2)
            except subprocess.TimeoutExpired:
                s.kill()
                s.wait()
        with open(fs, errors="replace") as f:
            st = f.read()
        with open(fc, errors="replace") as f:
            ct = f.read()
        return rc, st, ct

    @staticmethod
    def counters(*texts):
        out = {}
        for t in texts:
            for m in re.finditer(r"uroce-stats:((?: [a-z0-9_]+=\d+)+)", t):
                for k, v in re.findall(r"([a-z0-9_]+)=(\d+)", m.group(1)):
                    if k in COUNTERS:
                        out[k] = out.get(k, 0) + int(v)
        return out

    def perftest(self, lib, test, secs, tag):
        port = self.next_port()
        argv = [test, "-F", "-s", "65536", "-D", str(secs), "--report_gbits", "-p", str(port)]
        rc, st, ct = self.pair(tag, argv, argv + [SRV], self.env(lib, SRV), self.env(lib, CLI),
                               secs + 40, ready=port)
        res = {"rc": rc, "counters": self.counters(st, ct)}
        m = re.search(r"^\s*65536\s+(\d+)\s+([\d.]+)\s+([\d.]+)", ct, re.M)
        res["gbps"] = float(m.group(3)) if m and rc == 0 else None
        if "retry counter exceeded" in ct + st or "RETRY_EXC" in ct + st:
            res["retry_exc"] = True
        return res

    def iperf3(self, path, p, secs, tag, port=None):
        if port is None:
            port = self.next_port()
            path.set_loss(p, port)
        env = dict(os.environ)
        env.pop("LD_LIBRARY_PATH", None)
        rc, st, ct = self.pair(tag, ["iperf3", "-s", "-1", "-p", str(port)],
                               ["iperf3", "-c", SRV, "-p", str(port), "-t", str(secs), "-J"],
                               env, env, secs + 40, ready=port)
        try:
            r = json.loads(ct)["end"]["sum_received"]
            return {"gbps": r["bytes"] * 8 / r["seconds"] / 1e9,
                    "retransmits": json.loads(ct)["end"]["sum_sent"].get("retransmits")}
        except (ValueError, KeyError):
            return {"gbps": None, "rc": rc}

    def pingpong(self, lib, iters, tag):
        port = self.next_port()
        argv = ["ibv_rc_pingpong", "-g", "0", "-s", "1048576", "-n", str(iters), "-p", str(port)]
        rc, st, ct = self.pair(tag, argv, argv + [SRV], self.env(lib, SRV), self.env(lib, CLI),
                               120, ready=port)
        m = re.search(r"([\d.]+) usec/iter", ct)
        return {"rc": rc, "usec_per_iter": float(m.group(1)) if m and rc == 0 else None,
                "retry_exc": "retry counter exceeded" in ct + st,
                "bytes": 2 * iters * 1048576, "counters": self.counters(st, ct)}


def build_baseline(rev, work):
    src = os.path.join(work, "baseline-src")
    os.makedirs(src)
    log(f"building the baseline {rev} in {src}")
    arch = subprocess.run(["git", "-C", ROOT, "archive", rev], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", src], input=arch.stdout, check=True)
    b = os.path.join(src, "build")
    sh("cmake", "-S", src, "-B", b)
    sh("cmake", "--build", b, "-j2", "--target", "ibverbs")
    return os.path.join(b, "lib")


# ---------------------------------------------------------------- driver

def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def merge(rs):
    """Several runs of one configuration: median goodput, summed counters."""
    out = {"gbps": median([r.get("gbps") for r in rs]), "runs": rs,
           "failed": sum(1 for r in rs if r.get("gbps") is None),
           "retry_exc": sum(1 for r in rs if r.get("retry_exc"))}
    c = {}
    for r in rs:
        for k, v in r.get("counters", {}).items():
            c[k] = c.get(k, 0) + v
    out["counters"] = c
    return out


def measure(args):
    R = Runner(args)
    libs = {"new": os.path.join(os.path.abspath(args.build), "lib")}
    if args.baseline_lib:
        libs["old"] = os.path.abspath(args.baseline_lib)
    elif args.baseline_rev:
        libs["old"] = build_baseline(args.baseline_rev, R.work)
    res = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": args.seconds,
                    "reps": args.reps, "versions": list(libs),
                    "baseline": args.baseline_rev or args.baseline_lib,
                    "rev": sh("git", "-C", ROOT, "rev-parse", "--short", "HEAD",
                              check=False).stdout.strip(),
                    "nproc": os.cpu_count(), "load": os.getloadavg()},
           "iid": {}, "periods": {}, "pingpong": {}}
    path = LossyLoopback()
    try:
        for p in args.rates:
            runs = {}
            for rep in range(args.reps):
                # interleaved: TCP, then each test for each version
                runs.setdefault("iperf3", []).append(
                    R.iperf3(path, p, args.seconds, f"iperf3-p{p}"))
                path.set_loss(p)
                for t in BW_TESTS:
                    for v, lib in libs.items():
                        runs.setdefault(f"{v}/{t}", []).append(
                            R.perftest(lib, t, args.seconds, f"{v}-{t}-p{p}"))
            res["iid"][pkey(p)] = {k: merge(v) for k, v in runs.items()}
            log(f"P={p:g}: " + "  ".join(f"{k} {fmt(v['gbps'])}" for k, v in
                                          res["iid"][pkey(p)].items()))
        for ms in args.periods:
            runs = {}
            port = R.next_port()
            path.set_loss(0, port)
            for key, fn in [("iperf3", None)] + [(f"{v}/ib_write_bw", lib)
                                                  for v, lib in libs.items()]:
                per = Periods(path, ms)
                per.start()
                if fn is None:
                    r = R.iperf3(path, 0, args.seconds, f"iperf3-d{ms}", port=port)
                else:
                    r = R.perftest(fn, "ib_write_bw", args.seconds, f"{key}-d{ms}")
                per.stop.set()
                per.join()
                r["blackout_ms"] = median(per.actual)
                r["blackouts"] = len(per.actual)
                runs[key] = merge([r])
                runs[key]["blackout_ms"] = r["blackout_ms"]
                path.set_loss(0, port)
            res["periods"][pkey(ms)] = runs
            log(f"drops {ms} ms: " + "  ".join(f"{k} {fmt(v['gbps'])}" for k, v in runs.items()))
        path.set_loss(0.1)
        for v, lib in libs.items():
            n = args.pp_runs if v == "new" else 1
            iters = 30 if v == "new" else 10
            rs = [R.pingpong(lib, iters, f"{v}-pp-{i}") for i in range(n)]
            t = median([r["usec_per_iter"] for r in rs])
            nbytes = sum(r["bytes"] for r in rs)
            to = sum(r["counters"].get("timeouts", 0) for r in rs)
            res["pingpong"][v] = {"runs": len(rs), "iters": iters, "usec_per_iter": t,
                                  "timeouts": to, "bytes": nbytes,
                                  "timeouts_per_100mib": to / (nbytes / (100 * 1048576)),
                                  "retry_exc": sum(1 for r in rs if r["retry_exc"]),
                                  "failed": sum(1 for r in rs if r["usec_per_iter"] is None),
                                  "counters": merge(rs)["counters"]}
            log(f"pingpong {v}: {fmt(t)} us/iter, {res['pingpong'][v]['timeouts_per_100mib']:.2f} "
                f"timeouts/100MiB, {res['pingpong'][v]['retry_exc']} RETRY_EXC_ERR in {n} runs")
    finally:
        path.close()
    log(f"run logs in {R.work}")
    return res


# ---------------------------------------------------------------- report

def fmt(x, nd=3):
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{nd}g}"
    return str(x)


def ratio(a, b):
    return a / b if a is not None and b else None


def targets(res):
    I = res["iid"]

    def g(p, k):
        return I.get(pkey(p), {}).get(k, {}).get("gbps")

    rows = []
    w0 = g(0, "new/ib_write_bw")
    for p, t in ((1e-4, 0.8), (1e-3, 0.5), (1e-2, 0.25)):
        rows.append((f"ib_write_bw at {p:g} ÷ loss-free", f"≥ {t}",
                     ratio(g(p, "new/ib_write_bw"), w0), t, ratio(g(p, "old/ib_write_bw"),
                                                                  g(0, "old/ib_write_bw"))))
    for p in (1e-4, 1e-3, 1e-2):
        rows.append((f"ib_write_bw ÷ iperf3 TCP at {p:g}", "≥ 0.5",
                     ratio(g(p, "new/ib_write_bw"), g(p, "iperf3")), 0.5,
                     ratio(g(p, "old/ib_write_bw"), g(p, "iperf3"))))
    pp = res["pingpong"]
    n, o = pp.get("new", {}), pp.get("old", {})
    rows.append(("rc_pingpong 1 MiB at 10 %: timeouts per 100 MiB", "≤ 10",
                 n.get("timeouts_per_100mib"), -10, o.get("timeouts_per_100mib")))
    rows.append((f"rc_pingpong at 10 %: RETRY_EXC_ERR in {n.get('runs')} runs of 30", "0",
                 n.get("retry_exc"), -0, o.get("retry_exc")))
    if "old/ib_write_bw" in I.get(pkey(0), {}):
        rows.append(("clean link: ib_write_bw new ÷ old", "within noise",
                     ratio(w0, g(0, "old/ib_write_bw")), None, None))
    return rows


def verdict(val, t):
    if val is None or t is None:
        return "—"
    return "met" if (val >= t if t > 0 else val <= -t) else "MISSED"


def plot(res, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5))
    xs = [p if p else 3e-5 for p in RATES]          # 0 drawn at the left edge
    style = {"ib_write_bw": "o", "ib_read_bw": "s", "ib_send_bw": "^"}
    for v, ls in (("new", "-"), ("old", ":")):
        for t in BW_TESTS:
            ys = [res["iid"].get(pkey(p), {}).get(f"{v}/{t}", {}).get("gbps") for p in RATES]
            pts = [(x, y) for x, y in zip(xs, ys) if y]
            if pts:
                ax.plot(*zip(*pts), ls, marker=style[t],
                        label=f"{t} ({'this branch' if v == 'new' else 'before'})")
    ys = [res["iid"].get(pkey(p), {}).get("iperf3", {}).get("gbps") for p in RATES]
    pts = [(x, y) for x, y in zip(xs, ys) if y]
    if pts:
        ax.plot(*zip(*pts), "k--", lw=2, label="iperf3 TCP")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels(["0"] + [f"{p:g}" for p in RATES[1:]])
    ax.set_xlabel("iid loss probability (iptables statistic DROP)")
    ax.set_ylabel("goodput, Gbit/s")
    ax.set_title("64 KiB, loopback in a netns")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ms = PERIODS_MS
    for key, st in (("new/ib_write_bw", "o-"), ("old/ib_write_bw", "o:"), ("iperf3", "k--")):
        ys = [res["periods"].get(pkey(m), {}).get(key, {}).get("gbps") for m in ms]
        pts = [(x, y) for x, y in zip(ms, ys) if y]
        if pts:
            bx.plot(*zip(*pts), st, label=key.replace("new/", "this branch: ")
                    .replace("old/", "before: "))
    bx.set_xscale("log")
    bx.set_yscale("log")
    bx.set_xticks(ms)
    bx.set_xticklabels([str(m) for m in ms])
    bx.set_xlabel("blackout, nominal ms (one every 500 ms; measured in loss.md)")
    bx.set_ylabel("goodput, Gbit/s")
    bx.set_title("drop periods")
    bx.grid(True, which="both", alpha=0.3)
    bx.legend(fontsize=8)
    fig.tight_layout()
    name = "loss.png"
    fig.savefig(os.path.join(out, name), dpi=100)
    return name


def report(res, out, png, notes):
    L = []
    w = L.append
    m = res["meta"]
    w("# uroce under packet loss (issue 17)\n")
    w(f"Run {m['date']} at {m['rev']}, {m['seconds']} s per run, {m['reps']} run(s) per "
      f"point (median), {m['nproc']} CPUs, load average at start {m['load'][0]:.1f}. "
      f"`before` is {m.get('baseline') or 'not measured'}, built and run in the same "
      "invocation, interleaved with this branch. Made by `bench/run --loss`.\n")
    if png:
        w(f"![goodput vs loss]({png})\n")
    w("## Targets\n")
    w("| what | target | this branch | verdict | before |")
    w("|---|---|---|---|---|")
    for what, tgt, val, t, old in targets(res):
        w(f"| {what} | {tgt} | {fmt(val)} | {verdict(val, t)} | {fmt(old)} |")
    w("\n## Goodput under iid loss, Gbit/s\n")
    keys = ["iperf3"] + [f"{v}/{t}" for t in BW_TESTS for v in m["versions"]]
    w("| P | " + " | ".join(keys) + " |")
    w("|---" * (len(keys) + 1) + "|")
    for p in RATES:
        row = res["iid"].get(pkey(p), {})
        cells = []
        for k in keys:
            r = row.get(k, {})
            c = fmt(r.get("gbps"))
            if r.get("failed"):
                c += f" ({r['failed']} failed)"
            cells.append(c)
        w(f"| {p:g} | " + " | ".join(cells) + " |")
    w("\n## Counters (both sides, all runs of a point), ib_write_bw\n")
    cols = ["timeouts", "timeout_retries", "tlp_probes", "early_retransmits", "tx_nak_seq",
            "tx_nak_seq_resent", "resent/delivered"]
    w("| P | version | " + " | ".join(cols) + " |")
    w("|---|---" + "|---" * len(cols) + "|")
    for p in RATES:
        for v in m["versions"]:
            c = res["iid"].get(pkey(p), {}).get(f"{v}/ib_write_bw", {}).get("counters", {})
            rd = ratio(c.get("tx_resent_bytes"), c.get("tx_delivered_bytes"))
            w(f"| {p:g} | {v} | " + " | ".join(fmt(c.get(k)) for k in cols[:-1]) +
              f" | {fmt(rd)} |")
    w("\n## Drop periods: ib_write_bw and iperf3, Gbit/s\n")
    pk = ["iperf3"] + [f"{v}/ib_write_bw" for v in m["versions"]]
    w("| blackout (nominal) | measured | " + " | ".join(pk) + " | timeouts (" +
      ", ".join(m["versions"]) + ") |")
    w("|---|---" + "|---" * len(pk) + "|---|")
    for ms in PERIODS_MS:
        row = res["periods"].get(pkey(ms), {})
        meas = row.get(pk[1], {}).get("blackout_ms")
        w(f"| {ms} ms | {fmt(meas)} ms | " + " | ".join(fmt(row.get(k, {}).get("gbps"))
                                                     for k in pk) + " | " +
          ", ".join(fmt(row.get(f"{v}/ib_write_bw", {}).get("counters", {}).get("timeouts"))
                    for v in m["versions"]) + " |")
    w("\n## ibv_rc_pingpong -s 1048576 at 10 % loss\n")
    w("| version | runs × iterations | µs/iteration (median) | timeouts | per 100 MiB | "
      "RETRY_EXC_ERR | probes | NAKs re-sent |")
    w("|---|---|---|---|---|---|---|---|")
    for v, r in res["pingpong"].items():
        c = r["counters"]
        w(f"| {v} | {r['runs']} × {r['iters']} | {fmt(r['usec_per_iter'])} | {r['timeouts']} | "
          f"{r['timeouts_per_100mib']:.2f} | {r['retry_exc']} | {fmt(c.get('tlp_probes'))} | "
          f"{fmt(c.get('tx_nak_seq_resent'))} |")
    if notes:
        w("\n" + notes)
    with open(os.path.join(out, "loss.md"), "w") as f:
        f.write("\n".join(L) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 s runs, 1 per point, 20 ping-pongs")
    ap.add_argument("--build", default=os.environ.get("UROCE_BUILD_DIR",
                                                     os.path.join(ROOT, "build")))
    ap.add_argument("--baseline-rev", help="git revision to build and compare against")
    ap.add_argument("--baseline-lib", help="a directory holding a baseline libibverbs.so.1")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "report"))
    ap.add_argument("--seconds", type=int, default=None)
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--pp-runs", type=int, default=None)
    ap.add_argument("--rates", default=",".join(str(p) for p in RATES))
    ap.add_argument("--periods", default=",".join(str(p) for p in PERIODS_MS))
    ap.add_argument("--report-only", metavar="LOSS_JSON")
    args = ap.parse_args(argv)
    args.rates = [float(x) for x in args.rates.split(",") if x]
    args.periods = [int(x) for x in args.periods.split(",") if x]
    args.seconds = args.seconds or (2 if args.quick else 5)
    args.reps = args.reps or (1 if args.quick else 3)
    args.pp_runs = args.pp_runs or (20 if args.quick else 100)
    os.makedirs(args.out, exist_ok=True)
    if args.report_only:
        with open(args.report_only) as f:
            res = json.load(f)
    else:
        if os.geteuid() != 0 or not shutil.which("iptables"):
            sys.exit("bench/loss.py needs root and iptables (a private netns)")
        res = measure(args)
        with open(os.path.join(args.out, "loss.json"), "w") as f:
            json.dump(res, f, indent=1)
    notes_path = os.path.join(args.out, "loss-notes.md")
    notes = open(notes_path).read() if os.path.exists(notes_path) else None
    report(res, args.out, plot(res, args.out), notes)
    log(f"report: {os.path.join(args.out, 'loss.md')}")
    for what, tgt, val, t, old in targets(res):
        log(f"  {what:55} {tgt:12} {fmt(val):>8}  {verdict(val, t)}  (before {fmt(old)})")


if __name__ == "__main__":
    main()
