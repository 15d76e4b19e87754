#!/usr/bin/env python3
"""What the JIT and the GC did around each switch and in each window of
scripts/bench-tomcat.sh, from the JVM's own logs.

Why: a window measured while the JIT recompiles what an attach or a detach deoptimised
measures the recompilation, not the configuration. The JVM runs with
`-Xlog:jit+compilation=debug:file=jit.log:timemillis`, which writes one line per
compilation and one per nmethod "made not entrant" (the same lines as
-XX:+PrintCompilation) stamped with the wall clock in ms, so that they line up with the
script's own times. For every switch (attach, detach) this counts the methods made not
entrant and the compilations in bins of seconds after it, and for every measured window
the compilations inside it: the settle time is long enough when the windows see about
as few compilations as the windows of `none` next to them. The JVM's
`-Xlog:gc:file=gc.log:timemillis` gives every collection's pause: a window whose
configuration allocates more (or a heap filling up) shows as more pause time per second.

usage: jitlog.py JIT.LOG GC.LOG SWITCHES.CSV WINDOWS.CSV OUT.JSON
"""

import bisect
import csv
import json
import re
import sys

LINE = re.compile(r"^\[(\d+)ms\]\s+\d+\s")
# [1796161772124ms] GC(12) Pause Young (Normal) (G1 Evacuation Pause) 100M->20M(256M) 3.456ms
PAUSE = re.compile(r"^\[(\d+)ms\] GC\(\d+\) Pause .* ([0-9.]+)ms$")

# Seconds after a switch ends, as bins [lo, hi).
BINS = [(0, 1), (1, 2), (2, 5), (5, 10), (10, 20), (20, 40)]


def parse(lines):
    """(compile times, not-entrant times), each sorted, in seconds since the epoch."""
    compiles, not_entrant = [], []
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        t = int(m.group(1)) / 1000.0
        (not_entrant if "made not entrant" in line else compiles).append(t)
    compiles.sort()
    not_entrant.sort()
    return compiles, not_entrant


def parse_gc(lines):
    """[(time in seconds since the epoch, pause in ms)] of every GC pause, sorted."""
    pauses = []
    for line in lines:
        m = PAUSE.match(line.rstrip("\n"))
        if m:
            pauses.append((int(m.group(1)) / 1000.0, float(m.group(2))))
    pauses.sort()
    return pauses


def pause_ms(pauses, lo, hi):
    """(count, total ms) of the pauses that started in [lo, hi)."""
    inside = [ms for t, ms in pauses if lo <= t < hi]
    return len(inside), sum(inside)


def count(times, lo, hi):
    """How many of the sorted times fall in [lo, hi)."""
    return bisect.bisect_left(times, hi) - bisect.bisect_left(times, lo)


def main(argv):
    if len(argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    log, gc_log, switches_csv, windows_csv, out_json = argv[1:]
    with open(log, errors="replace") as f:
        compiles, not_entrant = parse(f)
    with open(gc_log, errors="replace") as f:
        pauses = parse_gc(f)
    switches = []
    with open(switches_csv, newline="") as f:
        for row in csv.DictReader(f):
            start, done = float(row["t_start"]), float(row["t_done"])
            s = {
                "n": int(row["n"]),
                "from": row["from"],
                "to": row["to"],
                "took_s": round(done - start, 3),
                "not_entrant": count(not_entrant, start, done + 1.0),
                "compiles_during": count(compiles, start, done),
                "compiles_after": {f"{lo}-{hi}s": count(compiles, done + lo, done + hi) for lo, hi in BINS},
            }
            switches.append(s)
    windows = []
    with open(windows_csv, newline="") as f:
        for row in csv.DictReader(f):
            lo, hi = float(row["start_unix"]), float(row["start_unix"]) + float(row["duration_s"])
            gcs, gc_ms = pause_ms(pauses, lo, hi)
            windows.append(
                {
                    "comparison": row["comparison"],
                    "pair": int(row["pair"]),
                    "config": row["config"],
                    "compiles_per_s": count(compiles, lo, hi) / max(hi - lo, 1e-9),
                    "not_entrant": count(not_entrant, lo, hi),
                    "gc_pauses": gcs,
                    "gc_pause_ms_per_s": gc_ms / max(hi - lo, 1e-9),
                }
            )
    with open(out_json, "w") as f:
        json.dump({"switches": switches, "windows": windows}, f, indent=1)
        f.write("\n")
    print("JIT around each switch (jit.log): methods made not entrant, compilations during and after it")
    print(f"{'n':>3} {'switch':<16} {'took s':>6} {'not entrant':>11} {'during':>6} " + " ".join(f"{lo}-{hi}s".rjust(7) for lo, hi in BINS))
    for s in switches:
        print(
            f"{s['n']:>3} {s['from'] + '>' + s['to']:<16} {s['took_s']:>6.2f} {s['not_entrant']:>11} {s['compiles_during']:>6} "
            + " ".join(str(v).rjust(7) for v in s["compiles_after"].values())
        )
    by_config = {}
    for w in windows:
        by_config.setdefault((w["comparison"], w["config"]), []).append(w)
    if by_config:
        print("Inside the measured windows: compilations per second (mean), methods made not entrant (sum), GC pauses (sum) and pause ms per second (mean)")
        print(f"    {'comparison':<12} {'config':<12} {'compiles':>9} {'not entrant':>11} {'GCs':>6} {'GC ms/s':>8}")
    for (comp, cfg), ws in by_config.items():
        mean = sum(w["compiles_per_s"] for w in ws) / len(ws)
        gc_ms = sum(w["gc_pause_ms_per_s"] for w in ws) / len(ws)
        print(
            f"    {comp:<12} {cfg:<12} {mean:7.1f}/s {sum(w['not_entrant'] for w in ws):11} "
            f"{sum(w['gc_pauses'] for w in ws):6} {gc_ms:8.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
