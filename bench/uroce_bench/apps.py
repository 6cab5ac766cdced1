# SPDX-License-Identifier: MIT
"""Applications against their own TCP transports (issue 22; case `apps`),
run by bench/apps.sh in namespaces of its own (tests/apps/lib.sh), so
whatever --paths says:

- iSER: tgtd with an iSCSI and an iSER portal on one LUN file on tmpfs,
  libiscsi's iscsi-perf (sequential READ16, 32 in flight) reading it over
  iscsi:// (TCP) and over iser:// under `uroce run`, at 64 KiB, 256 KiB
  and 1 MiB, back to back; on one host (one namespace, 127.0.0.1) and
  across two namespaces joined by veth at MTU 1500 and 9000;
- gloo: tests/apps/gloo_coll -b, 4 MB ring allreduces with 2 and 4
  processes on one host, over gloo's TCP transport and over its ibverbs
  transport on uroce."""

import os
import subprocess

from . import parsers
from .common import KIB, MIB, ROOT, fmt, log, ratio, size_name

APPS_ISER_SIZES = (64 * KIB, 256 * KIB, MIB)
APPS_ISER_PLACES = ("host", "2ns", "2ns-9000")
APPS_GLOO_RANKS = (2, 4)
APPS_GLOO_BYTES = 4 * MIB
NOTES = "apps/notes"


def iser_key(place, size, transport):
    """Where an iscsi-perf figure is kept: apps/iser/host/65536/iser."""
    return f"apps/iser/{place}/{size}/{transport}"


def gloo_key(ranks, transport):
    return f"apps/gloo/{ranks}/{transport}"


