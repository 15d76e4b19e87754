#!/usr/bin/env python3
"""The statistics of scripts/bench-tomcat.sh (Python's standard library only).

Why a file of its own: the pairing, the interval, the stopping rule and "back within 2%"
decide what the benchmark claims, so they live in one place with unit tests
(scripts/lib/test_benchstat.py, run by `scripts/bench-tomcat.sh --self-test` or pytest)
instead of inside shell arithmetic.

- Windows are measured in pairs: one window of configuration A (the baseline) next to one
  of B, in the order A B, B A, A B, ... (pairs of pairs form A B B A, which cancels a
  linear drift of the machine's speed).
- Each pair gives one figure per metric: the relative change of B against A in percent
  (a throughput loss is 100 * (1 - B/A), a CPU increase 100 * (B/A - 1)), or the
  difference B - A for figures in microseconds.
- The interval is Student's t-interval over the pairs' figures (mean +- t(0.975, n-1) *
  sd / sqrt(n)): the pairs are independent draws of the same paired difference. t comes
  from the regularised incomplete beta function, so no table and no numpy is needed.
- Stopping: after an even number of pairs (whole A B B A blocks), at least MIN_PAIRS,
  stop when the interval's half-width of the throughput loss is at most TARGET points,
  or when MAX_PAIRS pairs are done, and say which.
- "Back" after an event (attach or detach) in a per-second series: the first second s
  at or after the event that is itself at least (1 - 2%) of the reference level (the
  median of the baseline) and from which the median of the next 5 seconds (s .. s+4)
  is too; the time back is s minus the event's second. A median of 5 s ignores one or two stray seconds (a GC,
  another engineer's burst) that a single-second rule would take for a recovery or a
  relapse.

Commands (used by the shell script):
  benchstat.py check WINDOWS.CSV COMPARISON TARGET MIN_PAIRS MAX_PAIRS
      prints "continue|target|max_pairs n mean halfwidth" for the throughput loss
  benchstat.py summary WINDOWS.CSV ATTACHES.CSV SETTINGS.JSON OUT.JSON
      prints the table, writes the JSON
  benchstat.py attach SAMPLES.CSV EVENTS.CSV SETTINGS.JSON OUT.JSON SECONDS.CSV
      per-second throughput around each attach and detach, times back, JSON and table
"""

import csv
import json
import math
import statistics
import sys

CONFIDENCE = 0.95

# --- Student's t ---------------------------------------------------------------------


