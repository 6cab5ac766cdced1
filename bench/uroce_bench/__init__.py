# SPDX-License-Identifier: MIT
"""uroce's benchmark driver as a package (bench/run is its entry point):

    common   paths, sizes, log, Run (a child measured by wait4), Path, fmt
    parsers  the output of perftest, iperf3, qperf and our baselines
    runners  Bench: the runs and the plan that interleaves them
    targets  the targets of issue 6, one table
    report   report.md and the plots
    cli      the command line (bench/run)
"""
