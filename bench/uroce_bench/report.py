# SPDX-License-Identifier: MIT
"""report.md and the PNG plots, from a run's results."""

import json
import os
import statistics

from .alternatives import ALT_FI_SIZE, ALT_MPI_SIZE, ALT_UCX_TESTS, alt_key
from .apps import apps_section
from .incast import incast_section
from .common import KIB, PRIMARY, SHARED_RUNS, fmt, get, ratio, shared_key, size_name
from .targets import targets

def has_data(ax):
    """Whether a panel has a point to draw (an empty series is a line too)."""
    return any(len(line.get_xdata()) for line in ax.get_lines())


def plots(res, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    R = res["runs"]
    paths = res["meta"]["paths"]
    if not paths:
        return []
    made = []
    sizes = sorted({int(k.split("/")[2]) for k in R if k.count("/") == 3
                    and "_bw/" in k and k.endswith("/1") and "/qp/" not in k})
    lsizes = sorted({int(k.split("/")[2]) for k in R if k.count("/") == 2 and "_lat/" in k})
    qps = sorted({int(k.split("/")[3]) for k in R if k.count("/") == 3 and "/qp/" in k})

    def series(keyf, field, xs):
        pts = [(x, get(R, keyf(x), field)) for x in xs]
        pts = [(x, y) for x, y in pts if y]
        return [x for x, _ in pts], [y for _, y in pts]

    def sizeaxis(ax, xs):
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([size_name(x) for x in xs], rotation=45)

    def qpaxis(ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(qps)
        ax.set_xticklabels([str(q) for q in qps])

    def figure(name, draw, xaxis, xlabel, ylabel, title):
        """name: a panel a path, draw(ax, p) its lines, on a log y axis."""
        fig, axes = plt.subplots(1, len(paths), figsize=(6.5 * len(paths), 5), squeeze=False)
        for ax, p in zip(axes[0], paths):
            draw(ax, p)
        if not any(has_data(ax) for ax in axes[0]):
            plt.close(fig)          # a run without these cases
            return
        for ax, p in zip(axes[0], paths):
            if not has_data(ax):
                ax.set_title(f"{title} — {p}: not run")
                continue
            ax.set_yscale("log")
            xaxis(ax)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_title(f"{title} — {p}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, name), dpi=110)
        plt.close(fig)
        made.append(name)

    BW = (("ib_write_bw", "o-"), ("ib_read_bw", "s-"), ("ib_send_bw", "^-"))

    def streams(ax, p, field):
        """uroce's three bandwidth tests, TCP and UDP, by size"""
        for t, st in BW:
            ax.plot(*series(lambda x: f"{p}/{t}/{x}/1", field, sizes), st, label=f"uroce {t}")
        ax.plot(*series(lambda x: f"{p}/iperf3/{x}", field, sizes), "k--", label="iperf3 TCP")
        ax.plot(*series(lambda x: f"{p}/udp_gso/{x}", field, sizes), "k:",
                label="UDP GSO/GRO stream")

    def bw(ax, p):
        streams(ax, p, "gbps")
        ax.plot(*series(lambda x: f"memcpy/{x}", "gbps", sizes), "-", color="0.7",
                label="memcpy (1 core)")

    def cpu(ax, p):
        streams(ax, p, "cpu_s_per_gb")

    def lat(ax, p):
        for t, st in (("ib_write_lat", "o-"), ("ib_read_lat", "s-"), ("ib_send_lat", "^-")):
            ax.plot(*series(lambda x: f"{p}/{t}/{x}", "t_typical", lsizes), st,
                    label=f"uroce {t} (median)")
        ax.plot(*series(lambda x: f"{p}/udp_pp_spin/{x}", "half_rtt_median", lsizes), "k--",
                label="UDP ping-pong ½ RTT, spinning")
        ax.plot(*series(lambda x: f"{p}/udp_pp_block/{x}", "half_rtt_median", lsizes), "k:",
                label="UDP ping-pong ½ RTT, blocking")

    def by_qps(ax, p):
        for t, st in BW:
            xs, ys = series(lambda q: f"{p}/qp/{t}/{q}", "gbps", qps)
            if len(xs) > 1:
                ax.plot(xs, ys, st, label=f"uroce {t} 64K")
        for key, st, lab in ((f"{p}/iperf3/qpsweep", "k--", "iperf3 TCP 64K"),
                             (f"{p}/udp_gso/qpsweep", "k:", "UDP GSO/GRO stream")):
            v = get(R, key, "gbps")
            if v:
                ax.axhline(v, linestyle=st[1:], color="k", label=lab)

    figure("bw_vs_size.png", bw, lambda ax: sizeaxis(ax, sizes), "message size", "Gb/s",
           "bandwidth vs size")
    figure("cpu_per_gb.png", cpu, lambda ax: sizeaxis(ax, sizes), "message size",
           "CPU seconds per GB (both processes)", "CPU cost vs size")
    figure("lat_vs_size.png", lat, lambda ax: sizeaxis(ax, lsizes), "message size", "µs",
           "latency vs size")
    figure("bw_vs_qps.png", by_qps, qpaxis, "QPs (perftest -q)", "aggregate Gb/s",
           "bandwidth vs QP count")
    made += bars(plt, R, res["meta"], outdir)
    return made


def alt_rows(p):
    """The alternatives' comparisons on path p: (label, tool, field, unit)."""
    rows = [(f"UCX {t} {size_name(s)}{' B' if s < 1024 else ''}", f"ucx_{t}",
             "gbps" if t.endswith("_bw") else "lat_median_us",
             "Gb/s" if t.endswith("_bw") else "µs median") for t, s in ALT_UCX_TESTS]
    rows.append((f"fi_pingpong RDM {size_name(ALT_FI_SIZE)}", "fi_pingpong", "gbps", "Gb/s"))
    rows.append((f"Open MPI ping-pong {size_name(ALT_MPI_SIZE)}", "mpi_pingpong", "gbps",
                 "Gb/s"))
    return rows


SAME_HOST_ROWS = (
    ("ib_write_bw 64K 1 QP", "{p}/ib_write_bw/%d/1" % (64 * KIB), "gbps", "Gb/s"),
    ("ib_write_bw 64K 1024 QPs", "{p}/qp/ib_write_bw/1024", "gbps", "Gb/s"),
    ("CPU-s/GB ib_write_bw 64K", "{p}/ib_write_bw/%d/1" % (64 * KIB), "cpu_s_per_gb",
     "CPU-s/GB"),
    ("ib_send_lat 2 B", "{p}/ib_send_lat/2", "t_typical", "µs"),
    ("ib_read_lat 2 B", "{p}/ib_read_lat/2", "t_typical", "µs"),
    ("ib_write_lat 2 B", "{p}/ib_write_lat/2", "t_typical", "µs"),
)


def bars(plt, R, meta, outdir):
    """Bar charts of the comparisons a line plot does not show: the
    same-host path against UROCE_LOCAL=0 and TCP, and each alternative
    over TCP against over uroce."""
    import numpy as np
    made = []
    if {"local", "udp"} & set(meta["paths"]):
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        groups = (("bandwidth, Gb/s", [r for r in SAME_HOST_ROWS if r[3] == "Gb/s"]),
                  ("latency, µs", [r for r in SAME_HOST_ROWS if r[3] == "µs"]))
        for ax, (title, rows) in zip(axes, groups):
            x = np.arange(len(rows))
            for i, p in enumerate(("local", "udp")):
                ys = [get(R, key.format(p=p), f) or 0 for _, key, f, _ in rows]
                ax.bar(x + (i - 0.5) * 0.38, ys, 0.38, label=p)
            if title.startswith("bandwidth"):
                tcp = get(R, "local/iperf3/%d" % (64 * KIB), "gbps")
                if tcp:
                    ax.axhline(tcp, color="k", linestyle="--", label="iperf3 TCP 64K")
            else:
                half = get(R, "local/udp_pp_spin/2", "half_rtt_median")
                if half:
                    ax.axhline(half, color="k", linestyle="--", label="½ UDP spin RTT")
            ax.set_xticks(x)
            ax.set_xticklabels([r[0] for r in rows], fontsize=8)
            ax.set_title(f"same host: local vs udp (UROCE_LOCAL=0) — {title}")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "same_host.png"), dpi=110)
        plt.close(fig)
        made.append("same_host.png")
    for p in meta.get("alt_paths", []):
        rows = alt_rows(p)
        fig, axes = plt.subplots(1, len(rows), figsize=(3.2 * len(rows), 4), squeeze=False)
        for ax, (label, tool, f, unit) in zip(axes[0], rows):
            ys = [get(R, alt_key(p, tool, tr), f) or 0 for tr in ("tcp", "uroce")]
            ax.bar([0, 1], ys, color=["0.6", "C0"])
            for x, y in enumerate(ys):
                if not y:
                    ax.text(x, 0, "failed" if alt_key(p, tool, ("tcp", "uroce")[x]) in R
                            else "not run", ha="center", va="bottom", color="C3")
            ax.set_xticks([0, 1])
            ax.set_xticklabels(["TCP", "uroce"])
            ax.set_title(label, fontsize=9)
            ax.set_ylabel(unit)
        fig.suptitle(f"the user's alternatives over TCP and over uroce — {p}")
        fig.tight_layout()
        name = f"alternatives_{p}.png"
        fig.savefig(os.path.join(outdir, name), dpi=110)
        plt.close(fig)
        made.append(name)
    return made


def spread(R, key, field):
    """A cell: the median, and the runs' range when there were several."""
    v = get(R, key, field)
    s = get(R, key, "spread")
    if v is None:
        return "failed" if key in R else "—"
    primary = next((f for f in PRIMARY if get(R, key, f) is not None), None)
    if s and len(s) > 1 and field == primary:
        return f"{fmt(v)} ({fmt(min(s))}–{fmt(max(s))}, {len(s)} runs)"
    return fmt(v)


def same_host_section(R, meta):
    L = ["## Same host: the same-host path (local) and UDP (udp, UROCE_LOCAL=0)\n",
         "Loopback, each process on its own 127.0.0.x; udp sets UROCE_LOCAL=0 in both "
         "uroce processes. Medians of the interleaved repeats, the range of the runs in "
         "parentheses (CPU-s/GB: the median only).\n",
         "| run | local | udp | local ÷ udp |", "|---|---|---|---|"]
    for label, key, f, unit in SAME_HOST_ROWS:
        lo, ud = key.format(p="local"), key.format(p="udp")
        a, b = get(R, lo, f), get(R, ud, f)
        L.append(f"| {label} ({unit}) | {spread(R, lo, f) if f != 'cpu_s_per_gb' else fmt(a)} | "
                 f"{spread(R, ud, f) if f != 'cpu_s_per_gb' else fmt(b)} | "
                 f"{fmt(ratio(a, b), 3)} |")
    tcp = "local/iperf3/%d" % (64 * KIB)
    L.append(f"\nBaselines (local): iperf3 TCP 64K {spread(R, tcp, 'gbps')} Gb/s, "
             f"{fmt(get(R, tcp, 'cpu_s_per_gb'))} CPU-s/GB; UDP ping-pong ½ RTT spinning "
             f"{spread(R, 'local/udp_pp_spin/2', 'half_rtt_median')} µs.\n")
    return L


def alt_section(R, meta):
    L = []
    for p in meta.get("alt_paths", []):
        link = meta.get("links", {}).get(p, {})
        L += [f"## The user's alternatives — {p}\n",
              f"Two namespaces, link MTU {link.get('link_mtu', '?')}. Each middleware over "
              "its own TCP transport and over uroce, back to back, medians of the "
              "repeats (range in parentheses). UCX: ucx_perftest, UCX_TLS=tcp against "
              "rc_verbs (ud_verbs for the wire-up) on uroce through `uroce run`; "
              "libfabric: fi_pingpong RDM, provider tcp against verbs;ofi_rxm (Debian "
              "packages no fi_msg_bw; fi_pingpong's MB/sec counts both directions); "
              "Open MPI: tests/mpi/mpi_pingpong, one rank in each namespace, "
              "`--mca pml ob1 --mca btl tcp,self` against `--mca pml ucx` on uroce.\n",
              "| run | over TCP | over uroce | uroce ÷ TCP |", "|---|---|---|---|"]
        for label, tool, f, unit in alt_rows(p):
            kt, ku = alt_key(p, tool, "tcp"), alt_key(p, tool, "uroce")
            L.append(f"| {label} ({unit}) | {spread(R, kt, f)} | {spread(R, ku, f)} | "
                     f"{fmt(ratio(get(R, ku, f), get(R, kt, f)), 3)} |")
        L.append("")
    return L


def shared_section(S):
    """The lines of "One address shared by several processes", from the
    shared-address runs S (results["runs"]["shared"])."""
    L = ["## One address shared by several processes\n",
         "Loopback, UDP path (UROCE_LOCAL=0 in every process). dedicated: server and client each alone on an address "
         f"(UROCE_SHARE=0); shared: server, client and {S.get('idle_members', '?')} "
         "idle processes on one address, steered by the reuseport program. "
         "Target: within 10 % (latency: at most 10 % above).\n",
         "| run | dedicated | shared | shared / dedicated |",
         "|---|---|---|---|"]
    for t, size, qps, field, unit in SHARED_RUNS:
        d = get(S, shared_key("dedicated", t, size, qps), field)
        h = get(S, shared_key("shared", t, size, qps), field)
        L.append(f"| {t} {size_name(size)} -q {qps} ({unit}) | {fmt(d)} | {fmt(h)} | "
                 f"{fmt(ratio(h, d), 3)} |")
    L.append("")
    return L


def events_section(w, R, p):
    """Event-driven rows (docs/events.md), as ratios to what the kernel
    does with blocking sockets in the same run (issue 22's targets: qperf
    rc_lat and ud_lat <= 1.0x its udp_lat, rc_rdma_read_lat <= 2.0x,
    ib_send_bw -e >= 0.8x ib_send_bw)."""
    q = R.get(f"{p}/qperf_events")
    ev = [k for k in R if k.startswith(f"{p}/events/")]
    if not q and not ev:
        return
    w(f"## Event-driven (completion channels) — {p}\n")
    w("| run | result | against | ratio |")
    w("|---|---|---|---|")
    if q:
        udp = (q.get("udp_lat-2") or {}).get("lat_us")
        tcp = (q.get("tcp_lat-2") or {}).get("lat_us")
        w(f"| qperf udp_lat | {fmt(udp)} µs | | |")
        w(f"| qperf tcp_lat | {fmt(tcp)} µs | qperf udp_lat | {fmt(ratio(tcp, udp))} |")
        for t in ("rc_lat", "ud_lat", "rc_rdma_read_lat"):
            v = (q.get(f"{t}-2") or {}).get("lat_us")
            w(f"| qperf {t} | {fmt(v)} µs | qperf udp_lat | {fmt(ratio(v, udp))} |")
    # (ib_read_lat is a whole READ round trip, ib_send_lat half a ping-pong)
    half = get(R, f"{p}/events/udp_pp_block/2", "half_rtt_median")
    for t, k, what in (("ib_send_lat", 1, "half round trip"),
                       ("ib_read_lat", 2, "round trip")):
        v = get(R, f"{p}/events/{t}/2", "t_typical")
        blk = half * k if half is not None else None
        w(f"| {t} -e 2 B (t_typical) | {fmt(v)} µs | blocking UDP ping-pong, {what} "
          f"({fmt(blk)} µs) | {fmt(ratio(v, blk))} |")
    bw = get(R, f"{p}/events/ib_send_bw/{64 * KIB}", "gbps")
    pol = get(R, f"{p}/events/ib_send_bw_poll/{64 * KIB}", "gbps")
    w(f"| ib_send_bw -e 64 KiB | {fmt(bw)} Gb/s | ib_send_bw polling ({fmt(pol)} "
      f"Gb/s) | {fmt(ratio(bw, pol))} |")
    w("")


def neighbour_section(w, R, p):
    """A CPU-bound program in another session beside two processes that
    spin on a ping-pong (docs/progress.md, "The looker"): the share of a
    core it got and the longest it stood still, beside uroce's
    ib_send_lat and beside the spinning UDP ping-pong, the user's
    alternative.  No target; a row to watch."""
    n = R.get(f"{p}/neighbour")
    if not n:
        return
    w(f"## A neighbour in another session — {p}\n")
    w("bench/neighbour reads the clock in a loop in a session of its own (an autogroup "
      "of its own, as a program from another terminal or service is) while two "
      "processes spin on a 2-byte ping-pong; rounds interleaved.\n")
    w("| beside | rounds | its share of a core (median, least) | its longest stall (median, most) |")
    w("|---|---|---|---|")
    for what, name in (("udp_spin", "the spinning UDP ping-pong"),
                       ("uroce", "ib_send_lat over uroce")):
        rs = n.get(what) or []
        if not rs:
            w(f"| {name} | 0 | | |")
            continue
        share = sorted(r["share"] for r in rs)
        stall = sorted(r["stall_s"] for r in rs)
        w(f"| {name} | {len(rs)} | {fmt(statistics.median(share))}, {fmt(share[0])} | "
          f"{fmt(statistics.median(stall) * 1000)} ms, {fmt(stall[-1] * 1000)} ms |")
    w("")


def scale_section(outdir):
    """Issue 23's figures, from the files their own commands leave in the
    report directory (bench/cm_scale.py: cm_scale.json; bench/run --soak:
    soak.json), when they are there: neither runs as part of bench/run."""
    def load(name):
        try:
            with open(os.path.join(outdir, name)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    L = []
    cm, soak = load("cm_scale.json"), load("soak.json")
    if not cm and not soak:
        return L
    L.append("## Scale (issue 23)\n")
    if cm:
        counts = sorted((n for n in cm if "steps" in cm[n]), key=int)
        L.append("Connection setup against the number of connections: rdmacm-utils' "
                 "`cmtime`, unmodified, on one host (`bench/cm_scale.py`; the median "
                 "run of each count, cm_scale.md has every step and cm_scale.png the "
                 "plot).  Each connection is an RC QP, so the server's peak RSS and "
                 "its descriptors are also what QPs cost by the count.\n")
        L.append("| connections | connect µs/conn | disconnect µs/conn | connections/s "
                 "(connect) | server peak RSS, MiB | RSS per connection, KiB | "
                 "server fds |")
        L.append("|---|---|---|---|---|---|---|")
        for n in counts:
            r = cm[n]
            c, d = r["steps"]["connect"][3], r["steps"]["disconnect"][3]
            L.append(f"| {int(n):,} | {c:.1f} | {d:.1f} | {1e6 / c:,.0f} | "
                     f"{r['srv_rss_kb'] / 1024:.0f} | "
                     f"{r['srv_rss_kb'] / int(n):.1f} | {r['srv_fds']} |")
        if len(counts) > 1:
            lo, hi = cm[counts[0]]["steps"], cm[counts[-1]]["steps"]
            L.append("")
            L.append(f"At {int(counts[-1]):,} against {int(counts[0]):,}: connect "
                     f"{hi['connect'][3] / lo['connect'][3]:.2f}x, disconnect "
                     f"{hi['disconnect'][3] / lo['disconnect'][3]:.2f}x per "
                     "connection (target at most 1.5x).")
        L.append("")
    if soak:
        gib = sum(w["bytes_verified"] for w in soak["workers"]) / 2 ** 30
        runs = sum(w["runs"] for w in soak["workers"])
        errs = sum(len(w["errors"]) for w in soak["workers"])
        fl = soak["faults"]
        L.append(f"The last soak (`bench/run --soak {soak['minutes']:g}`, {soak['date']}; "
                 "soak.md, soak.png): **" + ("PASS" if soak["pass"] else "FAIL") +
                 f"**, {gib:.1f} GiB verified in {runs:,} runs of "
                 f"{len(soak['workers'])} workers, {errs} unexpected errors, "
                 f"{len(soak['kills'])} members SIGKILLed and replaced, with "
                 f"{fl['dropped']:,} packets dropped, {fl['duplicated']:,} duplicated "
                 f"and {fl['reordered']:,} reordered by the fault rules.\n")
        L.append("| long-lived process | RSS after warm-up, KiB | RSS at end | "
                 "fds after warm-up | fds at end | threads |")
        L.append("|---|---|---|---|---|---|")
        for name, g in sorted(soak["growth"].items()):
            L.append(f"| {name} | {g['rss_base_kib']} | {g['rss_last_kib']} | "
                     f"{g['fds_base']} | {g['fds_last']} | {g['threads_max']} |")
        L.append("")
    return L


def report(res, outdir, pngs, analysis_md=None):
    R = res["runs"]
    meta = res["meta"]
    L = []
    w = L.append
    w("# uroce benchmark report\n")
    head = len(L)
    w("Made by one command, from the repository root:\n")
    w(f"```\n{meta['command']}\n```\n")
    la0 = " ".join(f"{x:.2f}" for x in meta["loadavg_start"])
    la1 = " ".join(f"{x:.2f}" for x in meta["loadavg_end"])
    w(f"- started {meta['started']}, took {meta['duration_s'] / 60:.1f} min"
      f"{' (--quick)' if meta['quick'] else ''}; commit `{meta['commit']}`")
    w(f"- machine: {meta['nproc']} CPUs ({meta['cpu']}), kernel {meta['kernel']}; "
      f"perftest {meta['perftest']}, iperf3 {meta['iperf3']}"
      + "".join(f", {k} {meta[k]}" for k in ("ucx-utils", "libfabric-bin", "openmpi-bin",
                                                 "tgt", "libiscsi-bin", "libgloo-dev")
                if meta.get(k)))
    if meta.get("repeats"):
        w(f"- every figure a target reads: the median of {meta['repeats']} runs, the "
          "runs of each path and of each transport interleaved (round after round); "
          f"cases run: {', '.join(meta.get('cases', []))}")
    w(f"- **load average** at start {la0}, at end {la1} (1, 5, 15 min). The machine is "
      "shared: every figure below competed with other work for the CPUs.")
    skipped = meta.get("skipped", {})
    w(f"- paths: {', '.join(meta['paths'])}"
      + "".join(f" ({p} skipped: {why})" for p, why in skipped.items())
      + f"; qperf over uroce: {meta['qperf']}")
    w("- local and udp: loopback, each uroce process on its own 127.0.0.x; local with "
      "uroce's default (its same-host path between processes), udp with UROCE_LOCAL=0 "
      "in both processes (UDP payload of a data packet at IB MTU 4096 ≈ 4128 B, the "
      "UDP GSO segment of the baseline). vethN: two namespaces joined by a veth pair "
      "at link MTU N: " + "; ".join(
          f"{p} {v.get('server')}, IB MTU {v.get('ib_mtu')}"
          for p, v in meta.get("links", {}).items() if v.get("link_mtu")) + ".")
    w("- CPU-s/GB: user + system CPU seconds of both processes (wait4), whole process "
      "lifetime (setup included), per 10⁹ bytes delivered. perftest's client polls its "
      "CQ in a loop, so uroce's figure includes one spinning application thread.\n")
    if meta["failures"]:
        w(f"Runs that failed ({len(meta['failures'])}; logs in `logs/`): " +
          ", ".join(f"`{t}` ({why})" for t, why in meta["failures"]) + "\n")

    preamble = L[head:next(i for i, x in enumerate(L) if x.startswith("- **load average**")) + 1]
    w("## Targets (issues 15, 6, 14, 22, 24 and 26)\n")
    w("| issue | path | measure | target | measured | verdict | figures |")
    w("|---|---|---|---|---|---|---|")
    for row in targets(res):
        w(f"| {row.issue} | {row.path} | {row.what} | {row.target} | {fmt(row.value, 3)} | "
          f"{row.verdict} | {row.figures} |")
    w("")
    if analysis_md:
        w(analysis_md)
    for png in pngs:
        w(f"![{png}]({png})\n")
    if any(p in meta["paths"] for p in ("local", "udp")):
        L += same_host_section(R, meta)
    L += alt_section(R, meta)
    apps = apps_section(R)
    L += apps
    L += incast_section(R)
    if R.get("shared"):
        L += shared_section(R["shared"])

    sizes = sorted({int(k.split("/")[2]) for k in R if k.count("/") == 3
                    and "_bw/" in k and k.endswith("/1") and "/qp/" not in k})
    for p in meta["paths"]:
        w(f"## Bandwidth vs size — {p}\n")
        w("Gb/s (CPU-s/GB in parentheses). memcpy: one core, path-independent. iperf3 "
          "writes min(size, 1 MiB) per call; the UDP stream sends min(size, one GSO "
          "super-datagram of ≤ 64 KiB).\n")
        w("| size | memcpy | iperf3 TCP | UDP GSO/GRO | ib_write_bw | ib_read_bw | ib_send_bw |")
        w("|---|---|---|---|---|---|---|")
        for s in sizes:
            cells = [f"{fmt(get(R, f'memcpy/{s}', 'gbps'))}"]
            for key in (f"{p}/iperf3/{s}", f"{p}/udp_gso/{s}", f"{p}/ib_write_bw/{s}/1",
                        f"{p}/ib_read_bw/{s}/1", f"{p}/ib_send_bw/{s}/1"):
                g, c = get(R, key, "gbps"), get(R, key, "cpu_s_per_gb")
                cells.append(f"{fmt(g)} ({fmt(c)})" if g is not None else "—")
            w(f"| {size_name(s)} | " + " | ".join(cells) + " |")
        w("")
        w(f"## Bandwidth vs QP count, 64 KiB — {p}\n")
        tcp = get(R, f"{p}/iperf3/qpsweep", "gbps")
        udp = get(R, f"{p}/udp_gso/qpsweep", "gbps")
        w(f"Baselines measured alongside: iperf3 TCP {fmt(tcp)} Gb/s, UDP GSO/GRO {fmt(udp)} Gb/s.\n")
        w("| QPs | ib_write_bw | ib_read_bw | ib_send_bw |")
        w("|---|---|---|---|")
        qps = sorted({int(k.split("/")[3]) for k in R if k.startswith(f"{p}/qp/")})
        for q in qps:
            cells = []
            for t in ("ib_write_bw", "ib_read_bw", "ib_send_bw"):
                k = f"{p}/qp/{t}/{q}"
                g = get(R, k, "gbps")
                cells.append(f"{fmt(g)} ({fmt(get(R, k, 'cpu_s_per_gb'))} CPU-s/GB, "
                             f"{fmt(get(R, k, 'wall_s'))} s wall)" if g is not None
                             else ("—" if k not in R else "failed"))
            w(f"| {q} | " + " | ".join(cells) + " |")
        w("")
        w(f"## Latency vs size — {p}\n")
        w("µs, medians (perftest t_typical; ping-pong: half the median round trip). "
          "ib_read_lat is a full READ round trip; the others are half a ping-pong.\n")
        w("| size | UDP ½RTT spin | UDP ½RTT block | ib_write_lat | ib_read_lat | ib_send_lat |")
        w("|---|---|---|---|---|---|")
        lsizes = sorted({int(k.split("/")[2]) for k in R if k.startswith(f"{p}/")
                         and k.count("/") == 2 and "_lat/" in k})
        for s in lsizes:
            cells = [fmt(get(R, f"{p}/udp_pp_spin/{s}", "half_rtt_median")),
                     fmt(get(R, f"{p}/udp_pp_block/{s}", "half_rtt_median"))]
            for t in ("ib_write_lat", "ib_read_lat", "ib_send_lat"):
                cells.append(fmt(get(R, f"{p}/{t}/{s}", "t_typical")))
            w(f"| {size_name(s)} | " + " | ".join(cells) + " |")
        w("")
        q = R.get(f"{p}/qperf")
        w(f"## qperf over uroce (our librdmacm, `-cm1`) — {p}\n")
        if meta["qperf"] != "yes":
            w("n/a: no librdmacm.so.1 in the build.\n")
        elif f"{p}/qperf" not in R:
            # (the case runs on the first path and the alternatives' path
            # only: runners.py, "qperf over uroce")
            w("not run on this path (the `qperf` case runs on the first path "
              "of `--paths` and on the alternatives' path).\n")
        elif not q:
            w("failed (see logs).\n")
        else:
            w("| test | size | result |")
            w("|---|---|---|")
            for k, v in q.items():
                t, s = k.rsplit("-", 1)
                if v is None:
                    w(f"| {t} | {size_name(int(s))} | failed |")
                elif "gbps" in v:
                    w(f"| {t} | {size_name(int(s))} | {fmt(v['gbps'])} Gb/s |")
                else:
                    w(f"| {t} | {size_name(int(s))} | {fmt(v['lat_us'])} µs |")
            w("")
        events_section(w, R, p)
        neighbour_section(w, R, p)
        # transport counters of the 64K runs
        w(f"Transport counters of the 64 KiB bandwidth runs — {p} (both sides):\n")
        w("| run | retransmits | timeouts | seq NAKs rx | duplicates | drops |")
        w("|---|---|---|---|---|---|")
        for t in ("ib_write_bw", "ib_read_bw", "ib_send_bw"):
            for qn in (1, 1024):
                key = f"{p}/{t}/{64 * KIB}/1" if qn == 1 else f"{p}/qp/{t}/{qn}"
                c = get(R, key, "counters")
                if c:
                    w(f"| {t} -q {qn} | {c['retransmits']} | {c['timeouts']} | "
                      f"{c['rx_nak_seq']} | {c['duplicates']} | {c['drops']} |")
        w("")

    idle = R.get("idle") or {}
    w("## Idle QPs: memory and CPU\n")
    w("`idle_qps N DEPTH` opens the device, creates N RC QPs with DEPTH send and "
      "receive WRs, connects them in pairs (to themselves over the device's GID) and "
      "sleeps. RSS per QP = (RSS with 1025 QPs − RSS with 1) / 1024.\n")
    w("| QP depth | RSS before device | RSS with device, PD, CQ | RSS, 1 QP | RSS, 1025 QPs | per QP |")
    w("|---|---|---|---|---|---|")
    for d in (1, 128):
        if f"rss_per_qp_bytes_depth{d}" in idle:
            w(f"| {d} | {idle[f'rss_kb_before_depth{d}']} KiB | {idle[f'rss_kb_device_depth{d}']} KiB | "
              f"{idle[f'rss_kb_1qp_depth{d}']} KiB | {idle[f'rss_kb_1025qp_depth{d}']} KiB | "
              f"{fmt(idle[f'rss_per_qp_bytes_depth{d}'] / 1024)} KiB |")
    w("")
    if "idle16_core_pct" in idle:
        w(f"16 connected idle QPs in one process ({idle['idle16_threads']} threads, "
          f"RSS {idle['idle16_rss_kb']} KiB): {idle['idle16_cpu_s']:.3f} CPU-s over "
          f"{idle['idle16_window_s']:.1f} s = **{idle['idle16_core_pct']:.3f} % of a core** "
          "(/proc/PID/stat, 10 ms resolution).\n")
    prof = R.get("profile")
    if prof:
        w(f"## Where the time goes: callgrind, ib_write_bw 64 KiB, "
          f"{meta.get('profile_path', 'loopback')}\n")
        w(f"Both sides under `valgrind --tool=callgrind` for a {prof.get('iters', '?')}-iteration run; "
          "self cost (instructions) by function. Time in the kernel (sendmsg/recvmsg, "
          "the copies into and out of socket buffers) is not counted by callgrind — "
          "see the user/system split of the real runs below.\n")
        for side in ("client", "server"):
            d = prof.get(side) if isinstance(prof.get(side), dict) else None
            if not d:
                continue
            role = "requester (client)" if side == "client" else "responder (server)"
            w(f"**{role}**, {d['total_ir'] or 0:,} instructions:\n")
            w("| self % | function | source | object |")
            w("|---|---|---|---|")
            for r in d["top"][:12]:
                w(f"| {r['pct']:.1f} | `{r['fn']}` | {r['file']} | {r.get('obj', '')} |")
            w("")
    L += scale_section(outdir)
    w("## User vs system CPU, 64 KiB bandwidth runs\n")
    w("| path | run | user s | system s | system share |")
    w("|---|---|---|---|---|")
    for p in meta["paths"]:
        for t in ("ib_write_bw", "ib_read_bw", "ib_send_bw"):
            k = f"{p}/{t}/{64 * KIB}/1"
            u, s = get(R, k, "cpu_user_s"), get(R, k, "cpu_sys_s")
            if u is not None:
                w(f"| {p} | {t} | {u:.2f} | {s:.2f} | {100 * s / (u + s):.0f} % |")
    w("")
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    if apps:
        # the applications alone, with their targets, for bench/report/apps.md
        rows = [f"| {r.what} | {r.target} | {fmt(r.value, 3)} | {r.verdict} | {r.figures} |"
                for r in targets(res) if r.issue == 22]
        with open(os.path.join(outdir, "apps.md"), "w") as f:
            f.write("\n".join(["# uroce benchmark report: applications\n"] + preamble +
                              ["## Targets (issue 22)\n",
                               "| measure | target | measured | verdict | figures |",
                               "|---|---|---|---|---|"] + rows + [""] + apps) + "\n")
