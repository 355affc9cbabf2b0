#!/usr/bin/python3
"""Prints the trial-throughput table (Markdown) from the JSON that
stoker_side.py and optuna_ceiling.py wrote (run.sh calls it).

usage: report.py STOKER.json [OPTUNA.json]
"""
import json
import sys

GOAL = 2.0  # issue #29: Stoker within 2x of the Optuna ceiling


def fmt_s(v):
    return "-" if v is None else ("%.3f" % v if v < 10 else "%.1f" % v)


def fmt_ms(d, key):
    return "-" if not d else "%.0f" % (d[key] * 1000)


def main():
    stoker = json.load(open(sys.argv[1]))
    optuna = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else None
    c = stoker["config"]
    s_rate = stoker["trials_per_s"]
    print("%d studies x %d trials, parallelTrialCount %d, %s, %s, warm starts %s; %d CPUs, "
          "load average at start %.2f" % (
              c["studies"], c["trials"], c["parallel"], c["algorithm"], c["machine"],
              "on" if c["warm"] else "off", stoker["cpus"], stoker["loadavg_at_start"][0]))
    print()
    print("| run | trials | wall s | trials/s | ratio to Stoker |")
    print("|---|---|---|---|---|")
    print("| Stoker (stokerd, REST, a trainer process per trial) | %d | %s | %.2f | 1 |" % (
        stoker["trials"], fmt_s(stoker["wall_s"]), s_rate))
    ceiling = None
    if optuna:
        for name, r in optuna["rows"].items():
            ratio = r["trials_per_s"] / s_rate if s_rate else float("nan")
            print("| Optuna %s (%s) | %d | %s | %.2f | %.2fx |" % (
                optuna["optuna"], name, r["trials"], fmt_s(r["wall_s"]), r["trials_per_s"], ratio))
        ceiling = optuna["rows"].get("inproc-tpe")
    print()
    lat = stoker.get("trial_start_latency_s")
    print("Stoker per trial, ms (p50 / p90 / p99): start latency (trial's job created -> trainer's "
          "first line) %s / %s / %s; trainer run %s / %s / %s; end overhead (trainer's last line -> "
          "job ended) %s / %s / %s; refill gap (a trial ends -> the next one's job is made) "
          "%s / %s / %s." % tuple(
              fmt_ms(stoker.get(k), q) for k in ("trial_start_latency_s", "trainer_run_s",
                                                  "trial_end_overhead_s", "refill_gap_s")
              for q in ("p50", "p90", "p99")))
    n = stoker.get("start_notes", {})
    print("Starts: %d warm, %d cold, %d without a note. Submitting took %.3f s; first trainer "
          "started %s s after the first POST; stokerd used %s CPU s (%s ms per trial); the machine "
          "was busy %.1f CPU s in all during the run." % (
              n.get("warm", 0), n.get("cold", 0), n.get("none", 0), stoker["submit_s"],
              fmt_s(stoker.get("first_trainer_start_s")), fmt_s(stoker.get("stokerd_cpu_s")),
              "-" if stoker.get("stokerd_cpu_s") is None else
              "%.1f" % (1000 * stoker["stokerd_cpu_s"] / max(1, stoker["trials"])),
              stoker.get("machine_busy_cpu_s", 0)))
    if stoker.get("cold_start_examples"):
        print("Cold start reasons (first few): " + "; ".join(stoker["cold_start_examples"]))
    if lat is None:
        print("(no trainer stamps were found: per-trial timings missing)")
    if ceiling:
        ratio = ceiling["trials_per_s"] / s_rate
        print()
        print("Goal (issue #29): Stoker within %.0fx of the Optuna ceiling (inproc-tpe): "
              "%.1fx -> %s." % (GOAL, ratio, "MET" if ratio <= GOAL else "NOT MET"))
        sub = optuna["rows"].get("subproc-tpe")
        if sub:
            r2 = sub["trials_per_s"] / s_rate
            print("Against Optuna running the same trainer as a subprocess per trial (subproc-tpe, "
                  "%d threads): %.2fx -> %s." % (optuna["workers"], r2,
                                                 "within 2x" if r2 <= GOAL else "beyond 2x"))


if __name__ == "__main__":
    main()
