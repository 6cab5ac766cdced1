# SPDX-License-Identifier: MIT
"""report.md written from made-up results: the section of the
shared-address runs and their targets.  Run by ctest (bench.parsers) or
`python3 -m unittest discover bench/tests`."""

import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from uroce_bench import report, targets  # noqa: E402

S64K = 64 * 1024
SECTION = "## One address shared by several processes"


def meta():
    return {"command": "bench/run --quick", "started": "2026-12-01T10:00:00+00:00",
            "duration_s": 90.0, "quick": True, "commit": "abc1234", "nproc": 2,
            "cpu": "test CPU", "kernel": "6.1", "perftest": "6.x", "iperf3": "3.12",
            "loadavg_start": (1.0, 1.0, 1.0), "loadavg_end": (2.0, 2.0, 2.0),
            "paths": ["local"], "qperf": "n/a", "failures": []}


def shared_runs():
    """Dedicated and shared figures: bandwidth 5 % lower shared, latency
    20 % higher, and the shared 1024-QP run failed."""
    return {
        "idle_members": 2,
        f"dedicated/ib_write_bw/{S64K}/1": {"gbps": 20.0},
        f"shared/ib_write_bw/{S64K}/1": {"gbps": 19.0},
        "dedicated/ib_send_lat/2/1": {"t_typical": 6.0},
        "shared/ib_send_lat/2/1": {"t_typical": 7.2},
        f"dedicated/ib_write_bw/{S64K}/1024": {"gbps": 16.0},
        f"shared/ib_write_bw/{S64K}/1024": None,
    }


def render(runs):
    with tempfile.TemporaryDirectory() as d:
        report.report({"runs": runs, "meta": meta()}, d, [])
        with open(os.path.join(d, "report.md")) as f:
            return f.read()


class SharedSectionTest(unittest.TestCase):
    def test_section(self):
        text = render({f"local/ib_write_bw/{S64K}/1": {"gbps": 20.0},
                       "shared": shared_runs()})
        self.assertEqual(text.count(SECTION), 1)
        body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
        self.assertIn("server, client and 2 idle processes on one address", body)
        rows = [line for line in body.splitlines() if line.startswith("| ib_")]
        self.assertEqual(rows, [
            "| ib_write_bw 64K -q 1 (Gb/s) | 20.0 | 19.0 | 0.950 |",
            "| ib_send_lat 2 -q 1 (µs typical) | 6.00 | 7.20 | 1.200 |",
            "| ib_write_bw 64K -q 1024 (Gb/s) | 16.0 | — | — |",
        ])
        # the nested runs are no path's: the loopback table has its one size
        bw = text.split("## Bandwidth vs size — local", 1)[1].split("\n## ", 1)[0]
        self.assertEqual([line.split(" |")[0] for line in bw.splitlines()
                          if line.startswith("| ") and line[2].isdigit()], ["| 64K"])

    def test_targets(self):
        text = render({"shared": shared_runs()})
        tab = text.split("## Targets", 1)[1].split("\n## ", 1)[0]
        cells = (line.strip("| ").split(" | ") for line in tab.splitlines()
                 if "shared ÷" in line)
        # issue | path | measure | target | measured | verdict | figures
        rows = {c[2]: (c[3], c[5], c[6]) for c in cells}
        self.assertEqual(rows, {
            "ib_write_bw 64K 1 QP, shared ÷ dedicated address":
                ("0.9–1.1", "met", "19.0 / 20.0 Gb/s"),
            "ib_send_lat 2 B, shared ÷ dedicated address":
                ("≤ 1.1", "missed", "7.20 / 6.00 µs"),
            "ib_write_bw 64K 1024 QPs, shared ÷ dedicated address":
                ("0.9–1.1", "n/a", "— / 16.0 Gb/s"),
        })

    def test_boundaries(self):
        # within 10 % either way for bandwidth; latency only bounded above
        S = shared_runs()
        S[f"shared/ib_write_bw/{S64K}/1"] = {"gbps": 17.0}
        S["shared/ib_send_lat/2/1"] = {"t_typical": 3.0}
        S[f"shared/ib_write_bw/{S64K}/1024"] = {"gbps": 17.6}
        v = {r.what: (round(r.value, 3), r.verdict) for r in
             targets.targets({"runs": {"shared": S}, "meta": meta()}) if "shared ÷" in r.what}
        self.assertEqual(v, {
            "ib_write_bw 64K 1 QP, shared ÷ dedicated address": (0.85, "missed"),
            "ib_send_lat 2 B, shared ÷ dedicated address": (0.5, "met"),
            "ib_write_bw 64K 1024 QPs, shared ÷ dedicated address": (1.1, "met"),
        })

    def test_no_shared_runs(self):
        # a run without loopback has no such section, and its targets are n/a
        text = render({f"local/ib_write_bw/{S64K}/1": {"gbps": 20.0}})
        self.assertNotIn(SECTION, text)
        self.assertEqual({line.split(" | ")[5] for line in text.splitlines()
                          if "shared ÷" in line}, {"n/a"})


