# SPDX-License-Identifier: MIT
"""The benchmark's output parsers on output captured from the real programs
(bench/tests/samples/: perftest 6.x over uroce, iperf 3.12 -J, qperf
through our librdmacm, our baseline programs), and the targets table.
Run by ctest (bench.parsers) or `python3 -m unittest discover bench/tests`."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from uroce_bench import common, parsers, targets  # noqa: E402


def sample(name):
    with open(os.path.join(HERE, "samples", name)) as f:
        return f.read()


class PerftestTest(unittest.TestCase):
    def test_bw(self):
        r = parsers.perftest_bw(sample("perftest_ib_write_bw.txt"))
        self.assertEqual(r, {"iters": 6144, "peak_gbps": 19.34, "gbps": 10.10,
                             "mpps": 0.019269})

    def test_lat(self):
        r = parsers.perftest_lat(sample("perftest_ib_send_lat.txt"))
        self.assertEqual(r, {"t_min": 7.54, "t_typical": 9.71, "t_avg": 26.72,
                             "t_p99": 216.82})

    def test_lat_stdev_nan(self):
        text = sample("perftest_ib_send_lat.txt").replace("118.85", "-nan")
        self.assertEqual(parsers.perftest_lat(text)["t_p99"], 216.82)

    def test_bw_is_not_lat(self):
        # the header lines of a latency run are no bandwidth result, and
        # a run that printed no result line has none
        self.assertIsNone(parsers.perftest_bw("#bytes #iterations\n"))
        self.assertIsNone(parsers.perftest_lat(sample("perftest_ib_write_bw.txt")))

    def test_counters(self):
        cli = sample("perftest_ib_write_bw.txt")
        srv = sample("perftest_ib_write_bw_server.txt")
        one = parsers.uroce_counters(cli)
        self.assertEqual(len(one), 1)
        self.assertEqual(one[0]["tx_pkts"], 98304)
        self.assertEqual(one[0]["rx_acks"], 1152)
        c = parsers.perftest_counters(srv, cli)
        self.assertEqual(set(c), set(parsers.PERFTEST_COUNTERS) | {"drops"})
        self.assertEqual(c["retransmits"], 0)
        self.assertEqual(c["drops"], 0)
        # summed over both sides, every drop_* counted
        c = parsers.perftest_counters(cli + "\nuroce-stats: timeouts=3 drop_bad_icrc=2 "
                                      "drop_no_owner=5\n", "uroce-stats: timeouts=4\n")
        self.assertEqual((c["timeouts"], c["drops"]), (7, 7))


class Iperf3Test(unittest.TestCase):
    def test_received(self):
        self.assertEqual(parsers.iperf3_received(sample("iperf3.json")),
                         (1943863296, 1.000837))

    def test_not_json(self):
        with self.assertRaises(ValueError):
            parsers.iperf3_received("iperf3: error - unable to connect to server")
        with self.assertRaises(KeyError):
            parsers.iperf3_received(json.dumps({"error": "interrupt"}))


class QperfTest(unittest.TestCase):
    def test_bw(self):
        r = parsers.qperf(sample("qperf_rc_bw.txt"))
        self.assertAlmostEqual(r["gbps"], 1.4 * 8)
        self.assertNotIn("lat_us", r)

    def test_lat(self):
        self.assertEqual(parsers.qperf(sample("qperf_rc_lat.txt")), {"lat_us": 50.2})

    def test_units(self):
        self.assertAlmostEqual(parsers.qperf("rc_lat:\n    latency  =  880 ns\n")["lat_us"],
                               0.88)
        self.assertAlmostEqual(parsers.qperf("rc_bw:\n    bw  =  500 MB/sec\n")["gbps"], 4.0)
        self.assertAlmostEqual(parsers.qperf("rc_bw:\n    bw  =  1,000 MB/sec\n")["gbps"], 8.0)
        self.assertIsNone(parsers.qperf("qperf: failed to connect\n"))


class BaselinesTest(unittest.TestCase):
    def test_udp_stream(self):
        r = parsers.udp_stream(sample("udp_gso_recv.txt"), sample("udp_gso_send.txt"))
        self.assertEqual(r, {"bytes": 2753830080, "gbps": 16.7283,
                             "sent_bytes": 5206233600})
        self.assertIsNone(parsers.udp_stream("ready\n", sample("udp_gso_send.txt")))
        self.assertIsNone(parsers.udp_stream(sample("udp_gso_recv.txt"), "")["sent_bytes"])

    def test_udp_pingpong(self):
        self.assertEqual(parsers.udp_pingpong(sample("udp_pingpong.txt")),
                         {"rtt_min": 4.387, "rtt_median": 4.607, "rtt_avg": 27.010})

    def test_memcpy(self):
        self.assertEqual(parsers.memcpy_bw(sample("memcpy_bw.txt")),
                         {"bytes": 394133504, "gbps": 27.529})

    def test_neighbour(self):
        self.assertEqual(parsers.neighbour(
            "neighbour: cpu_s 4.912 wall_s 5.000 longest_stall_s 0.0040\n"),
            {"cpu_s": 4.912, "wall_s": 5.0, "stall_s": 0.004})
        self.assertIsNone(parsers.neighbour("neighbour: setsid: not permitted\n"))

    def test_idle(self):
        self.assertEqual(parsers.idle_rss(sample("idle_qps.txt")), [1616, 2060, 2060])
        self.assertIsNone(parsers.idle_rss("ready qps=16 depth=128\n"))


class AlternativesTest(unittest.TestCase):
    """ucx_perftest, fi_pingpong and our MPI ping-pong, captured between
    two namespaces (veth, link MTU 9000) on a loaded machine."""

    def test_ucx_bw(self):
        r = parsers.ucx_perftest(sample("ucx_perftest_tag_bw.txt"))
        self.assertEqual(r["iters"], 500)
        self.assertEqual((r["lat_median_us"], r["lat_avg_us"], r["msg_rate"]),
                         (4.376, 969.340, 1032.0))
        # overall MB/s, MB = 2^20 bytes
        self.assertAlmostEqual(r["gbps"], 1031.63 * 2 ** 20 * 8 / 1e9)

    def test_ucx_lat(self):
        # the progress rows ([thread 0]) are no result; Final: is
        r = parsers.ucx_perftest(sample("ucx_perftest_tag_lat.txt"))
        self.assertEqual((r["iters"], r["lat_median_us"], r["lat_avg_us"]),
                         (10000, 5.421, 34.036))
        self.assertIsNone(parsers.ucx_perftest(
            sample("ucx_perftest_tag_lat.txt").replace("Final:", "[thread 0]")))

    def test_fi_pingpong(self):
        r = parsers.fi_pingpong(sample("fi_pingpong_rdm.txt"))
        self.assertEqual(r["size"], 65536)
        self.assertAlmostEqual(r["gbps"], 58.60 * 8 / 1e3)
        self.assertEqual(r["half_rtt_us"], 1118.31)
        self.assertEqual(parsers.fi_pingpong(
            "1k      10k     =10k     19m   0.37s    55.13      18.57       0.05\n")["size"],
            1024)
        self.assertIsNone(parsers.fi_pingpong("[error] util/pingpong.c:933 : eq_readerr: "
                                              "Connection timed out\n"))

    def test_mpi_pingpong(self):
        r = parsers.mpi_pingpong(sample("mpi_pingpong_2ns.txt"))
        self.assertEqual(r["rounds"], 200)
        self.assertEqual(r["size"], 1048576)
        self.assertAlmostEqual(r["gbps"], 29.3 * 8 / 1e3)
        # a bad byte on either rank, or a rank missing, is no result
        text = sample("mpi_pingpong_2ns.txt")
        self.assertIsNone(parsers.mpi_pingpong(text.replace("0 bad, 29.3", "3 bad, 29.3", 1)))
        self.assertIsNone(parsers.mpi_pingpong(text.splitlines()[0]))


class MedianTest(unittest.TestCase):
    def test_median(self):
        runs = [{"gbps": 10.0, "cpu_s_per_gb": 1.0, "counters": {"a": 1}},
                None,
                {"gbps": 30.0, "cpu_s_per_gb": 3.0, "counters": {"a": 3}},
                {"gbps": 20.0, "cpu_s_per_gb": 9.0, "counters": {"a": 2}}]
        m = common.median_result(runs)
        # each figure its own median; the rest from the run of the median
        self.assertEqual((m["gbps"], m["cpu_s_per_gb"], m["counters"]), (20.0, 3.0, {"a": 2}))
        self.assertEqual((m["repeats"], m["failed_repeats"]), (3, 1))
        self.assertEqual(m["spread"], [10.0, 20.0, 30.0])
        # an even count: the lower run is the one kept, its figures the means
        m = common.median_result(runs[:2] + runs[3:])
        self.assertEqual((m["gbps"], m["counters"]), (15.0, {"a": 1}))
        self.assertIsNone(common.median_result([None, None]))
        self.assertEqual(common.median_result([{"t_typical": 5.0}])["t_typical"], 5.0)


def results(paths=("local",)):
    """A run's results with the figures the targets read."""
    s = 64 * 1024
    R = {"idle": {"rss_per_qp_bytes_depth1": 2048, "idle16_core_pct": 0.5,
                  "idle16_window_s": 10.0}}
    for p in paths:
        R.update({
            f"{p}/ib_write_bw/{s}/1": {"gbps": 20.0, "cpu_s_per_gb": 1.0},
            f"{p}/iperf3/{s}": {"gbps": 5.0, "cpu_s_per_gb": 4.0},
            f"{p}/udp_gso/{s}": {"gbps": 40.0},
            f"{p}/ib_read_bw/{s}/1": {"gbps": 18.0},
            f"{p}/ib_send_bw/{s}/1": {"gbps": 30.0},
            f"{p}/ib_send_lat/2": {"t_typical": 6.0},
            f"{p}/ib_read_lat/2": {"t_typical": 7.0},
            f"{p}/udp_pp_spin/2": {"half_rtt_median": 5.0},
            f"{p}/qp/ib_write_bw/1": {"gbps": 20.0},
            f"{p}/qp/ib_write_bw/1024": None,       # that run failed
        })
    return {"runs": R, "meta": {"paths": list(paths)}}


