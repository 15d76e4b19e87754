#!/usr/bin/env python3
"""The model-accuracy table of tests/tests/e2e/model_accuracy.rs, offline: from the
recordings and CSVs a run kept with SONDA_MODEL_ACCURACY_KEEP=DIR, rebuilds each
model with `sonda model --run-queues` and solves it as the test does (LINE's LDES with
the worker pool's region, tests/python/ldes_with_regions.py), to study a model
without re-recording.

usage: model-accuracy-offline.py DIR SONDA VENV [EXTRA sonda model ARGS...]

With SKIP=SECS: the first SECS of load (from the first call) are left out of both
sides, the model with `--from`, the measurement by each call's start (the test
leaves out 1 s: SKIP=1 redoes its table from runs it kept).

With BASELINE=1: the default model instead (one processor-sharing station, no
worker pool) solved with LINE's MVA, as the test did before the run-queue model.
"""

import csv
import json
import os
import subprocess
import sys

CLASSES = ["browse", "search", "checkout"]
TAGS = ["330", "550", "770", "hog-330", "hog-550", "hog-770"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measured(path, cpus, skip_s=0.0):
    rows = []
    with open(path) as f:
        r = csv.reader(f)
        next(r)
        for x in r:
            rows.append((x[0], int(x[2]), int(x[3]), int(x[4])))
    start = min(r[1] for r in rows) + skip_s * 1e9
    rows = [r for r in rows if r[1] >= start]
    first = min(r[1] for r in rows)
    last = max(r[1] + r[2] for r in rows)
    span = (last - first) / 1e9
    out = {}
    for c in CLASSES:
        cc = [r for r in rows if r[0] == c]
        n = len(cc)
        out[c] = (sum(r[2] for r in cc) / n / 1e9, n / span, sum(r[3] for r in cc) / 1e9 / span / cpus)
    return out


def predicted(venv, jsimg, cpus, samples):
    out = subprocess.run([os.path.join(venv, "bin/python"), os.path.join(ROOT, "tests/python/ldes_with_regions.py"),
                          jsimg, "1", str(samples)], check=True, capture_output=True, text=True).stdout
    x, u, q = {}, {}, {}
    for line in out.splitlines()[1:]:
        f = line.split(",")
        c = f[1].rsplit("::", 1)[-1]
        if f[0] == "Source":
            x[c] = float(f[7])
        elif f[0] == "Blocked" or f[0].startswith("CPU"):
            q[c] = q.get(c, 0.0) + float(f[2])
            if f[0].startswith("CPU"):
                u[c] = u.get(c, 0.0) + float(f[3]) / cpus
    return {c: (q.get(c, 0.0) / x[c], x[c], u.get(c, 0.0)) for c in CLASSES}


def predicted_mva(venv, jsimg):
    out = subprocess.run([os.path.join(venv, "bin/line"), "-f", jsimg, "-s", "mva", "-a", "avg", "-o", "csv"],
                         check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    start = [i for i, l in enumerate(lines) if l.startswith("Station,JobClass")][0] + 1
    p = {}
    for line in lines[start:]:
        f = line.split(",")
        if len(f) != 8:
            continue
        e = p.setdefault(f[1].rsplit("::", 1)[-1], [0.0, 0.0, 0.0])
        if f[0] == "Source":
            e[1] = float(f[7])
        elif f[0] == "CPU":
            e[2] = float(f[3])
            e[0] += float(f[5])
        elif f[0] == "Blocked":
            e[0] += float(f[5])
    return {c: tuple(p[c]) for c in CLASSES}


def main():
    d, sonda, venv = sys.argv[1:4]
    extra = sys.argv[4:]
    cpus = float(os.cpu_count() or 2)
    samples = int(os.environ.get("LDES_SAMPLES", "1000000"))
    worst = 0.0
    for tag in TAGS:
        trace = os.path.join(d, f"{tag}.trace")
        if not os.path.exists(trace):
            continue
        baseline = os.environ.get("BASELINE") == "1"
        jsimg = os.path.join(d, f"{tag}.{'baseline' if baseline else 'offline'}.jsimg")
        opts = [] if baseline else ["--run-queues"]
        skip = float(os.environ.get("SKIP", "0"))
        if skip > 0:
            doc = json.loads(subprocess.run([sonda, "services", trace, "--format", "json"], check=True,
                                            capture_output=True, text=True).stdout)
            opts += ["--from", f"{doc['whole']['begin_s'] + skip:.9f}s"]
        subprocess.run([sonda, "model", trace, "-o", jsimg] + opts + extra, check=True, capture_output=True)
        m = measured(os.path.join(d, f"{tag}.csv"), cpus, skip)
        p = predicted_mva(venv, jsimg) if baseline else predicted(venv, jsimg, cpus, samples)
        for c in CLASSES:
            e = [(p[c][i] - m[c][i]) / m[c][i] * 100 for i in range(3)]
            worst = max(worst, abs(e[0]))
            print(f"{tag:8} {c:9} R {m[c][0]*1e3:.3f}/{p[c][0]*1e3:.3f} ms ({e[0]:+.1f}%)  "
                  f"X {m[c][1]:.1f}/{p[c][1]:.1f} ({e[1]:+.1f}%)  U {m[c][2]:.4f}/{p[c][2]:.4f} ({e[2]:+.1f}%)",
                  flush=True)
    print(f"worst |R error| {worst:.1f}%")


if __name__ == "__main__":
    main()