def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (Lentz's method)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = tiny if abs(d) < tiny else d
    d = 1.0 / d
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betai(a, b, x):
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log(1.0 - x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t, df):
    """P(T <= t) for Student's t with df degrees of freedom."""
    x = df / (df + t * t)
    tail = 0.5 * _betai(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p, df):
    """The p-quantile of Student's t (bisection on t_cdf; p in (0, 1))."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile({p}, {df})")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def t_interval(values, confidence=CONFIDENCE):
    """Mean and t-interval of values: dict with n, mean, sd, halfwidth, lo, hi.

    With fewer than two values the half-width is infinite (nothing is known yet)."""
    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "sd": None, "halfwidth": math.inf, "lo": None, "hi": None}
    mean = statistics.fmean(values)
    if n < 2:
        return {"n": 1, "mean": mean, "sd": None, "halfwidth": math.inf, "lo": None, "hi": None}
    sd = statistics.stdev(values)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "sd": sd, "halfwidth": half, "lo": mean - half, "hi": mean + half}


# --- pairing and stopping ------------------------------------------------------------


def order(pair):
    """The order of the two windows of pair number `pair` (0-based): A B, then B A."""
    return ("A", "B") if pair % 2 == 0 else ("B", "A")


def loss_pct(a, b):
    """Throughput loss of B against A in percent (positive: B is slower)."""
    return 100.0 * (1.0 - b / a)


def increase_pct(a, b):
    """Increase of B over A in percent (positive: B costs more)."""
    return 100.0 * (b / a - 1.0)


def pairs_needed(sd, target):
    """Pairs for a 95% half-width of `target` when pair figures have standard deviation
    sd (the smallest n with t(0.975, n-1) * sd / sqrt(n) <= target)."""
    if sd <= 0:
        return 2
    n = 2
    while t_quantile(0.975, n - 1) * sd / math.sqrt(n) > target:
        n = n * 2 if n < 1_000_000 else n + 1_000_000
        if n > 10_000_000:
            return n
    lo, hi = n // 2, n
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        if t_quantile(0.975, mid - 1) * sd / math.sqrt(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def decide(losses, target, min_pairs, max_pairs):
    """Whether to stop after these pairs: "target", "max_pairs" or "continue".

    Stops only after whole A B B A blocks (an even count) and at least min_pairs
    (lowered to max_pairs when that is smaller)."""
    n = len(losses)
    if n >= max_pairs:
        return "max_pairs"
    if n < min(min_pairs, max_pairs) or n % 2:
        return "continue"
    if t_interval(losses)["halfwidth"] <= target:
        return "target"
    return "continue"


# --- windows and pairs ---------------------------------------------------------------

# Per-window figures (columns computed from the CSV) whose pair figure is B - A in their
# own unit (us per request); every other metric's pair figure is a relative change.
ABSOLUTE = ("sonda_us_per_req",)

# metric -> (how to pair, label); "loss" means 100 * (1 - B/A).
METRICS = {
    "rps": ("loss", "throughput loss, %"),
    "jvm_us_per_req": ("increase", "JVM CPU per request, % more"),
    "jvm_user_us_per_req": ("increase", "JVM user CPU per request, % more"),
    "jvm_sys_us_per_req": ("increase", "JVM system CPU per request, % more"),
    "server_us_per_req": ("increase", "JVM + sonda CPU per request, % more"),
    "sonda_us_per_req": ("difference", "sonda CPU per request, us"),
}


def read_windows(path):
    """The per-window rows of the CSV, with the derived per-request figures as floats."""
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            req = float(row["requests"])
            dur = float(row["duration_s"])
            r = dict(row)
            r["pair"] = int(row["pair"])
            r["requests"] = req
            r["rps"] = req / dur if dur > 0 else 0.0
            for key in ("jvm_user_s", "jvm_sys_s", "sonda_user_s", "sonda_sys_s", "sonda_ns"):
                r[key] = float(row[key])
            per = 1e6 / req if req else math.nan
            r["jvm_user_us_per_req"] = r["jvm_user_s"] * per
            r["jvm_sys_us_per_req"] = r["jvm_sys_s"] * per
            r["jvm_us_per_req"] = (r["jvm_user_s"] + r["jvm_sys_s"]) * per
            # sonda's own CPU from its threads' schedstat (ns): 10 ms ticks are too
            # coarse for a few tens of ms per window.
            r["sonda_us_per_req"] = r["sonda_ns"] / 1e3 / req if req else math.nan
            r["server_us_per_req"] = r["jvm_us_per_req"] + r["sonda_us_per_req"]
            rows.append(r)
    return rows


def pairs_of(rows, comparison):
    """[(A row, B row)] of one comparison, by pair number, complete pairs only."""
    by_pair = {}
    for r in rows:
        if r["comparison"] == comparison:
            by_pair.setdefault(r["pair"], {})[r["slot"]] = r
    return [(p["A"], p["B"]) for _, p in sorted(by_pair.items()) if "A" in p and "B" in p]


def pair_figure(kind, a, b):
    """One pair's figure for a metric paired by `kind`."""
    if kind == "loss":
        return loss_pct(a, b)
    if kind == "increase":
        return increase_pct(a, b)
    return b - a


def compare(rows, comparison):
    """Every metric's interval over the pairs of one comparison, and each side's means."""
    pairs = pairs_of(rows, comparison)
    out = {"pairs": len(pairs), "metrics": {}, "A": {}, "B": {}}
    for metric, (kind, label) in METRICS.items():
        figures = [
            pair_figure(kind, a[metric], b[metric])
            for a, b in pairs
            if kind == "difference" or a[metric] > 0
        ]
        iv = t_interval(figures)
        iv["label"] = label
        iv["pairing"] = kind
        iv["values"] = figures
        out["metrics"][metric] = iv
        for side, idx in (("A", 0), ("B", 1)):
            vals = [p[idx][metric] for p in pairs]
            out[side][metric] = statistics.median(vals) if vals else None
    return out


def losses_of(rows, comparison):
    """The throughput loss of each complete pair of one comparison."""
    return [loss_pct(a["rps"], b["rps"]) for a, b in pairs_of(rows, comparison)]


# --- per-second series: "back within 2%" ---------------------------------------------


def moving_median(series, start, width=5):
    """Median of series[start:start+width], None when fewer than width values remain."""
    part = series[start : start + width]
    if len(part) < width:
        return None
    return statistics.median(part)


def time_back(series, event, reference, tol=0.02, width=5, end=None):
    """Seconds from index `event` until throughput is back: the first s >= event (and
    s + width <= end) that is itself at least (1 - tol) * reference and from which the
    median of `width` seconds (s .. s+width-1) is too. None when that never happens
    before `end`."""
    end = len(series) if end is None else end
    floor = (1.0 - tol) * reference
    for s in range(max(event, 0), end - width + 1):
        m = moving_median(series[:end], s, width)
        if series[s] >= floor and m is not None and m >= floor:
            return s - event
    return None


# --- commands --------------------------------------------------------------------------


def cmd_check(path, comparison, target, min_pairs, max_pairs):
    losses = losses_of(read_windows(path), comparison)
    verdict = decide(losses, float(target), int(min_pairs), int(max_pairs))
    iv = t_interval(losses)
    mean = "nan" if iv["mean"] is None else f"{iv['mean']:.2f}"
    half = "inf" if math.isinf(iv["halfwidth"]) else f"{iv['halfwidth']:.2f}"
    print(f"{verdict} {len(losses)} {mean} {half}")


def _fmt_iv(iv, digits=2):
    if iv["mean"] is None:
        return "-"
    if math.isinf(iv["halfwidth"]):
        return f"{iv['mean']:+.{digits}f} (1 pair)"
    return f"{iv['mean']:+.{digits}f} ± {iv['halfwidth']:.{digits}f}"


def _num(x, fmt):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _jsonable(obj):
    """JSON has no infinity: an unknown half-width becomes null."""
    if isinstance(obj, float) and (math.isinf(obj) or math.isnan(obj)):
        return None
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_jsonable(v) for v in obj]
    return obj


