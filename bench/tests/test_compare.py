# SPDX-License-Identifier: MIT
"""bench/compare.py's verdicts: worse or better only where the ranges of
the interleaved runs do not overlap and the means differ by more than
10 %, for targets of either direction.  Run by ctest (bench.parsers)."""

import importlib.util
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "compare", os.path.join(os.path.dirname(HERE), "compare.py"))
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)


class Verdicts(unittest.TestCase):
    def test_higher_is_better(self):
        self.assertEqual(compare.verdict("≥ 3.0", [1.8, 2.4], [1.4, 1.5]), "**worse**")
        self.assertEqual(compare.verdict("≥ 3.0", [1.4, 1.5], [1.8, 2.4]), "better")
        # overlapping ranges: noise, whatever the means
        self.assertEqual(compare.verdict("≥ 3.0", [1.0, 2.0], [1.5, 1.6]), "same")

    def test_lower_is_better(self):
        self.assertEqual(compare.verdict("≤ 1.0", [4.0, 5.0], [6.7, 6.8]), "**worse**")
        self.assertEqual(compare.verdict("≤ 1 ms", [35.0, 35.5], [30.0, 31.0]), "better")
        # apart, but by less than 10 %
        self.assertEqual(compare.verdict("≤ 0.5", [1.00, 1.01], [1.05, 1.06]), "same")

    def test_rows_reads_the_target_table(self):
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write("| issue | path | measure | target | measured | verdict | detail |\n"
                    "|---|---|---|---|---|---|---|\n"
                    "| 15 | local | ib_write_bw ÷ TCP | ≥ 3.0 | 1.822 | missed | x |\n"
                    "| 22 | — | gloo | ≥ 2.0 | — | n/a | — |\n")
        try:
            r = compare.rows(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(r, {("15", "local", "ib_write_bw ÷ TCP", "≥ 3.0"): 1.822})


if __name__ == "__main__":
    unittest.main()