if __name__ == "__main__":
    unittest.main()


class Issue15SectionsTest(unittest.TestCase):
    """The same-host table (local beside udp) and the alternatives'."""

    def runs(self):
        k = f"ib_write_bw/{S64K}/1"
        return {
            f"local/{k}": {"gbps": 60.0, "cpu_s_per_gb": 0.1, "spread": [50.0, 60.0, 70.0],
                           "repeats": 3},
            f"udp/{k}": {"gbps": 30.0, "cpu_s_per_gb": 1.0},
            "local/ib_send_lat/2": {"t_typical": 1.0},
            "udp/ib_send_lat/2": None,
            "veth9000/alt/ucx_tag_bw/tcp": {"gbps": 8.0, "spread": [7.0, 8.0, 9.0]},
            "veth9000/alt/ucx_tag_bw/uroce": {"gbps": 10.0},
            "veth9000/alt/fi_pingpong/uroce": None,
        }

    def render(self):
        m = meta()
        m.update(paths=["local", "udp", "veth9000"], alt_paths=["veth9000"],
                 links={"veth9000": {"link_mtu": 9000, "ib_mtu": 4096, "server": "10.0.0.1"}})
        with tempfile.TemporaryDirectory() as d:
            report.report({"runs": self.runs(), "meta": m}, d, [])
            with open(os.path.join(d, "report.md")) as f:
                return f.read()

    def section(self, text, title):
        self.assertEqual(text.count(title), 1)
        body = text.split(title, 1)[1].split("\n## ", 1)[0]
        return [line for line in body.splitlines() if line.startswith("| ")][1:]

    def test_same_host(self):
        rows = self.section(self.render(), "## Same host:")
        self.assertEqual(rows[0], "| ib_write_bw 64K 1 QP (Gb/s) | 60.0 (50.0–70.0, 3 runs) | "
                                  "30.0 | 2.000 |")
        self.assertIn("| CPU-s/GB ib_write_bw 64K (CPU-s/GB) | 0.10 | 1.00 | 0.100 |", rows)
        self.assertIn("| ib_send_lat 2 B (µs) | 1.00 | failed | — |", rows)

    def test_alternatives(self):
        rows = self.section(self.render(), "## The user's alternatives — veth9000")
        self.assertEqual(rows[0], "| UCX tag_bw 1M (Gb/s) | 8.00 (7.00–9.00, 3 runs) | 10.0 | "
                                  "1.250 |")
        self.assertIn("| fi_pingpong RDM 64K (Gb/s) | — | failed | — |", rows)
        self.assertIn("| UCX tag_lat 8 B (µs median) | — | — | — |", rows)


