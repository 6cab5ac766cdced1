#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Before and after: the target rows of interleaved bench runs, side by side.

    bench/compare.py --before R1/report.md R3/report.md \\
                     --after R2/report.md R4/report.md [--title T]

Each report.md is one `bench/run` (the same cases and options for all),
run interleaved on one machine: before, after, before, after.  A row is
"worse" when every after run is on the wrong side of every before run
(the ranges do not overlap) and the means differ by more than 10 %;
"better" the other way; otherwise "same" (within the runs' spread).
Prints a markdown table; exits 0.
"""

import argparse
import re
import statistics


def rows(path):
    """{(issue, path, measure, target): value} of a report's target table"""
    out = {}
    with open(path) as f:
        for line in f:
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            if len(c) < 6 or not re.fullmatch(r"\d+", c[0]):
                continue
            try:
                out[(c[0], c[1], c[2], c[3])] = float(c[4])
            except ValueError:
                pass
    return out


def verdict(target, before, after):
    lower = target.startswith("≤")
    mb, ma = statistics.mean(before), statistics.mean(after)
    if not mb:
        return "same"
    rel = ma / mb
    if lower:
        worse = min(after) > max(before) and rel > 1.1
        better = max(after) < min(before) and rel < 0.9
    else:
        worse = max(after) < min(before) and rel < 0.9
        better = min(after) > max(before) and rel > 1.1
    return "**worse**" if worse else "better" if better else "same"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", nargs="+", required=True)
    ap.add_argument("--after", nargs="+", required=True)
    ap.add_argument("--title", default="Before and after")
    a = ap.parse_args()
    before = [rows(p) for p in a.before]
    after = [rows(p) for p in a.after]
    keys = sorted(set().union(*before, *after),
                  key=lambda k: (int(k[0]), k[1], k[2]))
    print(f"# {a.title}\n")
    print(f"{len(a.before)} runs before, {len(a.after)} after, interleaved; "
          "worse/better: the ranges do not overlap and the means differ "
          "by more than 10 %.\n")
    print("| issue | path | measure | target | before | after | |")
    print("|---|---|---|---|---|---|---|")
    for k in keys:
        b = [r[k] for r in before if k in r]
        f = [r[k] for r in after if k in r]
        if not b or not f:
            continue
        fmt = lambda v: ", ".join(f"{x:.3g}" for x in v)
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {fmt(b)} | {fmt(f)} | "
              f"{verdict(k[3], b, f)} |")


if __name__ == "__main__":
    main()
