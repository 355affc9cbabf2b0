#!/usr/bin/env python3
"""Compares two scheduler-bench binaries on a noisy machine.

Runs BEFORE and AFTER alternately, ROUNDS times each (so both see the same
load), every benchmark with --benchmark_repetitions=REPS, and prints per
benchmark the median and minimum CPU time of each binary over all its
repetitions, and the ratio after/before of each (below 1 = after is faster).

  bench/scheduler/compare.py BEFORE AFTER [--rounds 3] [--reps 3]
      [--filter REGEX] [--min-time SECONDS]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile


def run(binary, args):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [binary, f"--benchmark_repetitions={args.reps}",
               f"--benchmark_out={out.name}", "--benchmark_out_format=json"]
        if args.filter:
            cmd.append(f"--benchmark_filter={args.filter}")
        if args.min_time:
            cmd.append(f"--benchmark_min_time={args.min_time}")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out.name) as f:
            report = json.load(f)
    times = {}
    for b in report["benchmarks"]:
        if b.get("run_type") == "iteration":
            scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
            times.setdefault(b["run_name"], []).append(b["cpu_time"] * scale)
    return times


def main():
    p = argparse.ArgumentParser()
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--filter", default="")
    p.add_argument("--min-time", default="")
    args = p.parse_args()

    all_times = {"before": {}, "after": {}}
    order = []
    for r in range(args.rounds):
        for side in ("before", "after"):
            print(f"round {r + 1}/{args.rounds}: {side}", file=sys.stderr)
            for name, ts in run(getattr(args, side), args).items():
                if name not in order:
                    order.append(name)
                all_times[side].setdefault(name, []).extend(ts)

    print("| benchmark | before: median / min (ms) | after: median / min (ms) "
          "| after/before: median / min |")
    print("|---|---|---|---|")
    for name in order:
        b, a = all_times["before"][name], all_times["after"][name]
        bm, am = statistics.median(b), statistics.median(a)
        print(f"| {name} | {bm:.3f} / {min(b):.3f} | {am:.3f} / {min(a):.3f} "
              f"| {am / bm:.3f} / {min(a) / min(b):.3f} |")


if __name__ == "__main__":
    main()
