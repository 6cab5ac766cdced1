# SPDX-License-Identifier: MIT
"""The targets of issue 15 (and those of issues 6, 14, 22, 24 and 26 that
still mean something), one table, and their verdicts on a run.

Each row: the issue, what is measured, the target as written, the value
(a result field, divided by another for a ratio, both keyed by path
where {p} stands), the comparison and its limit, how the figures behind
the value read, and where it is evaluated (on): a tuple of path names,
ALT (the paths the user's alternatives ran on) or None (once, not by
path).  A key may be a tuple: the path down nested results (the
shared-address runs, under "shared"; qperf's tests, under its run), {p}
standing for the path in each part.  Every figure a target reads is the
median of the run's interleaved repeats (runners.median_result)."""

from collections import namedtuple

from .alternatives import alt_key
from .apps import APPS_GLOO_RANKS, APPS_ISER_PLACES, APPS_ISER_SIZES, gloo_key, iser_key
from .common import KIB, fmt, get, ratio, shared_key, size_name
from .incast import INCAST_MODES, incast_key

S64K = 64 * KIB
SAME_HOST = ("local", "udp")
VETH = ("veth9000", "veth1500")
ALL = SAME_HOST + VETH
UDP_PATHS = ("udp",) + VETH
ALT = "alt"


def shared_ref(mode, test, size, qps, field):
    return (("shared", shared_key(mode, test, size, qps)), field)


def alt_ref(tool, transport, field):
    return (alt_key("{p}", tool, transport), field)


# num, den: (results key, field); den None: the value is num * scale,
# shown with nd decimals; also: (key, field, text) a figure added after it
Target = namedtuple("Target", "issue what target num den how limit unit on scale nd also",
                    defaults=(1, 2, None))
Row = namedtuple("Row", "issue path what target value verdict figures")

WRITE64 = ("{p}/ib_write_bw/%d/1" % S64K, "gbps")
TCP64 = ("{p}/iperf3/%d" % S64K, "gbps")
SPIN2 = ("{p}/udp_pp_spin/2", "half_rtt_median")

