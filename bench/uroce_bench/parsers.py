# SPDX-License-Identifier: MIT
"""The output of each program the benchmark runs, parsed: pure functions
of the text a run wrote (tested on captured output in bench/tests/).
Each returns None when the text has no result in it."""

import json
import os
import re

# the counters a perftest result keeps, from our libibverbs' UROCE_STATS line
PERFTEST_COUNTERS = ("retransmits", "timeouts", "rx_nak_seq", "tx_nak_seq", "duplicates",
                     "out_of_seq", "tx_rnr_nak")


def uroce_counters(text):
    """Every "uroce-stats: name=value ..." line (UROCE_STATS=1, at close)."""
    out = []
    for m in re.finditer(r"uroce-stats:((?: [a-z0-9_]+=\d+)+)", text):
        out.append({k: int(v) for k, v in re.findall(r"([a-z0-9_]+)=(\d+)", m.group(1))})
    return out


def perftest_counters(*texts):
    """The kept counters summed over both sides, and every drop_* as drops."""
    counters = [c for t in texts for c in uroce_counters(t)]
    res = {k: sum(c.get(k, 0) for c in counters) for k in PERFTEST_COUNTERS}
    res["drops"] = sum(v for c in counters for k, v in c.items() if k.startswith("drop_"))
    return res


