#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The soak (issue 23): everything at once, for a long time, every byte checked.

    bench/run --soak [MINUTES] [--build DIR] [--out DIR] [--tag T]
                     [--kill-every S] [--sample-every S]

Two network namespaces joined by a veth pair, three addresses on each end:
one path with faults (iptables statistic DROP, iptables TEE duplicates,
nfq_impair reordering, as tests/fault does), one without, and one for
cmtime, whose server is SIGKILLed after every run (docs/shared.md,
"Limits": a member killed can take UD and UC datagrams of others with
it, which the clean path's ping-pongs would not survive).  Workers,
each restarted as soon as it ends until the time is up:

  rc-udp      uroce_traffic, RC WRITE/READ/SEND(+imm) across the lossy path,
              one pair for the whole soak (its RSS, fds, CPU are sampled)
  rc-local    the same over the same-host path, one pair for the whole soak
  shared-N    three more long uroce_traffic pairs on the lossy addresses,
              which all the *-udp programs share: every --kill-every
              seconds one member (server and client in turn) is killed
              with SIGKILL and the pair replaced; its partner's error is
              the one expected, nobody else may notice
  atomics     uroce_traffic CAS and fetch-add chains across the lossy path
  uc-udp, ud-udp        ibv_uc_pingpong / ibv_ud_pingpong -c across the
                        clean path (no loss: UC and UD do not recover)
  uc-local, ud-local    the same over the same-host path
  rping-udp   rping -V connect, ping, disconnect across the lossy path
  rping-local rping -V over the same-host path
  cmtime      cmtime, 100 rdma_cm connections up and down, its own
              addresses (no faults)

Every run's exit status and output are judged (uroce_traffic's OK line
with errors=0, no "data mismatch" from rping, no "invalid data" from the
pingpongs).  Every --sample-every seconds: RSS, fds, threads and CPU of
the long-lived processes, the processes, fds and /dev/shm segments of
the whole soak, the uroce counters of every process in the namespaces
(`uroce --json stats`), the faults injected and the bytes verified.
Writes OUT/soak.md, soak.json and soak.png; exits 1 on a lost byte, an
unexpected error, or growth of RSS or fds of the long-lived processes.
"""

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOSS, DUP, REORDER = 0.002, 0.002, 0.01
COUNTERS = ["retransmits", "timeouts", "duplicates", "out_of_seq",
            "tx_nak_seq", "rx_rnr_nak", "tlp_probes", "drop_unknown_qp",
            "drop_bad_state", "local_full_drops", "share_fwd_in",
            "share_fwd_out", "share_fwd_lost", "drop_no_owner"]
# RSS may move by this much after the warm-up (malloc arenas, page cache
# of the MRs' first touch); descriptors by this many: connections to
# peers come and go (a same-host ring is two: its socket and its
# doorbell), and the 30-minute run's busiest process moved between 22 and
# 24 throughout.  A leak per run (hundreds of runs a minute) is far more.
RSS_SLACK_KIB = 2048
FD_SLACK = 2


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


class Net:
    """Namespaces A and B, the veth, three address pairs, the faults."""

    def __init__(self, tag, build, work):
        self.ns = {"A": f"uroce-soak{tag}-a", "B": f"uroce-soak{tag}-b"}
        n = 82 if tag else 81
        self.lossy = {"A": f"10.{n}.0.1", "B": f"10.{n}.0.2"}
        self.clean = {"A": f"10.{n}.1.1", "B": f"10.{n}.1.2"}
        self.cm = {"A": f"10.{n}.2.1", "B": f"10.{n}.2.2"}
        self.build, self.work = build, work
        self.nfq = {}

    def ip(self, *a, check=True):
        return sh("ip", *a, check=check)

    def ex(self, side, *a, check=True):
        return sh("ip", "netns", "exec", self.ns[side], *a, check=check)

    def delete(self):
        for ns in self.ns.values():
            if not os.path.exists(f"/run/netns/{ns}"):
                continue
            for p in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(p), signal.SIGKILL)
                except OSError:
                    pass
            self.ip("netns", "del", ns, check=False)

    def up(self):
        self.delete()
        for ns in self.ns.values():
            self.ip("netns", "add", ns)
        self.ip("link", "add", "vA", "netns", self.ns["A"], "type", "veth",
                "peer", "name", "vB", "netns", self.ns["B"])
        for s in "AB":
            n = self.ns[s]
            self.ip("-n", n, "addr", "add", self.lossy[s] + "/24", "dev", "v" + s)
            self.ip("-n", n, "addr", "add", self.clean[s] + "/24", "dev", "v" + s)
            self.ip("-n", n, "addr", "add", self.cm[s] + "/24", "dev", "v" + s)
            self.ip("-n", n, "link", "set", "lo", "up")
            self.ip("-n", n, "link", "set", "v" + s, "up")

    def faults_on(self):
        nfq = os.path.join(self.build, "tests", "fault", "nfq_impair")
        for s in "AB":
            peer = self.lossy["B" if s == "A" else "A"]
            m = ["-p", "udp", "--dport", "4791", "-d", peer]
            self.ex(s, "iptables", "-A", "OUTPUT", *m, "-m", "statistic",
                    "--mode", "random", "--probability", str(LOSS), "-j", "DROP")
            self.ex(s, "iptables", "-t", "mangle", "-A", "POSTROUTING", *m,
                    "-m", "statistic", "--mode", "random", "--probability",
                    str(DUP), "-j", "TEE", "--gateway", peer)
            ready = os.path.join(self.work, f"nfq{s}.ready")
            self.nfq[s] = subprocess.Popen(
                ["ip", "netns", "exec", self.ns[s], nfq, "--queue", "7",
                 "--reorder", str(REORDER), "--seed", str(os.getpid() + ord(s)),
                 "--ready", ready, "--stats", os.path.join(self.work, f"nfq{s}.stats")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            end = time.monotonic() + 10
            while not os.path.exists(ready):
                if time.monotonic() > end or self.nfq[s].poll() is not None:
                    raise RuntimeError("nfq_impair did not start")
                time.sleep(0.05)
            self.ex(s, "iptables", "-A", "OUTPUT", *m, "-j", "NFQUEUE",
                    "--queue-num", "7")

    def fault_counts(self):
        """packets dropped and duplicated by the rules so far"""
        out = {"dropped": 0, "duplicated": 0}
        for s in "AB":
            for table, target, key in (("filter", "DROP", "dropped"),
                                       ("mangle", "TEE", "duplicated")):
                r = self.ex(s, "iptables", "-t", table, "-L", "-v", "-n", "-x",
                            check=False).stdout
                for line in r.splitlines():
                    f = line.split()
                    if len(f) > 2 and f[2] == target and "dpt:4791" in line:
                        out[key] += int(f[0])
        return out

    def kernel_drops(self):
        """the kernel's drops of datagrams in each namespace so far (UDP
        receive-buffer, no socket, checksum; the veth's): a UC or UD
        datagram lost there is lost for good, and the process never
        learns of it (RC retransmits it)"""
        out = {}
        for s in "AB":
            n = out[s] = {}
            rows = [l.split() for l in self.ex(s, "cat", "/proc/net/snmp", check=False)
                    .stdout.splitlines() if l.startswith(("Udp:", "Ip:"))]
            for i in range(0, len(rows) - 1, 2):
                d = dict(zip(rows[i][1:], rows[i + 1][1:]))
                for k in ("RcvbufErrors", "NoPorts", "InCsumErrors", "InDiscards"):
                    if int(d.get(k, 0)):
                        n[k] = int(d[k])
            ks = ("rx_dropped", "tx_dropped")
            v = self.ex(s, "cat", *(f"/sys/class/net/v{s}/statistics/{k}" for k in ks),
                        check=False).stdout.split()
            for k, x in zip(ks, v):
                if int(x):
                    n["veth_" + k] = int(x)
        return out

    def faults_off(self):
        for s, p in self.nfq.items():
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        reordered = 0
        for s in "AB":
            try:
                with open(os.path.join(self.work, f"nfq{s}.stats")) as f:
                    m = re.search(r"reordered=(\d+)", f.read())
                reordered += int(m.group(1)) if m else 0
            except OSError:
                pass
        return reordered


class Run:
    """One program of a worker, started in a namespace, output to a file."""

    def __init__(self, soak, side, addr, argv, tag):
        self.log = soak.logfile(tag)
        env = dict(os.environ, LD_LIBRARY_PATH=soak.lib, UROCE_ADDR=addr,
                   UROCE_STATS="1")
        for k in ("UROCE_FAULT", "UROCE_PCAP", "UROCE_LOCAL"):
            env.pop(k, None)
        self.f = open(self.log, "w")
        self.p = subprocess.Popen(["ip", "netns", "exec", soak.net.ns[side]] + argv,
                                  env=env, stdout=self.f, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, cwd=soak.work,
                                  preexec_fn=core_dumps)
        self.pid = self.p.pid
        self.soak = soak
        soak.runs.append(self)
        self.killed = self.sigkilled = False

    def wait(self, timeout):
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop(diag=True)
            return None
        finally:
            self.f.close()

    def stop(self, diag=False):
        """kill it; with diag, its QPs and counters go to its log first"""
        if diag and self.p.poll() is None:
            for cmd in ("qps", "stats"):
                r = sh(self.soak.tool, cmd, str(self.pid), check=False)
                self.f.write(f"---- soak: timed out; uroce {cmd} {self.pid}:\n"
                             f"{r.stdout}{r.stderr}")
            # where each thread of the hung program waits (the program
            # is the child of `ip netns exec`, which execs it: same pid)
            if shutil.which("gdb"):
                r = sh("timeout", "60", "gdb", "-p", str(self.pid), "-batch",
                       "-ex", "thread apply all bt", check=False)
                self.f.write(f"---- soak: timed out; gdb backtraces {self.pid}:\n"
                             f"{r.stdout}")
            self.f.flush()
        self.sigkilled = True
        self.p.kill()
        self.p.wait()

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()


class Worker(threading.Thread):
    """Runs its program pair again and again until the soak ends."""

    def __init__(self, soak, name, kind, path, long=False):
        super().__init__(daemon=True)
        self.soak, self.name, self.kind, self.path, self.long = soak, name, kind, path, long
        self.runs = self.ok = self.expected = 0
        self.errors = []
        self.bytes_verified = 0
        self.live_bytes = 0             # of the long run in progress
        self.cur = ()                   # (server Run, client Run)
        self.lock = threading.Lock()
        self.port_base = soak.next_ports(900)
        self.port = 0

    def addrs(self):
        net = self.soak.net
        if self.path in ("lossy", "clean", "cm"):
            pair = getattr(net, self.path)
            return ("A", pair["A"]), ("B", pair["B"]), pair["A"]
        return ("A", net.clean["A"]), ("A", net.lossy["A"]), net.clean["A"]

    def argv(self, port, left):
        t = self.soak.traffic
        if self.kind == "traffic":
            dur = max(int(left), 1)
            return ([t, "-p", "0", "--port-file", self.portfile],
                    [t, "-s", None, "-p", None, "-q", "4", "-o", "data",
                     "-S", "0-256K" if self.path == "lossy" else "0-1M",
                     "-r", str(self.runs + 1), "-t", "60", "--duration", str(dur)])
        if self.kind == "atomics":
            return ([t, "-p", "0", "--port-file", self.portfile],
                    [t, "-s", None, "-p", None, "-q", "4", "-o", "atomic",
                     "-A", "256", "-C", "64", "-r", str(self.runs + 1), "-t", "60"])
        if self.kind in ("uc", "ud"):
            prog = f"ibv_{self.kind}_pingpong"
            size = "4096" if self.kind == "uc" else "1024"
            a = [prog, "-g", "0", "-e", "-c", "-s", size, "-n", "500", "-p", str(port)]
            return a, a + [None]
        if self.kind == "rping":
            return (["rping", "-s", "-V", "-S", "4096", "-C", "200", "-a", None,
                     "-p", str(port)],
                    ["rping", "-c", "-V", "-S", "4096", "-C", "200", "-a", None,
                     "-p", str(port)])
        if self.kind == "cmtime":
            return (["cmtime", "-b", None, "-c", "100", "-p", str(port)],
                    ["cmtime", "-s", None, "-c", "100", "-p", str(port)])
        raise ValueError(self.kind)

    def ready(self, srv, port, saddr):
        """bounded wait until the server listens; False if it died"""
        ns = self.soak.net.ns["A"]
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if srv.p.poll() is not None:
                return False
            if self.kind in ("traffic", "atomics"):
                if os.path.exists(self.portfile) and os.path.getsize(self.portfile):
                    return True
            elif self.kind in ("uc", "ud"):
                if f":{port}" in sh("ip", "netns", "exec", ns, "ss", "-ltnH",
                                    f"sport = :{port}", check=False).stdout:
                    return True
            else:
                if sh("grep", "-qx", f"listen {port}", self.cmfile, check=False).returncode == 0:
                    return True
            time.sleep(0.05)
        return False

    def once(self):
        soak = self.soak
        (sside, saddr), (cside, caddr), target = self.addrs()
        self.port += 1
        # below the ephemeral ports (32768..), where OOB sockets come from
        port = 20000 + self.port_base + self.port % 900
        self.portfile = os.path.join(soak.work, f"{self.name}.{self.runs}.port")
        self.cmfile = os.path.join(soak.work, f"{self.name}.{self.runs}.cm")
        left = soak.deadline - time.monotonic() - 5
        sa, ca = self.argv(port, left)
        sa = [target if x is None else x for x in sa]
        srv = Run(soak, sside, saddr, ["env", f"UROCE_CM_LISTEN_FILE={self.cmfile}"] + sa,
                  f"{self.name}-{self.runs}-srv")
        self.runs += 1
        if not self.ready(srv, port, target):
            srv.wait(5)
            self.fail(srv, None, "server did not start")
            return
        if self.kind in ("traffic", "atomics"):
            with open(self.portfile) as f:
                p = f.read().strip()
            ca = [t for t in ca]
            ca[ca.index("-s") + 1] = target
            ca[ca.index("-p") + 1] = p
        else:
            ca = [target if x is None else x for x in ca]
        cli = Run(soak, cside, caddr, ca, f"{self.name}-{self.runs - 1}-cli")
        with self.lock:
            self.cur = (srv, cli)
        budget = left + 120 if self.long else 60
        crc = cli.wait(budget)
        if self.kind == "cmtime":
            # cmtime's server never ends by itself: it is stopped once the
            # client is done, and must still be there then
            src = srv.p.poll()
            if src is None:
                srv.sigkilled = True
                srv.p.kill()
                srv.p.wait()
                srv.f.close()
                src = 0
        else:
            src = srv.wait(30 if crc == 0 else 10)
        with self.lock:
            self.cur = ()
            self.live_bytes = 0
        if srv.killed or cli.killed:
            self.expected += 1
            return
        self.judge(srv, cli, src, crc)

    def judge(self, srv, cli, src, crc):
        st, ct = srv.text(), cli.text()
        bad = []
        if crc != 0:
            bad.append(f"client exit {crc}")
        if src != 0:
            bad.append(f"server exit {src}")
        if self.kind in ("traffic", "atomics"):
            for who, t in (("server", st), ("client", ct)):
                m = re.search(r"^uroce_traffic: OK bytes_moved=\d+ bytes_verified=(\d+) "
                              r"completions=\d+ errors=0$", t, re.M)
                if not m:
                    bad.append(f"no OK line from the {who}")
                else:
                    self.bytes_verified += int(m.group(1))
        elif self.kind in ("uc", "ud"):
            if "invalid data" in st + ct:
                bad.append("invalid data")
            m = re.search(r"(\d+) bytes in [\d.]+ seconds", ct)
            if m and not bad:
                self.bytes_verified += int(m.group(1))
        elif self.kind == "rping":
            if "mismatch" in st + ct:
                bad.append("data mismatch")
            if not bad:
                self.bytes_verified += 2 * 200 * 4096
        if bad:
            self.fail(srv, cli, "; ".join(bad))
        else:
            self.ok += 1

    def fail(self, srv, cli, why):
        logs = [r.log for r in (srv, cli) if r]
        self.errors.append({"t": round(time.monotonic() - self.soak.t0, 1),
                            "why": why, "logs": logs})
        log(f"{self.name}: UNEXPECTED: {why} ({' '.join(logs)}); kernel UDP "
            f"and veth drops so far: {self.soak.net.kernel_drops()}")
        time.sleep(1)

    def progress(self):
        """bytes verified so far, the long run in progress included"""
        with self.lock:
            cur = self.cur
        if self.long and cur:
            try:
                t = cur[1].text()
            except OSError:
                t = ""
            # what the client moved is what the two sides verify (data ops)
            m = re.findall(r"^uroce_traffic: pass \d+ bytes_moved=(\d+)", t, re.M)
            if m:
                self.live_bytes = int(m[-1])
        return self.bytes_verified + self.live_bytes

    def kill_one(self, which):
        """SIGKILL the server (0) or client (1) of the pair in progress"""
        with self.lock:
            cur = self.cur
            if not cur:
                return None
            victim, partner = cur[which], cur[1 - which]
            victim.killed = partner.killed = True
        victim.sigkilled = True
        try:
            os.kill(victim.pid, signal.SIGKILL)
        except OSError:
            return None
        return victim.pid

    def run(self):
        while time.monotonic() < self.soak.deadline - (20 if self.long else 10):
            try:
                self.once()
            except Exception as e:  # noqa: BLE001 - a worker must not die silently
                self.errors.append({"t": round(time.monotonic() - self.soak.t0, 1),
                                    "why": f"harness: {e!r}", "logs": []})
                time.sleep(1)


def core_dumps():
    """a program that crashes leaves its core in the work directory"""
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2)


def proc_stat(pid):
    """(rss KiB, fds, threads, cpu seconds, pidfds) of pid, or None"""
    try:
        with open(f"/proc/{pid}/status") as f:
            st = f.read()
        rss = int(re.search(r"VmRSS:\s+(\d+)", st).group(1))
        thr = int(re.search(r"Threads:\s+(\d+)", st).group(1))
        fdl = os.listdir(f"/proc/{pid}/fd")
        fds = len(fdl)
        pidfds = 0
        for fd in fdl:
            try:
                pidfds += os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[pidfd]"
            except OSError:
                pass
        with open(f"/proc/{pid}/stat") as f:
            fl = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fl[11]) + int(fl[12])) / os.sysconf("SC_CLK_TCK")
        return rss, fds, thr, cpu, pidfds
    except (OSError, AttributeError, IndexError, ValueError):
        return None


class Soak:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.lib = os.path.join(self.build, "lib")
        self.traffic = os.path.join(self.build, "tests", "integration", "uroce_traffic")
        self.tool = os.path.join(self.build, "bin", "uroce")
        self.work = tempfile.mkdtemp(prefix="uroce-soak.")
        self.net = Net(args.tag, self.build, self.work)
        self.n = 0
        self.port_base = -900
        self.samples = []
        self.kills = []
        self.runs = []

    def next_ports(self, n):
        self.port_base += n
        return self.port_base

    def logfile(self, tag):
        self.n += 1
        return os.path.join(self.work, f"{self.n:05d}-{tag}.log")

    def shm_files(self):
        return sorted(f for f in os.listdir("/dev/shm") if f.startswith("uroce"))

    def ns_pids(self):
        out = []
        for ns in self.net.ns.values():
            out += [int(p) for p in sh("ip", "netns", "pids", ns, check=False).stdout.split()]
        return out

    def counters(self, pids):
        r = sh(self.tool, "--json", "stats", check=False)
        tot = dict.fromkeys(COUNTERS, 0)
        try:
            for d in json.loads(r.stdout or "[]"):
                if d.get("pid") in pids:
                    for k in COUNTERS:
                        tot[k] += d["counters"].get(k, 0)
        except ValueError:
            pass
        return tot

    def sample(self, prev_cpu):
        t = time.monotonic() - self.t0
        s = {"t": round(t, 1), "procs": {}}
        for w in self.workers:
            if not w.long or w.name.startswith("shared"):
                continue
            with w.lock:
                cur = w.cur
            for role, r in zip(("srv", "cli"), cur):
                ps = proc_stat(r.pid)
                if not ps:
                    continue
                key = f"{w.name}.{role}"
                rss, fds, thr, cpu, pidfds = ps
                pc = prev_cpu.get(key)
                pct = None
                if pc and pc[0] == r.pid and t > pc[2]:
                    pct = 100 * (cpu - pc[1]) / (t - pc[2])
                prev_cpu[key] = (r.pid, cpu, t)
                # a shared address's member watches each other member
                # through a pidfd: those come and go with the members
                s["procs"][key] = {"pid": r.pid, "rss_kib": rss, "fds": fds,
                                   "own_fds": fds - pidfds, "threads": thr,
                                   "cpu_pct": pct}
        pids = self.ns_pids()
        tot_rss = tot_fds = 0
        for p in pids:
            ps = proc_stat(p)
            if ps:
                tot_rss += ps[0]
                tot_fds += ps[1]
        s.update(nprocs=len(pids), rss_total_kib=tot_rss, fds_total=tot_fds,
                 shm_files=len(self.shm_files()),
                 bytes_verified=sum(w.progress() for w in self.workers),
                 errors=sum(len(w.errors) for w in self.workers),
                 kills=len(self.kills),
                 runs=sum(w.runs for w in self.workers),
                 counters=self.counters(set(pids)),
                 faults=self.net.fault_counts(),
                 kernel_drops=self.net.kernel_drops())
        self.samples.append(s)
        return s

    def go(self):
        a = self.args
        secs = a.minutes * 60
        for p in (self.traffic, self.tool, os.path.join(self.lib, "libibverbs.so.1")):
            if not os.path.exists(p):
                sys.exit(f"soak: {p} not found (build first: cmake --build {a.build})")
        self.shm0 = self.shm_files()
        self.net.up()
        try:
            self.net.faults_on()
            self.t0 = time.monotonic()
            self.deadline = self.t0 + secs
            W = Worker
            self.workers = [
                W(self, "rc-udp", "traffic", "lossy", long=True),
                W(self, "rc-local", "traffic", "local", long=True),
                W(self, "shared-1", "traffic", "lossy", long=True),
                W(self, "shared-2", "traffic", "lossy", long=True),
                W(self, "shared-3", "traffic", "lossy", long=True),
                W(self, "atomics", "atomics", "lossy"),
                W(self, "uc-udp", "uc", "clean"),
                W(self, "ud-udp", "ud", "clean"),
                W(self, "uc-local", "uc", "local"),
                W(self, "ud-local", "ud", "local"),
                W(self, "rping-udp", "rping", "lossy"),
                W(self, "rping-local", "rping", "local"),
                W(self, "cmtime", "cmtime", "cm"),
            ]
            log(f"{secs} s, {len(self.workers)} workers, logs in {self.work}")
            for w in self.workers:
                w.start()
            prev_cpu = {}
            next_sample = self.t0 + min(5, a.sample_every)
            next_kill = self.t0 + a.kill_every
            victim = 0
            while time.monotonic() < self.deadline:
                now = time.monotonic()
                if now >= next_kill and now < self.deadline - 20:
                    w = self.workers[2 + victim % 3]
                    which = (victim // 3) % 2
                    pid = w.kill_one(which)
                    if pid:
                        self.kills.append({"t": round(now - self.t0, 1), "worker": w.name,
                                           "who": ("server", "client")[which], "pid": pid})
                        log(f"SIGKILL {w.name} {('server', 'client')[which]} pid {pid}")
                    victim += 1
                    next_kill += a.kill_every
                if now >= next_sample:
                    s = self.sample(prev_cpu)
                    log(f"t={s['t']:.0f}s runs={s['runs']} verified={s['bytes_verified'] >> 20} MiB "
                        f"errors={s['errors']} kills={s['kills']} procs={s['nprocs']} "
                        f"retransmits={s['counters']['retransmits']} "
                        f"kernel_drops={s['kernel_drops']}")
                    next_sample += a.sample_every
                time.sleep(0.2)
            for w in self.workers:
                w.join(200)
            self.sample(prev_cpu)
            self.reordered = self.net.faults_off()
            self.faults = self.net.fault_counts()
        finally:
            self.net.delete()
        # the registry of a group whose last member we SIGKILLed is
        # collected by the next group's start or by `uroce devices`
        sh(self.tool, "devices", check=False)
        self.shm1 = self.shm_files()
        return self.verdict()

    def growth(self):
        """per long-lived process: RSS and fds after warm-up vs at the end"""
        out = {}
        warm = max(60.0, 0.2 * self.args.minutes * 60)
        for key in sorted({k for s in self.samples for k in s["procs"]}):
            ser = [(s["t"], s["procs"][key]) for s in self.samples if key in s["procs"]]
            pid = ser[-1][1]["pid"]
            ser = [(t, p) for t, p in ser if p["pid"] == pid]
            base = next(((t, p) for t, p in ser if t >= warm), ser[len(ser) // 2])
            last = ser[-1]
            # descriptors come and go (a same-host ring to a peer is 3, open
            # while the peer runs): growth is the last quarter's floor above
            # the earlier high.  A leak per run raises the floor (hundreds
            # of runs); a ring open at one sample does not (one such spike
            # of 3 failed a 3-minute soak in CI)
            mid = [p["own_fds"] for t, p in ser if base[0] <= t <= ser[-1][0] / 2 + base[0] / 2]
            tail = [p["own_fds"] for t, p in ser[-max(1, len(ser) // 4):]]
            out[key] = {"pid": pid, "t_base": base[0], "t_last": last[0],
                        "rss_base_kib": base[1]["rss_kib"], "rss_last_kib": last[1]["rss_kib"],
                        "rss_max_kib": max(p["rss_kib"] for _, p in ser),
                        "fds_base": base[1]["own_fds"], "fds_last": last[1]["own_fds"],
                        "fds_max": max(p["own_fds"] for _, p in ser),
                        "fds_high_early": max(mid or [base[1]["own_fds"]]),
                        "fds_high_late": max(tail),
                        "fds_low_late": min(tail),
                        "threads_max": max(p["threads"] for _, p in ser)}
        return out

    def verdict(self):
        g = self.growth()
        problems = []
        for w in self.workers:
            for e in w.errors:
                problems.append(f"{w.name} at {e['t']} s: {e['why']}")
        for k, v in g.items():
            if v["rss_last_kib"] - v["rss_base_kib"] > RSS_SLACK_KIB:
                problems.append(f"{k}: RSS grew {v['rss_base_kib']} -> {v['rss_last_kib']} KiB")
            if v["fds_low_late"] - v["fds_high_early"] > FD_SLACK:
                problems.append(f"{k}: fds grew: at most {v['fds_high_early']} after the "
                                f"warm-up, at least {v['fds_low_late']} all through the "
                                "last quarter")
        for key in ("rc-udp.cli", "rc-local.cli"):
            if key not in g:
                problems.append(f"{key}: never sampled (the long run did not last)")
        # a process we SIGKILLed leaves its stats segment to the next
        # process's sweep; a pid may be someone else's by now
        mine = {f"uroce.{r.pid}" for r in self.runs if not r.sigkilled
                and not os.path.exists(f"/proc/{r.pid}")}
        addrs = tuple("." + a for a in list(self.net.lossy.values()) + list(self.net.clean.values()))
        left = sorted(f for f in set(self.shm1) - set(self.shm0)
                      if f in mine or f.endswith(addrs))
        if left:
            problems.append(f"/dev/shm segments left behind: {' '.join(left)}")
        if len(self.kills) < max(1, int((self.args.minutes * 60 - 20) / self.args.kill_every) - 1):
            problems.append(f"only {len(self.kills)} kills")
        for w in self.workers:
            if w.ok == 0 and not (w.long and w.name.startswith("shared")):
                problems.append(f"{w.name}: no run finished")
        self.result = {
            "minutes": self.args.minutes, "kill_every_s": self.args.kill_every,
            "faults": {"loss": LOSS, "dup": DUP, "reorder": REORDER,
                       "dropped": self.faults["dropped"],
                       "duplicated": self.faults["duplicated"],
                       "reordered": self.reordered},
            "workers": [{"name": w.name, "kind": w.kind, "path": w.path, "runs": w.runs,
                         "ok": w.ok, "killed": w.expected, "errors": w.errors,
                         "bytes_verified": w.bytes_verified} for w in self.workers],
            "kills": self.kills, "growth": g, "samples": self.samples,
            "shm_before": len(self.shm0), "shm_after": len(self.shm1),
            "problems": problems, "pass": not problems,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load": os.getloadavg(),
        }
        return self.result


def plot(res, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    S = res["samples"]
    t = [s["t"] / 60 for s in S]
    fig, ax = plt.subplots(2, 2, figsize=(12, 8))
    keys = sorted({k for s in S for k in s["procs"]})
    for k in keys:
        pts = [(s["t"] / 60, s["procs"][k]) for s in S if k in s["procs"]]
        ax[0][0].plot([x for x, _ in pts], [p["rss_kib"] / 1024 for _, p in pts], label=k)
        ax[0][1].plot([x for x, _ in pts], [p["own_fds"] for _, p in pts], label=k)
        c = [(x, p["cpu_pct"]) for x, p in pts if p["cpu_pct"] is not None]
        ax[1][0].plot([x for x, _ in c], [y for _, y in c], label=k)
    ax[0][0].set_ylabel("RSS, MiB")
    ax[0][0].set_title("long-lived processes: RSS")
    ax[0][1].set_ylabel("open fds (less the co-members' pidfds)")
    ax[0][1].set_title("long-lived processes: descriptors")
    ax[1][0].set_ylabel("CPU, % of one core")
    ax[1][0].set_title("long-lived processes: CPU")
    a = ax[1][1]
    a.plot(t, [s["bytes_verified"] / 2**30 for s in S], "k-", label="GiB verified")
    a.set_ylabel("GiB verified (cumulative)")
    b = a.twinx()
    for k, st in (("retransmits", "r--"), ("duplicates", "b--"), ("out_of_seq", "g--")):
        b.plot(t, [s["counters"][k] for s in S], st, label=k + " (live procs)")
    b.plot(t, [s["faults"]["dropped"] for s in S], "m:", label="packets dropped (iptables)")
    b.set_ylabel("count")
    a.set_title("traffic and recovery")
    a.legend(loc="upper left", fontsize=7)
    b.legend(loc="lower right", fontsize=7)
    for x in ax.flat:
        x.set_xlabel("minutes")
        x.grid(alpha=0.3)
    for x in (ax[0][0], ax[0][1], ax[1][0]):
        x.legend(fontsize=7)
        for k in res["kills"]:
            x.axvline(k["t"] / 60, color="0.85", lw=0.8, zorder=0)
    fig.suptitle(f"uroce soak, {res['minutes']} min: {'PASS' if res['pass'] else 'FAIL'} "
                 "(grey lines: a shared-address member SIGKILLed)")
    fig.tight_layout()
    fig.savefig(png, dpi=90)


def report(res, md):
    L = [f"# Soak: {res['minutes']} minutes ({res['date']})", "",
         "`bench/run --soak " + str(res["minutes"]) + "` (bench/soak.py; docs/scale.md, "
         "\"The soak\").  Result: **" + ("PASS" if res["pass"] else "FAIL") + "**.", ""]
    if res["problems"]:
        L += ["Problems:", ""] + [f"- {p}" for p in res["problems"]] + [""]
    f = res["faults"]
    tot = sum(w["bytes_verified"] for w in res["workers"])
    L += [f"Faults on the lossy path (both directions): {f['loss']:g} dropped, "
          f"{f['dup']:g} duplicated, {f['reorder']:g} reordered; injected: "
          f"{f['dropped']} dropped, {f['duplicated']} duplicated, {f['reordered']} reordered.  "
          f"{len(res['kills'])} members of the shared addresses SIGKILLed (one every "
          f"{res['kill_every_s']} s) and replaced.  Bytes verified: {tot} "
          f"({tot / 2**30:.1f} GiB); bytes lost: 0 unless a problem above says so.  "
          f"Load average at the end: {res['load'][0]:.1f}.", "",
          "| worker | program | path | runs | OK | killed (expected) | unexpected errors | bytes verified |",
          "|---|---|---|---|---|---|---|---|"]
    for w in res["workers"]:
        L.append(f"| {w['name']} | {w['kind']} | {w['path']} | {w['runs']} | {w['ok']} | "
                 f"{w['killed']} | {len(w['errors'])} | {w['bytes_verified']} |")
    L += ["", "Long-lived processes (RSS and fds after the warm-up and at the end; fds "
          "less the pidfds a member of a shared address holds for each other member):", "",
          "| process | RSS after warm-up, KiB | RSS at end | RSS max | fds after warm-up | fds at end | "
          "fds high, warm-up to half-time | fds low and high, last quarter | threads |",
          "|---|---|---|---|---|---|---|---|---|"]
    for k, v in res["growth"].items():
        L.append(f"| {k} | {v['rss_base_kib']} (t={v['t_base']:.0f} s) | {v['rss_last_kib']} | "
                 f"{v['rss_max_kib']} | {v['fds_base']} | {v['fds_last']} | {v['fds_high_early']} | "
                 f"{v['fds_low_late']}-{v['fds_high_late']} | {v['threads_max']} |")
    L += ["", f"`/dev/shm/uroce*` segments before: {res['shm_before']}, after: {res['shm_after']}.",
          "", "Over time (every process in the two namespaces; counters are those of the "
          "processes alive at the sample):", "",
          "| t, s | runs | procs | RSS total, MiB | fds total | shm | GiB verified | errors | kills | "
          "retransmits | duplicates | out_of_seq | timeouts | dropped (iptables) | "
          "kernel drops A/B (UDP, IP, veth) |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    S = res["samples"]
    step = max(1, len(S) // 30)
    for s in S[::step] + ([S[-1]] if (len(S) - 1) % step else []):
        c = s["counters"]
        L.append(f"| {s['t']:.0f} | {s['runs']} | {s['nprocs']} | {s['rss_total_kib'] / 1024:.0f} | "
                 f"{s['fds_total']} | {s['shm_files']} | {s['bytes_verified'] / 2**30:.2f} | "
                 f"{s['errors']} | {s['kills']} | {c['retransmits']} | {c['duplicates']} | "
                 f"{c['out_of_seq']} | {c['timeouts']} | {s['faults']['dropped']} | "
                 f"{sum(s['kernel_drops']['A'].values())}/"
                 f"{sum(s['kernel_drops']['B'].values())} |")
    L += ["", "![soak](soak.png)", ""]
    with open(md, "w") as fh:
        fh.write("\n".join(L))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench/run --soak")
    ap.add_argument("minutes", nargs="?", type=float, default=30)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "report"))
    ap.add_argument("--tag", default="", help="namespace name suffix (runs side by side)")
    ap.add_argument("--kill-every", type=float, default=60)
    ap.add_argument("--sample-every", type=float, default=10)
    ap.add_argument("--keep", action="store_true", help="keep the logs of a passing run")
    a = ap.parse_args(argv)
    if os.geteuid() != 0 or not shutil.which("iptables"):
        print("soak: SKIP: needs root and iptables (two network namespaces)")
        return 77
    soak = Soak(a)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    res = soak.go()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "soak.json"), "w") as f:
        json.dump(res, f, indent=1)
    report(res, os.path.join(a.out, "soak.md"))
    try:
        plot(res, os.path.join(a.out, "soak.png"))
    except ImportError:
        log("matplotlib missing: no plot")
    for p in res["problems"]:
        log("PROBLEM: " + p)
    log(f"{'PASS' if res['pass'] else 'FAIL'}: report in {a.out}/soak.md")
    if res["pass"] and not a.keep:
        shutil.rmtree(soak.work, ignore_errors=True)
    return 0 if res["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