TARGETS = (
    # issue 15: the same-host path (local; udp beside it is UROCE_LOCAL=0)
    Target(15, "ib_write_bw 64K 1 QP ÷ iperf3 TCP", "≥ 3.0", WRITE64, TCP64, "ge", 3.0,
           "Gb/s", SAME_HOST),
    Target(15, "CPU-s/GB ib_write_bw ÷ iperf3 TCP", "≤ 0.5",
           (WRITE64[0], "cpu_s_per_gb"), (TCP64[0], "cpu_s_per_gb"), "le", 0.5,
           "CPU-s/GB", SAME_HOST),
    Target(15, "ib_send_lat 2 B ÷ ½ UDP spin RTT", "≤ 0.5", ("{p}/ib_send_lat/2", "t_typical"),
           SPIN2, "le", 0.5, "µs", SAME_HOST),
    Target(15, "ib_read_lat 2 B ÷ ½ UDP spin RTT", "≤ 0.5", ("{p}/ib_read_lat/2", "t_typical"),
           SPIN2, "le", 0.5, "µs", SAME_HOST),
    Target(15, "ib_write_lat 2 B ÷ ½ UDP spin RTT", "≤ 1.0",
           ("{p}/ib_write_lat/2", "t_typical"), SPIN2, "le", 1.0, "µs", SAME_HOST),
    # issue 15: the network path, veth between namespaces
    Target(15, "ib_write_bw 64K 1 QP ÷ iperf3 TCP", "≥ 1.0", WRITE64, TCP64, "ge", 1.0,
           "Gb/s", ("veth9000",)),
    Target(15, "ib_write_bw 64K 1 QP ÷ iperf3 TCP", "≥ 0.8", WRITE64, TCP64, "ge", 0.8,
           "Gb/s", ("veth1500",)),
    Target(15, "CPU-s/GB ib_write_bw ÷ iperf3 TCP", "≤ 1.5",
           (WRITE64[0], "cpu_s_per_gb"), (TCP64[0], "cpu_s_per_gb"), "le", 1.5,
           "CPU-s/GB", VETH),
    Target(15, "ib_send_lat 2 B ÷ ½ UDP spin RTT", "≤ 2.0", ("{p}/ib_send_lat/2", "t_typical"),
           SPIN2, "le", 2.0, "µs", VETH),
    # issues 6 and 15: every path
    Target(15, "ib_write_bw 64K 1024 QPs ÷ 1 QP", "≥ 0.8",
           ("{p}/qp/ib_write_bw/1024", "gbps"), ("{p}/qp/ib_write_bw/1", "gbps"),
           "ge", 0.8, "Gb/s", ALL),
    # issue 15: the user's alternatives, same veth
    Target(15, "UCX tag_bw 1 MiB: rc_verbs on uroce ÷ UCX tcp", "≥ 1.0",
           alt_ref("ucx_tag_bw", "uroce", "gbps"), alt_ref("ucx_tag_bw", "tcp", "gbps"),
           "ge", 1.0, "Gb/s", ALT),
    Target(15, "UCX tag_lat 8 B: rc_verbs on uroce ÷ UCX tcp", "≤ 1.0",
           alt_ref("ucx_tag_lat", "uroce", "lat_median_us"),
           alt_ref("ucx_tag_lat", "tcp", "lat_median_us"), "le", 1.0, "µs", ALT),
    Target(15, "fi_pingpong 64K: verbs;ofi_rxm on uroce ÷ libfabric tcp", "≥ 1.0",
           alt_ref("fi_pingpong", "uroce", "gbps"), alt_ref("fi_pingpong", "tcp", "gbps"),
           "ge", 1.0, "Gb/s", ALT),
    Target(15, "Open MPI ping-pong 1 MiB: UCX on uroce ÷ TCP BTL", "≥ 1.0",
           alt_ref("mpi_pingpong", "uroce", "gbps"), alt_ref("mpi_pingpong", "tcp", "gbps"),
           "ge", 1.0, "Gb/s", ALT),
    # issue 6, still meaningful
    Target(6, "ib_write_bw 64K 1 QP ÷ UDP GSO/GRO", "≥ 0.6", WRITE64,
           ("{p}/udp_gso/%d" % S64K, "gbps"), "ge", 0.6, "Gb/s", UDP_PATHS),
    Target(6, "ib_read_bw 64K ÷ ib_write_bw 64K", "0.8–1.2",
           ("{p}/ib_read_bw/%d/1" % S64K, "gbps"), WRITE64, "in", (0.8, 1.2), "Gb/s", ALL),
    Target(6, "ib_send_bw 64K ÷ ib_write_bw 64K", "0.8–1.2",
           ("{p}/ib_send_bw/%d/1" % S64K, "gbps"), WRITE64, "in", (0.8, 1.2), "Gb/s", ALL),
    Target(6, "RSS per idle RC QP beyond its queues (depth 1)", "≤ 64 KiB",
           ("idle", "rss_per_qp_bytes_depth1"), None, "le", 64, "KiB", None, 1 / 1024),
    Target(6, "CPU of 16 connected idle QPs (% of a core)", "< 1 %",
           ("idle", "idle16_core_pct"), None, "lt", 1.0, "%", None, 1, 3,
           ("idle", "idle16_window_s", "over {} s")),
    # issue 26: rsockets (iperf3 through librspreload, rstream) against TCP
    Target(26, "iperf3 via librspreload on uroce ÷ iperf3 TCP", "≥ 1.5",
           ("{p}/rsocket/iperf3_rsocket", "gbps"), ("{p}/rsocket/iperf3_tcp", "gbps"),
           "ge", 1.5, "Gb/s", SAME_HOST),
    Target(26, "iperf3 via librspreload on uroce ÷ iperf3 TCP", "≥ 1.0",
           ("{p}/rsocket/iperf3_rsocket", "gbps"), ("{p}/rsocket/iperf3_tcp", "gbps"),
           "ge", 1.0, "Gb/s", VETH),
    Target(26, "rstream 64 B RTT ÷ rstream -T s (TCP)", "≤ 1.0",
           ("{p}/rsocket/rstream_rsocket", "rtt_us"), ("{p}/rsocket/rstream_tcp", "rtt_us"),
           "le", 1.0, "µs", ALL),
    # issue 14: one address shared by several processes (UDP path)
    Target(14, "ib_write_bw 64K 1 QP, shared ÷ dedicated address", "0.9–1.1",
           shared_ref("shared", "ib_write_bw", S64K, 1, "gbps"),
           shared_ref("dedicated", "ib_write_bw", S64K, 1, "gbps"), "in", (0.9, 1.1), "Gb/s",
           None),
    Target(14, "ib_send_lat 2 B, shared ÷ dedicated address", "≤ 1.1",
           shared_ref("shared", "ib_send_lat", 2, 1, "t_typical"),
           shared_ref("dedicated", "ib_send_lat", 2, 1, "t_typical"), "le", 1.1, "µs", None),
    Target(14, "ib_write_bw 64K 1024 QPs, shared ÷ dedicated address", "0.9–1.1",
           shared_ref("shared", "ib_write_bw", S64K, 1024, "gbps"),
           shared_ref("dedicated", "ib_write_bw", S64K, 1024, "gbps"), "in", (0.9, 1.1),
           "Gb/s", None),
)


def qperf_ev(test):
    """qperf's event-driven figure for test (case events: its defaults)"""
    return (("{p}/qperf_events", f"{test}-2"), "lat_us")