def cmd_summary(windows_csv, stops_csv, settings_json, out_json):
    rows = read_windows(windows_csv)
    with open(settings_json) as f:
        settings = json.load(f)
    target = float(settings.get("target", 1.5))
    stops = {}
    with open(stops_csv, newline="") as f:
        for row in csv.DictReader(f):
            stops[row["comparison"]] = row
    comparisons = []
    for name in dict.fromkeys(r["comparison"] for r in rows):
        c = compare(rows, name)
        first = next(r for r in rows if r["comparison"] == name)
        c["name"] = name
        c["a_config"] = first["a_config"]
        c["b_config"] = first["b_config"]
        c["page"] = first["page"]
        c["stop"] = stops.get(name, {}).get("stop", "interrupted")
        comparisons.append(c)
    result = {"settings": settings, "interval": "Student t, 95%, over pairs", "comparisons": comparisons}
    with open(out_json, "w") as f:
        json.dump(_jsonable(result), f, indent=1)
        f.write("\n")

    print(
        "Medians per window (A = baseline, B = compared); JVM CPU per request = utime+stime of "
        "the JVM (/proc/PID/stat) / requests; sonda's from its threads' schedstat."
    )
    head = f"{'comparison':<12} {'side':<4} {'config':<12} {'req/s':>9} {'JVM us/req':>10} {'user':>6} {'sys':>6} {'sonda us/req':>12}"
    print(head)
    for c in comparisons:
        for side, cfg in (("A", c["a_config"]), ("B", c["b_config"])):
            m = c[side]
            print(
                f"{c['name']:<12} {side:<4} {cfg:<12} {_num(m['rps'], '9.0f')} {_num(m['jvm_us_per_req'], '10.2f')} "
                f"{_num(m['jvm_user_us_per_req'], '6.2f')} {_num(m['jvm_sys_us_per_req'], '6.2f')} {_num(m['sonda_us_per_req'], '12.3f')}"
            )
    print()
    print(
        "B against A, paired windows: mean ± half-width of the 95% t-interval over pairs "
        "(A/A rows are the noise floor)."
    )
    print(
        f"{'comparison':<12} {'pairs':>5} {'stopped by':<10} {'loss %':>15} {'JVM CPU/req %':>15} "
        f"{'user %':>15} {'sys %':>15} {'JVM+sonda %':>15} {'sonda us/req':>17}"
    )
    for c in comparisons:
        m = c["metrics"]
        print(
            f"{c['name']:<12} {c['pairs']:>5} {c['stop']:<10} {_fmt_iv(m['rps']):>15} {_fmt_iv(m['jvm_us_per_req']):>15} "
            f"{_fmt_iv(m['jvm_user_us_per_req']):>15} {_fmt_iv(m['jvm_sys_us_per_req']):>15} "
            f"{_fmt_iv(m['server_us_per_req']):>15} {_fmt_iv(m['sonda_us_per_req'], 3):>17}"
        )
    floors = [c for c in comparisons if c["a_config"] == c["b_config"]]
    for c in floors:
        iv = c["metrics"]["rps"]
        if iv["mean"] is not None and not math.isinf(iv["halfwidth"]):
            print(
                f"noise floor ({c['name']} against itself, {c['pairs']} pairs): a loss of {iv['mean']:+.2f} ± "
                f"{iv['halfwidth']:.2f} points; pair losses had a standard deviation of {iv['sd']:.2f} points, "
                f"so a half-width of {target:g} would take about {pairs_needed(iv['sd'], target)} pairs"
            )


