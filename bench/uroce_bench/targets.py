# SPDX-License-Identifier: MIT
"""The targets of issue 6, one table, and their verdicts on a run.

Each row: what is measured, the target as written, the value (a result
field, divided by another for a ratio, both keyed by path where {p}
stands), the comparison and its limit, and how the figures behind the
value read.  PATH_TARGETS are evaluated for every path of the run, in
order, then GLOBAL_TARGETS once.  A key may be a tuple: the path down
nested results (the shared-address runs, under "shared")."""

from collections import namedtuple

from .common import KIB, fmt, get, ratio, shared_key

S64K = 64 * KIB


def shared_ref(mode, test, size, qps, field):
    return (("shared", shared_key(mode, test, size, qps)), field)


# num, den: (results key, field); den None: the value is num * scale,
# shown with nd decimals; also: (key, field, text) a figure added after it
Target = namedtuple("Target", "what target num den how limit unit scale nd also",
                    defaults=(1, 2, None))

PATH_TARGETS = (
    Target("ib_write_bw 64K 1 QP ÷ iperf3 TCP", "≥ 2.0",
           ("{p}/ib_write_bw/%d/1" % S64K, "gbps"), ("{p}/iperf3/%d" % S64K, "gbps"),
           "ge", 2.0, "Gb/s"),
    Target("ib_write_bw 64K 1 QP ÷ UDP GSO/GRO", "≥ 0.6",
           ("{p}/ib_write_bw/%d/1" % S64K, "gbps"), ("{p}/udp_gso/%d" % S64K, "gbps"),
           "ge", 0.6, "Gb/s"),
    Target("CPU-s/GB ib_write_bw ÷ iperf3 TCP", "≤ 0.5",
           ("{p}/ib_write_bw/%d/1" % S64K, "cpu_s_per_gb"),
           ("{p}/iperf3/%d" % S64K, "cpu_s_per_gb"), "le", 0.5, "CPU-s/GB"),
    Target("ib_read_bw 64K ÷ ib_write_bw 64K", "0.8–1.2",
           ("{p}/ib_read_bw/%d/1" % S64K, "gbps"), ("{p}/ib_write_bw/%d/1" % S64K, "gbps"),
           "in", (0.8, 1.2), "Gb/s"),
    Target("ib_send_bw 64K ÷ ib_write_bw 64K", "0.8–1.2",
           ("{p}/ib_send_bw/%d/1" % S64K, "gbps"), ("{p}/ib_write_bw/%d/1" % S64K, "gbps"),
           "in", (0.8, 1.2), "Gb/s"),
    Target("ib_send_lat 2 B ÷ ½ UDP spin RTT", "≤ 1.5",
           ("{p}/ib_send_lat/2", "t_typical"), ("{p}/udp_pp_spin/2", "half_rtt_median"),
           "le", 1.5, "µs"),
    Target("ib_read_lat 2 B ÷ ½ UDP spin RTT", "≤ 1.5",
           ("{p}/ib_read_lat/2", "t_typical"), ("{p}/udp_pp_spin/2", "half_rtt_median"),
           "le", 1.5, "µs"),
    Target("ib_write_lat 2 B ÷ ½ UDP spin RTT", "≤ 2.0",
           ("{p}/ib_write_lat/2", "t_typical"), ("{p}/udp_pp_spin/2", "half_rtt_median"),
           "le", 2.0, "µs"),
    Target("ib_write_bw 64K 1024 QPs ÷ 1 QP", "≥ 0.8",
           ("{p}/qp/ib_write_bw/1024", "gbps"), ("{p}/qp/ib_write_bw/1", "gbps"),
           "ge", 0.8, "Gb/s"),
)

GLOBAL_TARGETS = (
    Target("RSS per idle RC QP beyond its queues (depth 1)", "≤ 64 KiB",
           ("idle", "rss_per_qp_bytes_depth1"), None, "le", 64, "KiB", 1 / 1024),
    Target("CPU of 16 connected idle QPs (% of a core)", "< 1 %",
           ("idle", "idle16_core_pct"), None, "lt", 1.0, "%", 1, 3,
           ("idle", "idle16_window_s", "over {} s")),
    Target("ib_write_bw 64K 1 QP, shared ÷ dedicated address", "0.9–1.1",
           shared_ref("shared", "ib_write_bw", S64K, 1, "gbps"),
           shared_ref("dedicated", "ib_write_bw", S64K, 1, "gbps"), "in", (0.9, 1.1), "Gb/s"),
    Target("ib_send_lat 2 B, shared ÷ dedicated address", "≤ 1.1",
           shared_ref("shared", "ib_send_lat", 2, 1, "t_typical"),
           shared_ref("dedicated", "ib_send_lat", 2, 1, "t_typical"), "le", 1.1, "µs"),
    Target("ib_write_bw 64K 1024 QPs, shared ÷ dedicated address", "0.9–1.1",
           shared_ref("shared", "ib_write_bw", S64K, 1024, "gbps"),
           shared_ref("dedicated", "ib_write_bw", S64K, 1024, "gbps"), "in", (0.9, 1.1),
           "Gb/s"),
)

VERDICT = {
    "ge": lambda v, lim: v >= lim,
    "le": lambda v, lim: v <= lim,
    "lt": lambda v, lim: v < lim,
    "in": lambda v, lim: lim[0] <= v <= lim[1],
}


def evaluate(t, R, p=None):
    """(value, figures) of target t on results R for path p."""
    def field(ref):
        key, name = ref
        return get(R, key.format(p=p) if isinstance(key, str) else key, name)

    num = field(t.num)
    if t.den is not None:
        den = field(t.den)
        return ratio(num, den), f"{fmt(num)} / {fmt(den)} {t.unit}"
    val = num * t.scale if num is not None else None
    detail = f"{fmt(val, t.nd)} {t.unit}"
    if t.also:
        detail += " " + t.also[2].format(fmt(field(t.also[:2])))
    return val, detail


def targets(res):
    """[(path, what, target, value, verdict, figures)] of every target."""
    R = res["runs"]
    rows = [(p, t) for p in res["meta"]["paths"] for t in PATH_TARGETS]
    rows += [("—", t) for t in GLOBAL_TARGETS]
    out = []
    for p, t in rows:
        val, detail = evaluate(t, R, p)
        if val is None:
            verdict = "n/a"
        else:
            verdict = "met" if VERDICT[t.how](val, t.limit) else "missed"
        out.append((p, t.what, t.target, val, verdict, detail))
    return out