class TargetsTest(unittest.TestCase):
    def test_table(self):
        names = [(t.what, t.on) for t in targets.TARGETS]
        self.assertEqual(len(names), len(set(names)))
        for t in targets.TARGETS:
            self.assertIn(t.how, targets.VERDICT, t.what)
            self.assertIn(t.issue, (6, 14, 15, 22, 24, 26), t.what)
            self.assertEqual(isinstance(t.limit, tuple), t.how == "in", t.what)
            if t.on is not None and t.on != targets.ALT:
                self.assertTrue(set(t.on) <= set(targets.ALL), t.what)
            if isinstance(t.on, tuple) or t.on == targets.ALT:
                # (a nested key: in one of its parts)
                for key in (t.num[0], t.den[0]):
                    self.assertIn("{p}", "".join(key) if isinstance(key, tuple) else key,
                                  t.what)

    def test_event_driven(self):
        # issue 22: qperf's tests under its run, ib_send_bw -e against polling
        R = {"veth9000/qperf_events": {
                 "udp_lat-2": {"test": "udp_lat", "size": 2, "lat_us": 30.0},
                 "rc_lat-2": {"test": "rc_lat", "size": 2, "lat_us": 27.0},
                 "ud_lat-2": {"test": "ud_lat", "size": 2, "lat_us": 33.0},
                 "rc_rdma_read_lat-2": None},          # that test failed
             f"veth9000/events/ib_send_bw/{64 * 1024}": {"gbps": 9.0},
             f"veth9000/events/ib_send_bw_poll/{64 * 1024}": {"gbps": 10.0}}
        rows = {r.what: (r.value and round(r.value, 3), r.verdict, r.figures)
                for r in targets.targets({"runs": R, "meta": {"paths": ["veth9000"]}})
                if r.issue == 22 and r.path == "veth9000"}
        self.assertEqual(rows, {
            "qperf rc_lat ÷ qperf udp_lat (event-driven)": (0.9, "met", "27.0 / 30.0 µs"),
            "qperf ud_lat ÷ qperf udp_lat (event-driven)": (1.1, "missed", "33.0 / 30.0 µs"),
            "qperf rc_rdma_read_lat ÷ qperf udp_lat (event-driven)":
                (None, "n/a", "— / 30.0 µs"),
            "ib_send_bw -e 64K ÷ ib_send_bw 64K polling": (0.9, "met", "9.00 / 10.0 Gb/s"),
        })

    def test_verdicts(self):
        res = results(("local", "udp", "veth9000", "veth1500"))
        rows = {(r.path, r.what, r.target): (r.value, r.verdict, r.figures)
                for r in targets.targets(res)}
        self.assertEqual(len(rows), len(targets.targets(res)))
        lo = "local"
        # the same-host path: 3x TCP; the UDP path beside it, same target
        self.assertEqual(rows[(lo, "ib_write_bw 64K 1 QP ÷ iperf3 TCP", "≥ 3.0")],
                         (4.0, "met", "20.0 / 5.00 Gb/s"))
        self.assertEqual(rows[("udp", "ib_write_bw 64K 1 QP ÷ iperf3 TCP", "≥ 3.0")][:2],
                         (4.0, "met"))
        # the network paths: 1.0x at MTU 9000, 0.8x at 1500
        self.assertEqual(rows[("veth9000", "ib_write_bw 64K 1 QP ÷ iperf3 TCP", "≥ 1.0")][:2],
                         (4.0, "met"))
        self.assertIn(("veth1500", "ib_write_bw 64K 1 QP ÷ iperf3 TCP", "≥ 0.8"), rows)
        self.assertNotIn(("veth1500", "ib_write_bw 64K 1 QP ÷ iperf3 TCP", "≥ 1.0"), rows)
        self.assertNotIn((lo, "ib_write_bw 64K 1 QP ÷ iperf3 TCP", "≥ 1.0"), rows)
        self.assertEqual(rows[(lo, "CPU-s/GB ib_write_bw ÷ iperf3 TCP", "≤ 0.5")][:2],
                         (0.25, "met"))
        self.assertEqual(rows[("veth9000", "CPU-s/GB ib_write_bw ÷ iperf3 TCP", "≤ 1.5")][:2],
                         (0.25, "met"))
        # 6 / 5 = 1.2: within 2x half the RTT on veth, not 0.5x on the same host
        self.assertEqual(rows[(lo, "ib_send_lat 2 B ÷ ½ UDP spin RTT", "≤ 0.5")][:2],
                         (1.2, "missed"))
        self.assertEqual(rows[("veth1500", "ib_send_lat 2 B ÷ ½ UDP spin RTT", "≤ 2.0")][:2],
                         (1.2, "met"))
        self.assertEqual(rows[(lo, "ib_read_lat 2 B ÷ ½ UDP spin RTT", "≤ 0.5")][:2],
                         (1.4, "missed"))
        # a missing or failed run is n/a, never met
        self.assertEqual(rows[(lo, "ib_write_lat 2 B ÷ ½ UDP spin RTT", "≤ 1.0")][:2],
                         (None, "n/a"))
        self.assertEqual(rows[(lo, "ib_write_bw 64K 1024 QPs ÷ 1 QP", "≥ 0.8")][:2],
                         (None, "n/a"))
        # issue 6 rows kept: the UDP ceiling only where uroce runs on UDP
        self.assertEqual(rows[("udp", "ib_write_bw 64K 1 QP ÷ UDP GSO/GRO", "≥ 0.6")][:2],
                         (0.5, "missed"))
        self.assertNotIn((lo, "ib_write_bw 64K 1 QP ÷ UDP GSO/GRO", "≥ 0.6"), rows)
        self.assertEqual(rows[(lo, "ib_send_bw 64K ÷ ib_write_bw 64K", "0.8–1.2")][:2],
                         (1.5, "missed"))
        # issue 26: where the rsocket runs failed, n/a
        self.assertEqual(rows[(lo, "iperf3 via librspreload on uroce ÷ iperf3 TCP", "≥ 1.5")][:2],
                         (None, "n/a"))
        self.assertEqual(rows[("—", "RSS per idle RC QP beyond its queues (depth 1)",
                               "≤ 64 KiB")], (2.0, "met", "2.00 KiB"))
        self.assertEqual(rows[("—", "CPU of 16 connected idle QPs (% of a core)", "< 1 %")],
                         (0.5, "met", "0.500 % over 10.0 s"))

    def test_rsocket(self):
        """Issue 26: iperf3 through librspreload and rstream against TCP,
        1.5x on the same host, 1.0x across namespaces."""
        res = results(("local", "veth9000"))
        R = res["runs"]
        for p, rs, tcp in (("local", 6.0, 5.0), ("veth9000", 6.0, 5.0)):
            R[f"{p}/rsocket/iperf3_rsocket"] = {"gbps": rs}
            R[f"{p}/rsocket/iperf3_tcp"] = {"gbps": tcp}
            R[f"{p}/rsocket/rstream_rsocket"] = {"rtt_us": 40.0}
            R[f"{p}/rsocket/rstream_tcp"] = {"rtt_us": 50.0}
        rows = {(r.path, r.what, r.target): r.verdict for r in targets.targets(res)}
        what = "iperf3 via librspreload on uroce ÷ iperf3 TCP"
        self.assertEqual(rows[("local", what, "≥ 1.5")], "missed")
        self.assertEqual(rows[("veth9000", what, "≥ 1.0")], "met")
        self.assertEqual(rows[("veth9000", "rstream 64 B RTT ÷ rstream -T s (TCP)", "≤ 1.0")],
                         "met")

    def test_alternatives(self):
        res = results(("local", "veth9000", "veth1500"))
        res["meta"]["alt_paths"] = ["veth9000"]
        R = res["runs"]
        for tool, f, tcp, uro in (("ucx_tag_bw", "gbps", 8.0, 10.0),
                                  ("ucx_tag_lat", "lat_median_us", 5.0, 6.0),
                                  ("fi_pingpong", "gbps", 4.0, 4.0)):
            R[f"veth9000/alt/{tool}/tcp"] = {f: tcp, "repeats": 3}
            R[f"veth9000/alt/{tool}/uroce"] = {f: uro, "repeats": 3}
        R["veth9000/alt/mpi_pingpong/tcp"] = {"gbps": 2.0}
        R["veth9000/alt/mpi_pingpong/uroce"] = None
        rows = {r.what: (r.path, r.value, r.verdict, r.figures)
                for r in targets.targets(res) if r.path in ("veth9000", "veth1500")
                and ":" in r.what}
        self.assertEqual(rows, {
            "UCX tag_bw 1 MiB: rc_verbs on uroce ÷ UCX tcp":
                ("veth9000", 1.25, "met", "10.0 / 8.00 Gb/s, medians of 3 runs"),
            "UCX tag_lat 8 B: rc_verbs on uroce ÷ UCX tcp":
                ("veth9000", 1.2, "missed", "6.00 / 5.00 µs, medians of 3 runs"),
            "fi_pingpong 64K: verbs;ofi_rxm on uroce ÷ libfabric tcp":
                ("veth9000", 1.0, "met", "4.00 / 4.00 Gb/s, medians of 3 runs"),
            "Open MPI ping-pong 1 MiB: UCX on uroce ÷ TCP BTL":
                ("veth9000", None, "n/a", "— / 2.00 Gb/s"),
        })

    def test_legacy_paths(self):
        # a results.json of before issue 15: loopback read as udp, veth as veth1500
        rows = {(r.path, r.target) for r in targets.targets(results(("loopback", "veth")))
                if r.what == "ib_write_bw 64K 1 QP ÷ iperf3 TCP"}
        self.assertEqual(rows, {("loopback", "≥ 3.0"), ("veth", "≥ 0.8")})

    def test_boundaries(self):
        v = targets.VERDICT
        self.assertTrue(v["ge"](2.0, 2.0) and v["le"](0.5, 0.5))
        self.assertFalse(v["lt"](1.0, 1.0))
        self.assertTrue(v["in"](0.8, (0.8, 1.2)) and v["in"](1.2, (0.8, 1.2)))
        self.assertFalse(v["in"](1.21, (0.8, 1.2)))