# issue 22: event-driven programs (case events) against the kernel's own
# event-driven exchange in the same run: qperf's udp_lat, ib_send_bw
# polling
TARGETS += tuple(
    Target(22, f"qperf {t} ÷ qperf udp_lat (event-driven)", f"≤ {lim:.1f}", qperf_ev(t),
           qperf_ev("udp_lat"), "le", lim, "µs", ALL)
    for t, lim in (("rc_lat", 1.0), ("ud_lat", 1.0), ("rc_rdma_read_lat", 2.0)))
TARGETS += (
    Target(22, "ib_send_bw -e 64K ÷ ib_send_bw 64K polling", "≥ 0.8",
           ("{p}/events/ib_send_bw/%d" % S64K, "gbps"),
           ("{p}/events/ib_send_bw_poll/%d" % S64K, "gbps"), "ge", 0.8, "Gb/s", ALL),
)

# issue 22: applications against their own TCP transports (case apps)
TARGETS += tuple(
    Target(22, f"iSER ÷ iSCSI/TCP, iscsi-perf {size_name(s)} ({place})",
           "≥ 1.2" if place == "host" else "≥ 1.0", (iser_key(place, s, "iser"), "mb_s"),
           (iser_key(place, s, "tcp"), "mb_s"), "ge", 1.2 if place == "host" else 1.0,
           "MB/s", None)
    for place in APPS_ISER_PLACES for s in APPS_ISER_SIZES)
TARGETS += tuple(
    Target(22, f"gloo allreduce 4 MB, {n} processes: TCP ÷ ibverbs time", "≥ 2.0",
           (gloo_key(n, "tcp"), "ms_per_iter"), (gloo_key(n, "ibverbs"), "ms_per_iter"),
           "ge", 2.0, "ms", None)
    for n in APPS_GLOO_RANKS)

# issue 24: the shared 2 Gbit/s bottleneck (case incast), each UROCE_CC
TARGETS += tuple(
    t for m in INCAST_MODES for t in (
        Target(24, f"8-flow incast utilisation, UROCE_CC={m}", "≥ 0.9",
               (incast_key(f"uroce-{m}", "incast"), "util"), None, "ge", 0.9, "", None, 1, 3),
        Target(24, f"8-flow incast Jain's index, UROCE_CC={m}", "≥ 0.95",
               (incast_key(f"uroce-{m}", "incast"), "jain"), None, "ge", 0.95, "", None, 1, 3),
        Target(24, f"8-flow incast median ping, UROCE_CC={m}", "≤ 1 ms",
               (incast_key(f"uroce-{m}", "incast"), "ping_ms"), None, "le", 1.0, "ms", None,
               1, 3),
        Target(24, f"uroce's share next to 1 TCP flow, UROCE_CC={m}", "0.3–0.7",
               (incast_key(f"uroce-{m}", "pair"), "share"), None, "in", (0.3, 0.7), "", None,
               1, 3)))

VERDICT = {
    "ge": lambda v, lim: v >= lim,
    "le": lambda v, lim: v <= lim,
    "lt": lambda v, lim: v < lim,
    "in": lambda v, lim: lim[0] <= v <= lim[1],
}


def path_key(key, p):
    """key with {p} as path p, in each part of a nested key"""
    if isinstance(key, str):
        return key.format(p=p)
    return tuple(k.format(p=p) for k in key)


def evaluate(t, R, p=None):
    """(value, figures) of target t on results R for path p."""
    def field(ref):
        return get(R, path_key(ref[0], p), ref[1])

    def runs(ref):
        return get(R, path_key(ref[0], p), "repeats") or 1

    num = field(t.num)
    if t.den is not None:
        den = field(t.den)
        n = sorted({runs(t.num), runs(t.den)})
        many = f", medians of {'/'.join(map(str, n))} runs" if n[-1] > 1 else ""
        return ratio(num, den), f"{fmt(num)} / {fmt(den)} {t.unit}{many}"
    val = num * t.scale if num is not None else None
    detail = f"{fmt(val, t.nd)} {t.unit}"
    if t.also:
        detail += " " + t.also[2].format(fmt(field(t.also[:2])))
    return val, detail


def where(t, meta):
    """The paths of this run target t is evaluated on, in the run's order."""
    if t.on is None:
        return ["—"]
    on = meta.get("alt_paths", []) if t.on == ALT else t.on
    return [p for p in meta["paths"] if LEGACY.get(p, p) in on]


# the paths of results.json files from before issue 15 (--report-only):
# loopback was the UDP path, veth a link of MTU 1500
LEGACY = {"loopback": "udp", "veth": "veth1500"}


def targets(res):
    """[Row] of every target on every path it applies to in this run."""
    R = res["runs"]
    out = []
    for t in TARGETS:
        for p in where(t, res["meta"]):
            val, detail = evaluate(t, R, p)
            if val is None:
                verdict = "n/a"
            else:
                verdict = "met" if VERDICT[t.how](val, t.limit) else "missed"
            out.append(Row(t.issue, p, t.what, t.target, val, verdict, detail))
    return out