def perftest_bw(text):
    """ib_*_bw --report_gbits: #bytes #iterations peak average MsgRate."""
    m = re.search(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", text, re.M)
    if not m:
        return None
    return {"iters": int(m.group(2)), "peak_gbps": float(m.group(3)),
            "gbps": float(m.group(4)), "mpps": float(m.group(5))}


def perftest_lat(text):
    """ib_*_lat: #bytes #iterations t_min t_max t_typical t_avg t_stdev p99 p99.9
    (microseconds; the stdev may be -nan)."""
    m = re.search(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                  r"\s+(\S+)\s+([\d.]+)\s+([\d.]+)", text, re.M)
    if not m:
        return None
    return {"t_min": float(m.group(3)), "t_typical": float(m.group(5)),
            "t_avg": float(m.group(6)), "t_p99": float(m.group(8))}


def iperf3_received(text):
    """iperf3 -J: (bytes, seconds) the receiver counted.  Raises ValueError
    or KeyError on output that is not iperf3's JSON (the caller says why)."""
    rcv = json.loads(text)["end"]["sum_received"]
    return rcv["bytes"], rcv["seconds"]


def udp_stream(recv_text, send_text):
    """udp_gso_stream: what the receiver got, and what the sender sent."""
    m = re.search(r"bytes=(\d+) datagrams=(\d+) secs=([\d.]+) gbps=([\d.]+)", recv_text)
    if not m:
        return None
    sent = re.search(r"sent_bytes=(\d+)", send_text)
    return {"bytes": int(m.group(1)), "gbps": float(m.group(4)),
            "sent_bytes": int(sent.group(1)) if sent else None}


def udp_pingpong(text):
    """udp_pingpong client: round-trip times in microseconds."""
    m = re.search(r"rtt_min_us=([\d.]+) rtt_median_us=([\d.]+) rtt_avg_us=([\d.]+) "
                  r"rtt_p99_us=([\d.]+)", text)
    if not m:
        return None
    return {"rtt_min": float(m.group(1)), "rtt_median": float(m.group(2)),
            "rtt_avg": float(m.group(3))}


def neighbour(text):
    """bench/neighbour: the CPU time it got and its longest stall."""
    m = re.search(r"neighbour: cpu_s ([\d.]+) wall_s ([\d.]+) longest_stall_s ([\d.]+)", text)
    if not m:
        return None
    return {"cpu_s": float(m.group(1)), "wall_s": float(m.group(2)),
            "stall_s": float(m.group(3))}


def memcpy_bw(text):
    m = re.search(r"bytes=(\d+) secs=([\d.]+) gbps=([\d.]+)", text)
    if not m:
        return None
    return {"bytes": int(m.group(1)), "gbps": float(m.group(3))}


QPERF_BW_SCALE = {"bytes/sec": 1, "KB/sec": 1e3, "MB/sec": 1e6, "GB/sec": 1e9, "TB/sec": 1e12}
QPERF_LAT_SCALE = {"ns": 1e-3, "us": 1, "ms": 1e3, "sec": 1e6}


def qperf(text):
    """One qperf test: {"gbps": ...} for a bandwidth, {"lat_us": ...} for a
    latency (qperf picks the unit; decimal prefixes; thousands grouped
    with commas, "1,000 MB/sec")."""
    m = re.search(r"(bw|latency)\s*=\s*([\d.,]+)\s*(\S+)", text)
    if not m:
        return None
    val, unit = float(m.group(2).replace(",", "")), m.group(3)
    if m.group(1) == "bw":
        return {"gbps": val * QPERF_BW_SCALE.get(unit, 1) * 8 / 1e9}
    return {"lat_us": val * QPERF_LAT_SCALE.get(unit, 1)}


def idle_rss(text):
    """idle_qps: [RSS before the device, with the device, with the QPs] in KiB."""
    m = re.search(r"rss_kb_before=(\d+) rss_kb_device=(\d+) rss_kb=(\d+)", text)
    return [int(x) for x in m.groups()] if m else None


def callgrind(text):
    """callgrind_annotate --inclusive=no: (total Ir, [{pct, fn, file, obj}])."""
    rows = []
    total = None
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(.*)", line)
        if m and "PROGRAM TOTALS" in line:
            total = int(m.group(1).replace(",", ""))
        elif m:
            fn = m.group(3)
            mo = re.search(r"\s*\[([^\]]*)\]\s*$", fn)
            obj = os.path.basename(mo.group(1)) if mo else ""
            fn = fn[:mo.start()] if mo else fn
            fl = fn.split(":", 1)
            src = fl[0] if len(fl) == 2 else ""
            rows.append({"pct": float(m.group(2)),
                         "fn": fl[1] if len(fl) == 2 else fn,
                         "file": os.path.basename(src) if src != "???" else "",
                         "obj": obj})
        m2 = re.match(r"\s*([\d,]+)\s+\(100\.0%\)\s+PROGRAM TOTALS", line)
        if m2:
            total = int(m2.group(1).replace(",", ""))
    return total, rows


def ucx_perftest(text):
    """ucx_perftest's "Final:" row: iterations, latency (µs: median,
    average, overall), bandwidth (MB/s: average, overall), message rate
    (msg/s: average, overall).  Bandwidth in Gb/s (MB = 2^20 bytes, as
    ucx_perftest counts them)."""
    m = re.search(r"^Final:\s+(\d+)" + r"\s+([\d.]+)" * 7, text, re.M)
    if not m:
        return None
    v = [float(x) for x in m.groups()[1:]]
    return {"iters": int(m.group(1)), "lat_median_us": v[0], "lat_avg_us": v[1],
            "gbps": v[4] * MIB_BYTES * 8 / 1e9, "msg_rate": v[6]}


MIB_BYTES = 1 << 20
FI_SCALE = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def fi_pingpong(text):
    """fi_pingpong (fabtests): "bytes #sent #ack total time MB/sec
    usec/xfer Mxfers/sec"; the first row (one size).  MB/sec is 10^6
    bytes a second, both directions' bytes counted; usec/xfer is half a
    round trip."""
    m = re.search(r"^(\d+)([kmg]?)\s+\S+\s+=\S+\s+\S+\s+[\d.]+s\s+([\d.]+)\s+([\d.]+)",
                  text, re.M)
    if not m:
        return None
    return {"size": int(m.group(1)) * FI_SCALE[m.group(2)],
            "gbps": float(m.group(3)) * 8 / 1e3, "half_rtt_us": float(m.group(4))}


def mpi_pingpong(text):
    """tests/mpi/mpi_pingpong: each rank's "rank R: N round trips of S
    bytes, B bad, X MB/s"; rank 0's figure (10^6 bytes a second, both
    directions), None unless both ranks report 0 bad."""
    rows = re.findall(r"^rank (\d+): (\d+) round trips of (\d+) bytes, (\d+) bad, "
                      r"([\d.]+) MB/s", text, re.M)
    ranks = {r[0]: r for r in rows}
    if set(ranks) != {"0", "1"} or any(r[3] != "0" for r in rows):
        return None
    r0 = ranks["0"]
    return {"rounds": int(r0[1]), "size": int(r0[2]), "gbps": float(r0[4]) * 8 / 1e3}


def apps_bench(text):
    """bench/apps.sh: its "apps-bench: iser PLACE SIZE TRANSPORT rc=N
    iops=N mbs=N" and "apps-bench: gloo RANKS BYTES TRANSPORT rc=N iters=N
    s=T aborts=N" lines, each a dict (kind, the two numbers, transport and
    its fields; s None when no rank printed a time); "... said: TEXT"
    lines become the "said" of the result before them of the same run."""
    out = []
    for m in re.finditer(r"^apps-bench: (iser|gloo) (\S+) (\d+) (\S+) (.*)$", text, re.M):
        kind, where, n, tr, rest = m.groups()
        if rest.startswith("said: "):
            for r in reversed(out):
                if (r["kind"], r["where"], r["n"], r["transport"]) == (kind, where, int(n), tr):
                    r["said"] = rest[6:].strip()
                    break
            continue
        r = {"kind": kind, "where": where, "n": int(n), "transport": tr}
        for k, v in re.findall(r"(\w+)=(\S+)", rest):
            r[k] = None if v == "none" else (float(v) if "." in v else int(v))
        out.append(r)
    return out
