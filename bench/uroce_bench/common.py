# SPDX-License-Identifier: MIT
"""What every part of the benchmark driver uses: paths, sizes, the log,
a child process measured by wait4 (Run), where server and client run
(Path), and the number formatting of the report."""

import os
import signal
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The links we configure, each a private /24: (path name, link MTU, net)
VETHS = (("veth9000", 9000, "10.213.1"), ("veth1500", 1500, "10.213.0"))
VETH_NET = "10.213.0"
KIB, MIB = 1024, 1024 * 1024

# The runs of the shared-address case, each on dedicated addresses and on
# one shared address: (perftest program, size, QPs, result field, unit).
SHARED_RUNS = (
    ("ib_write_bw", 64 * KIB, 1, "gbps", "Gb/s"),
    ("ib_send_lat", 2, 1, "t_typical", "µs typical"),
    ("ib_write_bw", 64 * KIB, 1024, "gbps", "Gb/s"),
)


def shared_key(mode, test, size, qps):
    """Where a run of the shared-address case is kept, in results["runs"]["shared"]."""
    return f"{mode}/{test}/{size}/{qps}"

# ---------------------------------------------------------------- helpers


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def size_name(n):
    if n >= MIB and n % MIB == 0:
        return f"{n // MIB}M"
    if n >= KIB and n % KIB == 0:
        return f"{n // KIB}K"
    return str(n)


class Run:
    """A child process whose CPU time we get from wait4 (not a shell: the
    pid we reap is the program; `ip netns exec` execs into it)."""

    def __init__(self, argv, env=None, logfile=None):
        self.argv = argv
        self.logfile = logfile
        self.out = open(logfile, "w") if logfile else subprocess.DEVNULL
        self.p = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT,
                                  env=env, stdin=subprocess.DEVNULL)
        self.pid = self.p.pid
        self.rc = None
        self.cpu = None          # (utime, stime) seconds
        self.wall = None
        self.t0 = time.monotonic()

    def alive(self):
        if self.rc is not None:
            return False
        pid, status, ru = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            return True
        self._reaped(status, ru)
        return False

    def _reaped(self, status, ru):
        self.rc = os.waitstatus_to_exitcode(status)
        self.p.returncode = self.rc
        self.cpu = (ru.ru_utime, ru.ru_stime)
        self.wall = time.monotonic() - self.t0
        if self.out is not subprocess.DEVNULL:
            self.out.close()

    def wait(self, timeout):
        end = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() > end:
                self.kill()
                return False
            time.sleep(0.01)
        return True

    def kill(self):
        if self.rc is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status, ru = os.wait4(self.pid, 0)
            self._reaped(status, ru)
            self.rc = "killed"

    def text(self):
        if not self.logfile:
            return ""
        with open(self.logfile, errors="replace") as f:
            return f.read()

    def proc_cpu(self):
        """utime+stime so far, from /proc (for a process still running)."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def rss_kb(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return None


def cpu_total(*runs):
    if any(r.cpu is None for r in runs):
        return None
    return sum(u + s for r in runs for (u, s) in [r.cpu])


class Path:
    """Where a server and a client run, and how the client reaches it."""

    def __init__(self, name, server_ns=None, client_ns=None, server_addr="127.0.0.1",
                 uroce_server_addr=None, uroce_client_addr=None, seg=4128, mtu=4096,
                 env=None, link_mtu=None):
        self.name = name
        self.server_ns, self.client_ns = server_ns, client_ns
        self.server_addr = server_addr          # what clients dial (TCP, UDP)
        self.uroce_server_addr = uroce_server_addr
        self.uroce_client_addr = uroce_client_addr
        self.seg = seg                          # UDP payload of one uroce data packet
        self.mtu = mtu                          # uroce's IB MTU on this path
        self.env = dict(env or {})              # set for uroce on both sides
        self.link_mtu = link_mtu                # veth: the link's MTU; None: loopback

    def same_host(self):
        """Both ends in one network namespace: uroce may take its same-host path."""
        return self.server_ns == self.client_ns

    def wrap(self, argv, side):
        ns = self.server_ns if side == "server" else self.client_ns
        return (["ip", "netns", "exec", ns] + argv) if ns else argv

    def tcp_listening(self, port):
        cmd = self.wrap(["ss", "-ltnH", f"sport = :{port}"], "server")
        r = subprocess.run(cmd, capture_output=True, text=True)
        return f":{port}" in r.stdout


def fmt(x, nd=2):
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.{nd}f}" if abs(x) >= 0.01 else f"{x:.2g}"


def get(R, key, field):
    """R[key][field], None where either is absent; a tuple key descends
    through nested results (("shared", "dedicated/ib_send_lat/2/1"))."""
    for k in key if isinstance(key, tuple) else (key,):
        R = R.get(k) if isinstance(R, dict) else None
    return R.get(field) if isinstance(R, dict) else None


def ratio(a, b):
    return a / b if a is not None and b else None


PRIMARY = ("gbps", "t_typical", "half_rtt_median", "lat_median_us", "half_rtt_us", "rtt_us",
           "mb_s", "ms_per_iter")


def median_result(samples):
    """The median of a key's samples: the run whose primary figure (the
    first of PRIMARY it has) is the median (the lower one of an even
    count), with every numeric field the median of that field over the
    runs; "repeats" says how many runs, "spread" their primary figures."""
    ok = [s for s in samples if s]
    if not ok:
        return None
    field = next((f for f in PRIMARY if f in ok[0]), None)
    if field is None or len(ok) == 1:
        out = dict(ok[0])
    else:
        ok = [s for s in ok if s.get(field) is not None]
        ok.sort(key=lambda s: s[field])
        out = dict(ok[(len(ok) - 1) // 2])
        for k, v in out.items():
            vals = [s.get(k) for s in ok]
            if isinstance(v, (int, float)) and not isinstance(v, bool) and \
                    all(isinstance(x, (int, float)) for x in vals):
                out[k] = statistics.median(vals)
    out["repeats"] = len(ok)
    out["failed_repeats"] = len(samples) - len(ok)
    if field:
        out["spread"] = [s[field] for s in ok]
    return out