class AppsBenchTest(unittest.TestCase):
    """bench/apps.sh's result lines (a captured run, a failure's words
    attached to its line)."""

    def test_lines(self):
        r = parsers.apps_bench(sample("apps_bench.txt"))
        self.assertEqual(len(r), 6)
        self.assertEqual(r[0], {"kind": "iser", "where": "host", "n": 65536,
                                "transport": "tcp", "rc": 0, "iops": 15521, "mbs": 1017})
        self.assertEqual(r[3]["rc"], 134)
        self.assertTrue(r[3]["said"].startswith("failed to send read16 command|"))
        self.assertNotIn("said", r[2])
        self.assertEqual(r[4], {"kind": "gloo", "where": "2", "n": 4194304,
                                "transport": "tcp", "rc": 0, "iters": 10,
                                "s": 0.184385, "aborts": 0})
        self.assertIsNone(r[5]["s"])
        self.assertEqual(r[5]["aborts"], 1)

    def test_nothing(self):
        self.assertEqual(parsers.apps_bench("apps.sh: SKIP: needs root\n"), [])


class CliTest(unittest.TestCase):
    """bench/run keeps its command line (others hook options into it)."""

    def test_options(self):
        run = os.path.join(os.path.dirname(HERE), "run")
        out = subprocess.run([sys.executable, run, "--help"], capture_output=True,
                             text=True, check=True).stdout
        for opt in ("--quick", "--build", "--out", "--paths", "--no-profile",
                    "--no-setup", "--report-only", "--cases", "--repeats"):
            self.assertIn(opt, out)

    def test_bad_choices(self):
        run = os.path.join(os.path.dirname(HERE), "run")
        for bad in (["--paths", "loopback,ethernet"], ["--cases", "bw,nonsense"]):
            r = subprocess.run([sys.executable, run, "--no-setup"] + bad,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("unknown", r.stderr)


if __name__ == "__main__":
    unittest.main()
