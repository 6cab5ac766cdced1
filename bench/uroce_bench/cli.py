# SPDX-License-Identifier: MIT
"""uroce benchmark driver (issues 6, 14, 15).

    bench/run [--quick] [--build DIR] [--out DIR] [--paths PATHS] [--cases CASES]
              [--incast-rows ROWS] [--repeats N] [--no-profile] [--no-setup]

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
bench/report).  Paths: local and udp, loopback (each process on its own
127.0.0.x) with uroce's default (the same-host path) and with
UROCE_LOCAL=0 in both processes; veth9000 and veth1500: two network
namespaces joined by a veth pair at that link MTU (IB MTU 4096 and
1024; root only; skipped cleanly when namespaces cannot be made).
"loopback" stands for local,udp and "veth" for veth9000,veth1500.

Cases (--cases, default all): bw, qps, lat (the sweeps by size and by QP
count), repeat (the runs the targets read, again, each path in turn, so
that every target is a median of --repeats interleaved runs), alt (the
user's alternatives on the first veth path: UCX, libfabric, Open MPI
over TCP and over uroce), qperf, events (event-driven: qperf's defaults
against its udp_lat in the same run, perftest -e against the blocking UDP
ping-pong and against polling), idle, profile, shared, rsocket (iperf3
through librspreload over uroce against plain iperf3 TCP, rstream's
64-byte round trip against its TCP mode, --repeats interleaved rounds on
every path), apps (applications against their own TCP transports, in
namespaces of their own whatever --paths says: iSER against iSCSI/TCP to
one tgtd, gloo's ibverbs transport against its TCP one;
bench/uroce_bench/apps.py), incast (a 2 Gbit/s htb bottleneck between
two namespaces of its own: 8 ib_write_bw flows with each UROCE_CC, 8
iperf3 TCP flows, one of each at once, a ping through the queue;
bench/uroce_bench/incast.py; --incast-rows picks some of its rows).

A benchmark is not a test: nothing here asserts a timing; the report
compares the measured ratios with the targets of issues 15, 6, 14, 22 and
26 (targets.py).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys

from .common import ROOT, fmt, log
from .incast import INCAST_MODES
from .report import plots, report
from .runners import Bench
from .targets import targets

CASES = ("bw", "qps", "lat", "repeat", "alt", "qperf", "events", "neighbour", "idle", "profile",
         "shared", "rsocket", "apps", "incast")
PATHS = ("local", "udp", "veth9000", "veth1500")
PATH_ALIASES = {"loopback": ("local", "udp"), "veth": ("veth9000", "veth1500")}


def path_names(ap, text):
    """--paths: the names, aliases expanded, in the order of PATHS."""
    names = set()
    for n in text.split(","):
        if n in PATH_ALIASES:
            names.update(PATH_ALIASES[n])
        elif n in PATHS:
            names.add(n)
        else:
            ap.error(f"unknown path {n}; paths: {','.join(PATHS)} (or loopback, veth)")
    return [p for p in PATHS if p in names]


def ensure_built(args):
    need = ["ib_write_bw", "iperf3", "cmake", "ss", "ip", "ucx_perftest", "fi_pingpong",
            "mpirun"]
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
    subprocess.run(["cmake", "--build", build, "-j", jobs, "--target", "ibverbs", "bench_tools",
                    "uroce"],
                   check=True, stdout=subprocess.DEVNULL)
    r = subprocess.run(["cmake", "--build", build, "-j", jobs, "--target", "rdmacm"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode:
        log("librdmacm did not build: qperf will be n/a")
    r = subprocess.run(["cmake", "--build", build, "-j", jobs, "--target", "mpi_pingpong"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode:
        log("tests/mpi/mpi_pingpong did not build: the Open MPI runs will fail")
    if not os.path.exists(os.path.join(build, "bench", "ce_marker.o")):
        log("bench/ce_marker.o not built (clang, libbpf-dev): the incast case's dcqcn runs "
            "go unmarked")
    r = subprocess.run(["cmake", "--build", build, "-j", jobs, "--target", "gloo_coll"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode:
        log("tests/apps/gloo_coll did not build (libgloo-dev): the gloo runs are skipped")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer sizes and shorter runs (~5 min)")
    ap.add_argument("--build", default=os.environ.get("UROCE_BUILD_DIR",
                                                     os.path.join(ROOT, "build")),
                    help="build directory (default: $UROCE_BUILD_DIR or build)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "report"),
                    help="report directory (default: bench/report)")
    ap.add_argument("--paths", default="local,udp,veth9000,veth1500",
                    help="local,udp,veth9000,veth1500 (default all; loopback = local,udp, "
                    "veth = veth9000,veth1500)")
    ap.add_argument("--cases", default=",".join(CASES),
                    help=f"what to run, of {','.join(CASES)} (default all)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="runs of each measurement a target reads (default 3, --quick 2)")
    ap.add_argument("--incast-rows", default="tcp," + ",".join(INCAST_MODES),
                    help="the incast case's rows: tcp (8 iperf3 flows) and each "
                    f"UROCE_CC of {','.join(INCAST_MODES)} (its incast and its pair with "
                    "TCP); default all")
    ap.add_argument("--no-profile", action="store_true", help="skip the callgrind profile")
    ap.add_argument("--no-setup", action="store_true",
                    help="do not install missing packages or build")
    ap.add_argument("--report-only", metavar="RESULTS_JSON",
                    help="rewrite report.md and the plots from a results.json")
    args = ap.parse_args()
    args.path_names = path_names(ap, args.paths)
    if args.repeats is None:
        args.repeats = 2 if args.quick else 3
    bad = set(args.incast_rows.split(",")) - {"tcp", *INCAST_MODES}
    if bad:
        ap.error(f"unknown incast row(s) {','.join(sorted(bad))}; rows: tcp,"
                 f"{','.join(INCAST_MODES)}")
    bad = set(args.cases.split(",")) - set(CASES)
    if bad:
        ap.error(f"unknown case(s) {','.join(sorted(bad))}; cases: {','.join(CASES)}")
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
    for row in targets(res):
        log(f"  {row.issue:2} {row.path:8} {row.what:55} {row.target:8} "
            f"{fmt(row.value, 3):>7}  {row.verdict}")