class EventsSectionTest(unittest.TestCase):
    """The event-driven rows (docs/events.md): ratios to qperf's own
    udp_lat, to the blocking UDP ping-pong and to polling, per path."""

    def test_section(self):
        q = {"udp_lat-2": {"lat_us": 10.0}, "tcp_lat-2": {"lat_us": 12.0},
             "rc_lat-2": {"lat_us": 15.0}, "ud_lat-2": None,
             "rc_rdma_read_lat-2": {"lat_us": 20.0}}
        text = render({
            "local/qperf_events": q,
            "local/events/udp_pp_block/2": {"half_rtt_median": 4.0},
            "local/events/ib_send_lat/2": {"t_typical": 6.0},
            "local/events/ib_read_lat/2": {"t_typical": 16.0},
            f"local/events/ib_send_bw/{S64K}": {"gbps": 40.0},
            f"local/events/ib_send_bw_poll/{S64K}": {"gbps": 50.0},
        })
        head = "## Event-driven (completion channels) — local"
        self.assertEqual(text.count(head), 1)
        body = text.split(head, 1)[1].split("\n## ", 1)[0]
        rows = [line for line in body.splitlines() if line.startswith("| ") and
                not line.startswith("| run")]
        self.assertEqual([r.split(" | ")[-1] for r in rows], [
            "| |", "1.20 |", "1.50 |", "— |", "2.00 |", "1.50 |", "2.00 |", "0.80 |"])
        # no events runs: no section
        self.assertNotIn("## Event-driven", render({}))


class NeighbourSectionTest(unittest.TestCase):
    """A neighbour in another session (docs/progress.md, "The looker"):
    per ping-pong, the median and least share of a core, the median and
    longest stall in ms."""

    def test_section(self):
        def n(share, stall):
            return {"cpu_s": share * 5, "wall_s": 5.0, "stall_s": stall, "share": share}
        text = render({"local/neighbour": {
            "udp_spin": [n(0.98, 0.004), n(0.96, 0.006), n(0.97, 0.005)],
            "uroce": [n(0.40, 2.5), n(0.95, 0.01)]}})
        head = "## A neighbour in another session — local"
        self.assertEqual(text.count(head), 1)
        table = text.split(head, 1)[1].split("| beside", 1)[1].split("\n\n", 1)[0]
        rows = [line for line in table.splitlines() if line.startswith("| ")]
        self.assertEqual(rows, [
            "| the spinning UDP ping-pong | 3 | 0.97, 0.96 | 5.00 ms, 6.00 ms |",
            "| ib_send_lat over uroce | 2 | 0.68, 0.40 | 1255 ms, 2500 ms |"])
        self.assertNotIn("## A neighbour", render({}))


class QperfSectionTest(unittest.TestCase):
    """qperf over uroce (-cm1) runs on the first path only (and on the
    alternatives' path): the other paths say so, and only a run that
    failed says "failed"."""

    def test_not_run_is_not_failed(self):
        m = meta()
        m["paths"] = ["local", "udp", "veth9000"]
        m["qperf"] = "yes"
        runs = {"local/qperf": {"rc_lat-2": {"test": "rc_lat", "size": 2, "lat_us": 5.0}},
                "veth9000/qperf": None}
        with tempfile.TemporaryDirectory() as d:
            report.report({"runs": runs, "meta": m}, d, [])
            with open(os.path.join(d, "report.md")) as f:
                text = f.read()

        def body(p):
            head = f"## qperf over uroce (our librdmacm, `-cm1`) — {p}\n"
            self.assertEqual(text.count(head), 1)
            return text.split(head, 1)[1].split("\n## ", 1)[0]

        self.assertIn("| rc_lat | 2 | 5.00 µs |", body("local"))
        self.assertIn("not run on this path", body("udp"))
        self.assertNotIn("failed", body("udp"))
        self.assertIn("failed (see logs)", body("veth9000"))