class Apps:
    """Mixed into Bench: needs put, record, logpath, fail, build, lib,
    quick, res."""

    def apps_script(self, tag, args, timeout):
        """bench/apps.sh ARGS: its parsed lines, or [] after saying why."""
        env = dict(os.environ, UROCE_TOOL=os.path.join(self.build, "bin", "uroce"),
                   UROCE_LIBDIR=self.lib)
        for k in ("UROCE_ADDR", "UROCE_STATS", "LD_LIBRARY_PATH"):
            env.pop(k, None)
        logf = self.logpath(tag)
        with open(logf, "w") as f:
            try:
                r = subprocess.run([os.path.join(ROOT, "bench", "apps.sh")] + args, env=env,
                                   stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
                rc = r.returncode
            except subprocess.TimeoutExpired:
                rc = "timed out"
        with open(logf, errors="replace") as f:
            text = f.read()
        if rc == 77:
            log(f"  {tag}: skipped ({text.strip().splitlines()[-1] if text.strip() else ''})")
            return []
        if rc != 0:
            self.fail(tag, f"bench/apps.sh rc={rc}: {text.strip()[-200:]}")
        return parsers.apps_bench(text)

    def note(self, key, ok, said=None, aborts=0):
        n = self.res["runs"].setdefault(NOTES, {}).setdefault(
            key, {"runs": 0, "failed": 0, "aborts": 0, "said": []})
        n["runs"] += 1
        n["failed"] += 0 if ok else 1
        n["aborts"] += aborts or 0
        if said and said not in n["said"]:
            n["said"].append(said)

    def apps_round(self):
        """One round of every application run; each figure a sample."""
        secs = 1 if self.quick else 2
        sizes = " ".join(str(s) for s in APPS_ISER_SIZES)
        for place in APPS_ISER_PLACES:
            log(f"apps: iSER and iSCSI/TCP, {place}")
            for r in self.apps_script(f"apps-iser-{place}",
                                      ["iser", "--place", place, "--sizes", sizes,
                                       "--seconds", str(secs)], 300):
                key = iser_key(place, r["n"], r["transport"])
                ok = r.get("rc") == 0 and r.get("iops")
                self.note(key, ok, r.get("said"))
                self.put(key, {"mb_s": r["iops"] * r["n"] / 1e6, "iops": r["iops"]}
                         if ok else None)
        iters = 10 if self.quick else 20
        gloo = os.path.join(self.build, "tests", "apps", "gloo_coll")
        for n in APPS_GLOO_RANKS:
            log(f"apps: gloo allreduce 4 MB, {n} processes, TCP and ibverbs")
            for r in self.apps_script(f"apps-gloo-{n}",
                                      ["gloo", "--prog", gloo, "--ranks", str(n),
                                       "--bytes", str(APPS_GLOO_BYTES),
                                       "--iters", str(iters)], 600):
                key = gloo_key(n, r["transport"])
                s = r.get("s")
                self.note(key, r.get("rc") == 0 and s, r.get("said"), r.get("aborts"))
                # the note keeps any rank that died in gloo's destructor
                self.put(key, {"ms_per_iter": s / r["iters"] * 1e3,
                               "gbps": APPS_GLOO_BYTES * 8 / (s / r["iters"]) / 1e9}
                         if s else None)


def iser_rows():
    return [(place, size) for place in APPS_ISER_PLACES for size in APPS_ISER_SIZES]


def cell(R, key, field, unit=""):
    from .report import spread
    v = spread(R, key, field)
    return f"{v}{unit}" if R.get(key) else v


def notes_text(R, key):
    n = (R.get(NOTES) or {}).get(key)
    if not n:
        return ""
    parts = []
    if n["failed"]:
        parts.append(f"failed {n['failed']} of {n['runs']}")
    if n["aborts"]:
        parts.append(f"{n['aborts']} rank(s) aborted in gloo's destructor")
    if n["said"]:
        parts.append("said: " + "; ".join(
            " / ".join(x.strip() for x in s.split("|") if x.strip())[:160]
            for s in n["said"][:2]))
    return ", ".join(parts)


def apps_section(R):
    """The lines of the applications section, [] when the case did not run."""
    if not any(k.startswith("apps/") for k in R):
        return []
    L = ["## Applications against their own TCP transports (issue 22)\n",
         "Run by bench/apps.sh in namespaces of its own. iSER: tgtd 1.0.85 serving one "
         "256 MiB LUN file on tmpfs through an iSCSI and an iSER portal; libiscsi 1.19's "
         "`iscsi-perf` (sequential READ16, 32 commands in flight) over `iscsi://` (kernel "
         "TCP) and over `iser://` (uroce), back to back at each size. host: tgtd and "
         "initiator in one namespace on 127.0.0.1 (uroce's same-host path); 2ns: two "
         "namespaces joined by veth at MTU 1500 (uroce over UDP at IB MTU 1024), "
         "2ns-9000 the same at MTU 9000 (IB MTU 4096). MB/s = 10⁶ bytes/s, "
         "medians of the rounds (range in parentheses). libiscsi 1.19's iSER refuses "
         "a command of more than 256 KiB (its DATA_BUFFER_SIZE; \"failed to send "
         "read16 command\", then it crashes in its teardown): at 1 MiB only TCP has a "
         "figure.\n",
         "| placement | I/O size | iSCSI/TCP MB/s | iSER MB/s | iSER ÷ TCP | target | notes |",
         "|---|---|---|---|---|---|---|"]
    for place, size in iser_rows():
        kt, ki = iser_key(place, size, "tcp"), iser_key(place, size, "iser")
        a, b = (R.get(kt) or {}).get("mb_s"), (R.get(ki) or {}).get("mb_s")
        notes = "; ".join(x for x in (notes_text(R, kt), notes_text(R, ki)) if x)
        L.append(f"| {place} | {size_name(size)} | {cell(R, kt, 'mb_s')} | "
                 f"{cell(R, ki, 'mb_s')} | {fmt(ratio(b, a), 3)} | "
                 f"{'≥ 1.2' if place == 'host' else '≥ 1.0'} | {notes} |")
    L += ["",
          "gloo: tests/apps/gloo_coll -b, ring allreduce of 4 MB (float) on one algorithm, "
          "one warm-up then the timed iterations (run() alone timed), every result checked; all processes in "
          "one namespace, over gloo's TCP transport and over its ibverbs transport "
          "(uroce, each process under `uroce run`). ms per allreduce of the slowest "
          "rank; the program drains before it destroys the algorithm (gloo's ibverbs "
          "transport in Debian 12 aborts in the destructor of a buffer whose send has "
          "not completed: docs/apps.md).\n",
          "| processes | TCP ms | ibverbs ms | TCP ÷ ibverbs (speed-up) | target | notes |",
          "|---|---|---|---|---|---|"]
    for n in APPS_GLOO_RANKS:
        kt, ki = gloo_key(n, "tcp"), gloo_key(n, "ibverbs")
        a, b = (R.get(kt) or {}).get("ms_per_iter"), (R.get(ki) or {}).get("ms_per_iter")
        notes = "; ".join(x for x in (notes_text(R, kt), notes_text(R, ki)) if x)
        L.append(f"| {n} | {cell(R, kt, 'ms_per_iter')} | {cell(R, ki, 'ms_per_iter')} | "
                 f"{fmt(ratio(a, b), 3)} | ≥ 2.0 | {notes} |")
    L.append("")
    return L
