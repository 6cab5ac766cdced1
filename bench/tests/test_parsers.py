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

from uroce_bench import parsers, targets  # noqa: E402


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

    def test_idle(self):
        self.assertEqual(parsers.idle_rss(sample("idle_qps.txt")), [1616, 2060, 2060])
        self.assertIsNone(parsers.idle_rss("ready qps=16 depth=128\n"))


def results(paths=("loopback",)):
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
        names = [t.what for t in targets.PATH_TARGETS + targets.GLOBAL_TARGETS]
        self.assertEqual(len(names), len(set(names)))
        for t in targets.PATH_TARGETS + targets.GLOBAL_TARGETS:
            self.assertIn(t.how, targets.VERDICT, t.what)
            self.assertEqual(isinstance(t.limit, tuple), t.how == "in", t.what)
        for t in targets.PATH_TARGETS:
            self.assertIn("{p}", t.num[0], t.what)
            self.assertIn("{p}", t.den[0], t.what)

    def test_verdicts(self):
        rows = {(p, what): (val, verdict, detail)
                for p, what, _, val, verdict, detail in
                targets.targets(results(("loopback", "veth")))}
        self.assertEqual(len(rows), 2 * len(targets.PATH_TARGETS) +
                         len(targets.GLOBAL_TARGETS))
        lo = "loopback"
        self.assertEqual(rows[(lo, "ib_write_bw 64K 1 QP ÷ iperf3 TCP")],
                         (4.0, "met", "20.0 / 5.00 Gb/s"))
        self.assertEqual(rows[(lo, "ib_write_bw 64K 1 QP ÷ UDP GSO/GRO")][:2], (0.5, "missed"))
        self.assertEqual(rows[(lo, "CPU-s/GB ib_write_bw ÷ iperf3 TCP")][:2], (0.25, "met"))
        self.assertEqual(rows[(lo, "ib_read_bw 64K ÷ ib_write_bw 64K")][:2], (0.9, "met"))
        self.assertEqual(rows[(lo, "ib_send_bw 64K ÷ ib_write_bw 64K")][:2], (1.5, "missed"))
        self.assertEqual(rows[(lo, "ib_send_lat 2 B ÷ ½ UDP spin RTT")][:2], (1.2, "met"))
        self.assertEqual(rows[(lo, "ib_read_lat 2 B ÷ ½ UDP spin RTT")][:2], (1.4, "met"))
        # a missing or failed run is n/a, never met
        self.assertEqual(rows[(lo, "ib_write_lat 2 B ÷ ½ UDP spin RTT")][:2], (None, "n/a"))
        self.assertEqual(rows[(lo, "ib_write_bw 64K 1024 QPs ÷ 1 QP")][:2], (None, "n/a"))
        self.assertEqual(rows[("—", "RSS per idle RC QP beyond its queues (depth 1)")],
                         (2.0, "met", "2.00 KiB"))
        self.assertEqual(rows[("—", "CPU of 16 connected idle QPs (% of a core)")],
                         (0.5, "met", "0.500 % over 10.0 s"))

    def test_boundaries(self):
        v = targets.VERDICT
        self.assertTrue(v["ge"](2.0, 2.0) and v["le"](0.5, 0.5))
        self.assertFalse(v["lt"](1.0, 1.0))
        self.assertTrue(v["in"](0.8, (0.8, 1.2)) and v["in"](1.2, (0.8, 1.2)))
        self.assertFalse(v["in"](1.21, (0.8, 1.2)))


class CliTest(unittest.TestCase):
    """bench/run keeps its command line (others hook options into it)."""

    def test_options(self):
        run = os.path.join(os.path.dirname(HERE), "run")
        out = subprocess.run([sys.executable, run, "--help"], capture_output=True,
                             text=True, check=True).stdout
        for opt in ("--quick", "--build", "--out", "--paths", "--no-profile",
                    "--no-setup", "--report-only"):
            self.assertIn(opt, out)


if __name__ == "__main__":
    unittest.main()