def per_second(samples):
    """Per-second requests and CPU from cumulative samples (one row a second or so), at
    each sample after the first: requests/s (the JVM's writes less its log files' growth,
    over the bytes of one response), the JVM's CPU and the rest of the machine's busy
    CPU (seconds per second)."""
    out = []
    for prev, cur in zip(samples, samples[1:]):
        dt = cur["t"] - prev["t"]
        if dt <= 0:
            continue
        out.append(
            {
                "start": prev["t"],
                "t": cur["t"],
                "rps": (cur["wchar"] - prev["wchar"] - (cur["logs"] - prev["logs"])) / cur["bytes_per_req"] / dt,
                "jvm_cpu": (cur["jvm_ticks"] - prev["jvm_ticks"]) / cur["hz"] / dt,
                "other_cpu": (cur["busy"] - prev["busy"] - (cur["jvm_ticks"] - prev["jvm_ticks"])) / cur["hz"] / dt,
            }
        )
    return out


def cmd_attach(samples_csv, events_csv, settings_json, out_json, seconds_csv):
    with open(settings_json) as f:
        settings = json.load(f)
    tol = float(settings.get("tolerance", 0.02))
    bpr = float(settings["bytes_per_request"])
    hz = float(settings.get("clock_ticks", 100))
    samples = []
    with open(samples_csv, newline="") as f:
        for row in csv.DictReader(f):
            samples.append(
                {
                    "t": float(row["t"]),
                    "wchar": float(row["wchar"]),
                    "jvm_ticks": float(row["utime"]) + float(row["stime"]),
                    "logs": float(row["logs"]),
                    "busy": float(row["busy"]),
                    "bytes_per_req": bpr,
                    "hz": hz,
                }
            )
    series = per_second(samples)
    t0 = samples[0]["t"]
    events = []
    with open(events_csv, newline="") as f:
        for row in csv.DictReader(f):
            events.append({"round": int(row["round"]), "event": row["event"], "t": float(row["t"])})
    with open(seconds_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["second", "t", "requests_per_s", "jvm_cpu_per_s", "other_cpu_per_s"])
        for i, s in enumerate(series):
            w.writerow([i, f"{s['t'] - t0:.3f}", f"{s['rps']:.1f}", f"{s['jvm_cpu']:.3f}", f"{s['other_cpu']:.3f}"])
    rps = [s["rps"] for s in series]
    times = [s["t"] for s in series]

    def index_at(t):
        """The first per-second value measured wholly after time t."""
        for i, s in enumerate(series):
            if s["start"] >= t:
                return i
        return len(series)

    def index_after(t):
        """One past the last per-second value measured wholly before time t (the second
        the load stops in is not a measurement: the 7.6k req/s of a second that was 70%
        after wrk's end once showed as the minimum after a detach)."""
        n = 0
        while n < len(series) and series[n]["t"] <= t:
            n += 1
        return n

    rounds = []
    for rnd in sorted({e["round"] for e in events}):
        ev = {e["event"]: e["t"] for e in events if e["round"] == rnd}
        base = rps[index_at(ev["baseline"]) : index_at(ev["attach"])]
        ready_i = index_at(ev["ready"])
        detach_i = index_at(ev["detach"])
        end_i = index_after(ev["end"]) if "end" in ev else len(rps)
        attached = rps[ready_i:detach_i]
        base_med = statistics.median(base) if base else None
        # The level the instrumented server settles at: the median of the attach
        # phase's second half (the first half holds the recompilation).
        steady = attached[len(attached) // 2 :]
        steady_med = statistics.median(steady) if steady else None
        r = {
            "round": rnd,
            "baseline_seconds": len(base),
            "baseline_median_rps": base_med,
            "attach_s": ev["ready"] - ev["attach"],
            "detach_s": ev["detached"] - ev["detach"],
            "attached_median_rps": steady_med,
            "attached_loss_pct": loss_pct(base_med, steady_med) if base_med and steady_med else None,
            "min_rps_after_attach": min(attached) if attached else None,
            "seconds_to_attached_level": time_back(rps, ready_i, steady_med, tol, end=detach_i)
            if steady_med
            else None,
            "seconds_to_baseline_while_attached": time_back(rps, ready_i, base_med, tol, end=detach_i)
            if base_med
            else None,
            "after_seconds": end_i - detach_i,
            "seconds_back_after_detach": time_back(rps, detach_i, base_med, tol, end=end_i)
            if base_med
            else None,
            "min_rps_after_detach": min(rps[detach_i:end_i]) if end_i > detach_i else None,
        }
        rounds.append(r)
    result = {
        "settings": settings,
        "back": f"first second that is, and from which the median of the next 5 s is, >= (1 - {tol:g}) x the reference",
        "rounds": rounds,
        "seconds": [{"t": round(t - t0, 3), "rps": round(v, 1)} for t, v in zip(times, rps)],
    }
    with open(out_json, "w") as f:
        json.dump(_jsonable(result), f, indent=1)
        f.write("\n")
    print(f"'back': the first second that is, and from which the median of the next 5 s is, within {tol * 100:g}% of the reference.")
    print(
        "attached level: the median of the attach phase's second half; 's to ...': seconds after the agent was "
        "ready (or the detach was asked) until throughput is back at that level (or the baseline's)"
    )
    print(
        f"{'round':>5} {'baseline req/s':>14} {'attach s':>8} {'attached req/s':>14} {'loss %':>7} "
        f"{'s to attached level':>19} {'s to baseline':>13} {'min after detach':>16} {'s back after detach':>19} {'detach s':>8}"
    )
    for r in rounds:
        back = r["seconds_back_after_detach"]
        back = f"not in {r['after_seconds']} s" if back is None else str(back)
        settle = r["seconds_to_attached_level"]
        to_base = r["seconds_to_baseline_while_attached"]
        to_base = "never" if to_base is None else str(to_base)
        print(
            f"{r['round']:>5} {_num(r['baseline_median_rps'], '14.0f')} {r['attach_s']:>8.2f} "
            f"{_num(r['attached_median_rps'], '14.0f')} {_num(r['attached_loss_pct'], '7.1f')} "
            f"{'-' if settle is None else settle:>19} {to_base:>13} {_num(r['min_rps_after_detach'], '16.0f')} {back:>19} {r['detach_s']:>8.2f}"
        )


def main(argv):
    commands = {"check": (cmd_check, 5), "summary": (cmd_summary, 4), "attach": (cmd_attach, 5)}
    if len(argv) < 2 or argv[1] not in commands or len(argv) - 2 != commands[argv[1]][1]:
        print(__doc__.split("Commands (used by the shell script):")[1], file=sys.stderr)
        return 2
    fn, _ = commands[argv[1]]
    fn(*argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
