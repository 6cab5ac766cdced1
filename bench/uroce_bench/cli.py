# SPDX-License-Identifier: MIT
"""uroce benchmark driver (issue 6).

    bench/run [--quick] [--build DIR] [--out DIR] [--paths loopback,veth]
              [--no-profile] [--no-setup]

Runs, in one invocation, unmodified perftest (and qperf, when our
librdmacm is built) over uroce next to the baselines on the same path:
iperf3 TCP, a UDP ping-pong (spinning and blocking), a UDP GSO/GRO stream
(the kernel's UDP ceiling) and memcpy.  Each measurement of uroce is run
back to back with its baselines (for each size: baselines, then uroce; for
each path in turn), so drift of the machine hits both alike.  CPU time
(user + system, of both processes, from wait4) is recorded for every
bandwidth run, and the memory and CPU of idle QPs are read from /proc.
With loopback, the single-pair figures are also taken on one address
shared by server, client and two idle processes, next to dedicated ones.

Writes DIR/report.md, DIR/results.json and PNG plots (default DIR:
bench/report).  Paths: loopback (each process on its own 127.0.0.x), and
veth: two network namespaces joined by a veth pair on 10.213.0.0/24 (root
only; skipped cleanly when namespaces cannot be made).

A benchmark is not a test: nothing here asserts a timing; the report
compares the measured ratios with the targets of issue 6.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys

from .common import ROOT, fmt, log
from .report import plots, report
from .runners import Bench
from .targets import targets

def ensure_built(args):
    need = ["ib_write_bw", "iperf3", "cmake", "ss", "ip"]
    missing = [c for c in need if not shutil.which(c)]
    try:
        import matplotlib  # noqa: F401  # pylint: disable=unused-import
    except ImportError:
        missing.append("python3-matplotlib")
    if missing and not args.no_setup:
        log(f"missing {', '.join(missing)}: running scripts/setup --no-build")
        subprocess.run([os.path.join(ROOT, "scripts", "setup"), "--no-build"], check=True)
    build = os.path.abspath(args.build)
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        subprocess.run(["cmake", "-S", ROOT, "-B", build], check=True,
                       stdout=subprocess.DEVNULL)
    else:       # pick up bench/CMakeLists.txt in an older build tree
        subprocess.run(["cmake", build], check=True, stdout=subprocess.DEVNULL)
    jobs = os.environ.get("UROCE_JOBS", "2")
    log(f"building ibverbs, rdmacm and the baseline programs in {build}")
    subprocess.run(["cmake", "--build", build, "-j", jobs, "--target", "ibverbs", "bench_tools"],
                   check=True, stdout=subprocess.DEVNULL)
    r = subprocess.run(["cmake", "--build", build, "-j", jobs, "--target", "rdmacm"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode:
        log("librdmacm did not build: qperf will be n/a")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer sizes and shorter runs (~2 min)")
    ap.add_argument("--build", default=os.environ.get("UROCE_BUILD_DIR",
                                                     os.path.join(ROOT, "build")),
                    help="build directory (default: $UROCE_BUILD_DIR or build)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "report"),
                    help="report directory (default: bench/report)")
    ap.add_argument("--paths", default="loopback,veth", help="loopback,veth (default both)")
    ap.add_argument("--no-profile", action="store_true", help="skip the callgrind profile")
    ap.add_argument("--no-setup", action="store_true",
                    help="do not install missing packages or build")
    ap.add_argument("--report-only", metavar="RESULTS_JSON",
                    help="rewrite report.md and the plots from a results.json")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    analysis = None
    apath = os.path.join(args.out, "analysis.md")   # hand-written notes on this run
    if os.path.exists(apath):
        with open(apath) as f:
            analysis = f.read()
    if args.report_only:
        with open(args.report_only) as f:
            res = json.load(f)
    else:
        if not args.no_setup:
            ensure_built(args)
        shutil.rmtree(os.path.join(args.out, "logs"), ignore_errors=True)
        b = Bench(args)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: (b.cleanup(), sys.exit(130)))
        try:
            b.run()
        finally:
            b.cleanup()
        res = b.res
        old_logs = os.path.join(args.out, "logs")
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(res, f, indent=1, default=str)
        log(f"run logs kept in {b.work}")
        if os.path.isdir(old_logs):
            log(f"logs of failed runs in {old_logs}")
    pngs = plots(res, args.out)
    report(res, args.out, pngs, analysis)
    log(f"report: {os.path.join(args.out, 'report.md')}")
    for p, what, tgt, val, verdict, detail in targets(res):
        log(f"  {p:8} {what:50} {tgt:8} {fmt(val, 3):>7}  {verdict}")