class AppsSectionTest(unittest.TestCase):
    """The applications (issue 22): iSER against iSCSI/TCP and gloo's
    ibverbs transport against its TCP one, as ratios, failures said."""

    def runs(self):
        from uroce_bench.apps import NOTES, gloo_key, iser_key
        return {
            iser_key("host", S64K, "tcp"): {"mb_s": 1000.0},
            iser_key("host", S64K, "iser"): {"mb_s": 1300.0},
            iser_key("host", 1 << 20, "tcp"): {"mb_s": 1500.0},
            iser_key("host", 1 << 20, "iser"): None,
            gloo_key(2, "tcp"): {"ms_per_iter": 40.0},
            gloo_key(2, "ibverbs"): {"ms_per_iter": 10.0},
            NOTES: {iser_key("host", 1 << 20, "iser"):
                    {"runs": 2, "failed": 2, "aborts": 0,
                     "said": ["failed to send read16 command|"]},
                    gloo_key(2, "ibverbs"):
                    {"runs": 2, "failed": 1, "aborts": 1, "said": []}},
        }

    def test_section(self):
        with tempfile.TemporaryDirectory() as d:
            report.report({"runs": self.runs(), "meta": meta()}, d, [])
            with open(os.path.join(d, "report.md")) as f:
                text = f.read()
            with open(os.path.join(d, "apps.md")) as f:
                apps = f.read()
        body = text.split("## Applications", 1)[1].split("\n## ", 1)[0]
        self.assertIn("| host | 64K | 1000 | 1300 | 1.300 | ≥ 1.2 |  |", body)
        self.assertIn("| host | 1M | 1500 | failed | — | ≥ 1.2 | failed 2 of 2, "
                      "said: failed to send read16 command |", body)
        self.assertIn("| 2 | 40.0 | 10.0 | 4.000 | ≥ 2.0 | failed 1 of 2, "
                      "1 rank(s) aborted in gloo's destructor |", body)
        # apps.md: the run's header, the issue's targets and the section
        self.assertIn("| iSER ÷ iSCSI/TCP, iscsi-perf 64K (host) | ≥ 1.2 | 1.300 | met |",
                      apps)
        self.assertIn("| gloo allreduce 4 MB, 2 processes: TCP ÷ ibverbs time | ≥ 2.0 | "
                      "4.000 | met |", apps)
        self.assertNotIn("## Same host", apps)

    def test_not_run(self):
        with tempfile.TemporaryDirectory() as d:
            report.report({"runs": {}, "meta": meta()}, d, [])
            self.assertFalse(os.path.exists(os.path.join(d, "apps.md")))


class ScaleSection(unittest.TestCase):
    """Issue 23's section: from cm_scale.json and soak.json when the
    report directory has them, absent otherwise."""

    def cm(self):
        def one(connect, disconnect, rss_kb):
            return {"steps": {"connect": [0, 0, 0, connect],
                              "disconnect": [0, 0, 0, disconnect]},
                    "srv_rss_kb": rss_kb, "srv_fds": 31}
        return {"1000": one(10.0, 5.0, 10240), "100000": one(12.0, 6.0, 409600),
                "5000": {"error": "timed out"}}

    def soak(self):
        return {"minutes": 30.0, "date": "2026-12-01 10:00 UTC", "pass": True,
                "workers": [{"runs": 10, "errors": [], "bytes_verified": 2 ** 31},
                            {"runs": 5, "errors": [], "bytes_verified": 2 ** 31}],
                "kills": [1, 2, 3],
                "faults": {"dropped": 1000, "duplicated": 2000, "reordered": 3000},
                "growth": {"rc.srv": {"rss_base_kib": 8000, "rss_last_kib": 8010,
                                      "fds_base": 20, "fds_last": 20,
                                      "threads_max": 3}}}

    def test_section(self):
        with tempfile.TemporaryDirectory() as d:
            for name, obj in (("cm_scale.json", self.cm()), ("soak.json", self.soak())):
                with open(os.path.join(d, name), "w") as f:
                    json.dump(obj, f)
            report.report({"runs": {}, "meta": meta()}, d, [])
            with open(os.path.join(d, "report.md")) as f:
                text = f.read()
        body = text.split("## Scale (issue 23)", 1)[1].split("\n## ", 1)[0]
        self.assertIn("| 1,000 | 10.0 | 5.0 | 100,000 | 10 | 10.2 | 31 |", body)
        self.assertIn("| 100,000 | 12.0 | 6.0 | 83,333 | 400 | 4.1 | 31 |", body)
        self.assertNotIn("| 5,000 |", body)
        self.assertIn("connect 1.20x, disconnect 1.20x per connection", body)
        self.assertIn("**PASS**, 4.0 GiB verified in 15 runs of 2 workers, "
                      "0 unexpected errors, 3 members SIGKILLed", body)
        self.assertIn("| rc.srv | 8000 | 8010 | 20 | 20 | 3 |", body)

    def test_absent(self):
        with tempfile.TemporaryDirectory() as d:
            report.report({"runs": {}, "meta": meta()}, d, [])
            with open(os.path.join(d, "report.md")) as f:
                self.assertNotIn("## Scale", f.read())
