"""Unit tests of scripts/lib/benchstat.py (run: scripts/bench-tomcat.sh --self-test, or
python3 -m unittest / pytest in scripts/lib). The truths are independent: published
t-table values, hand-computed intervals, and series built so that the answer is known."""

import csv
import json
import math
import os
import random
import statistics
import tempfile
import unittest

import benchstat as bs
import jitlog


class StudentT(unittest.TestCase):
    # Two-sided 95% critical values from any printed t-table.
    TABLE = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 7: 2.365, 10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042, 100: 1.984}

    def test_quantiles_match_the_table(self):
        for df, want in self.TABLE.items():
            self.assertAlmostEqual(bs.t_quantile(0.975, df), want, places=3, msg=f"df={df}")

    def test_large_df_tends_to_the_normal(self):
        self.assertAlmostEqual(bs.t_quantile(0.975, 100000), 1.95996, places=3)

    def test_cdf_is_symmetric(self):
        for t in (0.3, 1.0, 2.5):
            self.assertAlmostEqual(bs.t_cdf(t, 6) + bs.t_cdf(-t, 6), 1.0, places=12)
        self.assertAlmostEqual(bs.t_cdf(0.0, 3), 0.5, places=12)

    def test_lower_quantile(self):
        self.assertAlmostEqual(bs.t_quantile(0.025, 4), -2.776, places=3)


class Interval(unittest.TestCase):
    def test_hand_computed(self):
        # mean 2, sd 1 (values 1,2,3), n 3: half-width = 4.303 / sqrt(3) = 2.484.
        iv = bs.t_interval([1.0, 2.0, 3.0])
        self.assertAlmostEqual(iv["mean"], 2.0)
        self.assertAlmostEqual(iv["sd"], 1.0)
        self.assertAlmostEqual(iv["halfwidth"], 4.303 / math.sqrt(3), places=3)
        self.assertAlmostEqual(iv["lo"], 2.0 - iv["halfwidth"])

    def test_one_value_knows_nothing(self):
        self.assertTrue(math.isinf(bs.t_interval([5.0])["halfwidth"]))
        self.assertTrue(math.isinf(bs.t_interval([])["halfwidth"]))

    def test_coverage_is_about_95_percent(self):
        # Normal pairs with a known mean: the interval must hold it ~95% of the time.
        rng = random.Random(12)
        hits = 0
        trials = 2000
        for _ in range(trials):
            xs = [rng.gauss(3.0, 2.0) for _ in range(6)]
            iv = bs.t_interval(xs)
            hits += iv["lo"] <= 3.0 <= iv["hi"]
        self.assertGreater(hits / trials, 0.93)
        self.assertLess(hits / trials, 0.97)


class Pairing(unittest.TestCase):
    def test_abba_order(self):
        self.assertEqual([bs.order(i) for i in range(4)], [("A", "B"), ("B", "A"), ("A", "B"), ("B", "A")])

    def test_loss_and_increase(self):
        self.assertAlmostEqual(bs.loss_pct(100.0, 90.0), 10.0)
        self.assertAlmostEqual(bs.increase_pct(20.0, 21.0), 5.0)

    def test_abba_cancels_a_linear_drift(self):
        # The machine slows by 1% a window; B is truly 5% slower. Windows in A B B A
        # order: the mean loss over whole blocks must be close to 5 (to first order).
        rate = lambda w, slow: 1000.0 * (1 - 0.01 * w) * (0.95 if slow else 1.0)
        losses, w = [], 0
        for p in range(8):
            got = {}
            for slot in bs.order(p):
                got[slot] = rate(w, slot == "B")
                w += 1
            losses.append(bs.loss_pct(got["A"], got["B"]))
        self.assertAlmostEqual(statistics.fmean(losses), 5.0, delta=0.1)
        # A B A B order instead would be biased by the drift.
        naive = [bs.loss_pct(rate(2 * p, False), rate(2 * p + 1, True)) for p in range(8)]
        self.assertGreater(abs(statistics.fmean(naive) - 5.0), 0.5)


class Stopping(unittest.TestCase):
    def test_pairs_needed(self):
        # sd 1, target 1: n = 7 gives 2.447 / sqrt(7) = 0.925, n = 6 gives 2.571 / sqrt(6) = 1.05.
        self.assertEqual(bs.pairs_needed(1.0, 1.0), 7)
        # Large n: about (1.96 * sd / target) ** 2.
        self.assertAlmostEqual(bs.pairs_needed(20.0, 1.5), (1.96 * 20 / 1.5) ** 2, delta=5)

    def test_stops_at_target(self):
        self.assertEqual(bs.decide([1.0, 1.1, 0.9, 1.0], target=1.5, min_pairs=4, max_pairs=20), "target")

    def test_not_before_min_pairs_nor_mid_block(self):
        self.assertEqual(bs.decide([1.0, 1.0], 1.5, 4, 20), "continue")
        self.assertEqual(bs.decide([1.0, 1.1, 0.9, 1.0, 1.0], 1.5, 4, 20), "continue")

    def test_wide_continues_then_max(self):
        wide = [10.0, -10.0, 8.0, -8.0]
        self.assertEqual(bs.decide(wide, 1.5, 4, 20), "continue")
        self.assertEqual(bs.decide(wide, 1.5, 4, 4), "max_pairs")

    def test_small_max_lowers_min(self):
        self.assertEqual(bs.decide([1.0, 1.0], 1.5, 4, 2), "max_pairs")


class Back(unittest.TestCase):
    def test_moving_median_ignores_stray_seconds(self):
        base = 100.0
        # Depressed for 10 s, then back, with one stray high second at 3 and one low at 14.
        s = [80.0] * 10 + [100.0] * 10
        s[3] = 120.0
        s[14] = 50.0
        self.assertEqual(bs.time_back(s, 0, base), 10)

    def test_within_two_percent_counts_as_back(self):
        s = [90.0] * 4 + [98.5] * 10
        self.assertEqual(bs.time_back(s, 0, 100.0), 4)
        self.assertIsNone(bs.time_back([97.0] * 20, 0, 100.0))

    def test_event_offset_and_end(self):
        s = [100.0] * 5 + [70.0] * 6 + [100.0] * 9
        self.assertEqual(bs.time_back(s, 5, 100.0), 6)
        self.assertIsNone(bs.time_back(s, 5, 100.0, end=13))


class Files(unittest.TestCase):
    """The CSV -> pairs -> intervals path, on windows built with a known loss."""

    def write_windows(self, path, loss):
        cols = ["comparison", "pair", "slot", "a_config", "b_config", "page", "config", "requests", "duration_s",
                "jvm_user_s", "jvm_sys_s", "sonda_user_s", "sonda_sys_s", "sonda_ns"]
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            for p in range(4):
                for slot in bs.order(p):
                    b = slot == "B"
                    req = 50000.0 * (1 - loss / 100.0 if b else 1.0) * (1 + 0.001 * p)
                    w.writerow({"comparison": "path", "pair": p, "slot": slot, "a_config": "none", "b_config": "path",
                                "page": "hello", "config": "path" if b else "none", "requests": req, "duration_s": 5.0,
                                "jvm_user_s": 0.8 if b else 0.7, "jvm_sys_s": 0.3, "sonda_user_s": 0.05 if b else 0,
                                "sonda_sys_s": 0.02 if b else 0, "sonda_ns": 1e8 * (1 - loss / 100.0) if b else 0})

    def test_windows_to_intervals(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "w.csv")
            self.write_windows(path, 4.0)
            rows = bs.read_windows(path)
            self.assertEqual(len(bs.pairs_of(rows, "path")), 4)
            c = bs.compare(rows, "path")
            self.assertAlmostEqual(c["metrics"]["rps"]["mean"], 4.0, places=6)
            self.assertAlmostEqual(c["metrics"]["rps"]["halfwidth"], 0.0, places=6)
            # sonda: 0.096 s over 48000 * (1 + 0.001 p) requests, none has 0.
            want = statistics.fmean(9.6e4 / (48000.0 * (1 + 0.001 * p)) for p in range(4))
            self.assertAlmostEqual(c["metrics"]["sonda_us_per_req"]["mean"], want, places=9)
            stops = os.path.join(d, "s.csv")
            with open(stops, "w") as f:
                f.write("comparison,stop\npath,target\n")
            settings = os.path.join(d, "settings.json")
            with open(settings, "w") as f:
                json.dump({"window_s": 5}, f)
            out = os.path.join(d, "out.json")
            bs.cmd_summary(path, stops, settings, out)
            with open(out) as f:
                got = json.load(f)
            self.assertEqual(got["comparisons"][0]["stop"], "target")
            self.assertEqual(got["comparisons"][0]["pairs"], 4)

    def test_attach_rounds(self):
        # 1 sample a second; baseline 100 req/s for 20 s, attach: 60 for 5 s then 90
        # (a 10% loss), detach at 50: 70 for 8 s, then 100 again.
        with tempfile.TemporaryDirectory() as d:
            samples, events = os.path.join(d, "samples.csv"), os.path.join(d, "events.csv")
            rate = lambda s: 100 if s < 20 else (60 if s < 25 else (90 if s < 50 else (70 if s < 58 else 100)))
            with open(samples, "w") as f:
                f.write("t,wchar,utime,stime,logs,busy\n")
                total = 0
                for s in range(91):
                    # A burst of log lines at the attach must not count as requests.
                    logs = 0 if s < 21 else 5000
                    f.write(f"{1000 + s},{total * 10 + logs},{s},{s},{logs},{3 * s}\n")
                    total += rate(s)
            with open(events, "w") as f:
                f.write("round,event,t\n1,baseline,1000\n1,attach,1019.5\n1,ready,1020\n1,detach,1050\n1,detached,1050.5\n1,end,1090\n")
            settings = os.path.join(d, "settings.json")
            with open(settings, "w") as f:
                json.dump({"bytes_per_request": 10, "clock_ticks": 100}, f)
            out = os.path.join(d, "out.json")
            bs.cmd_attach(samples, events, settings, out, os.path.join(d, "sec.csv"))
            with open(out) as f:
                r = json.load(f)["rounds"][0]
            self.assertEqual(r["baseline_median_rps"], 100)
            self.assertEqual(r["attached_median_rps"], 90)
            self.assertAlmostEqual(r["attached_loss_pct"], 10.0)
            self.assertEqual(r["seconds_to_attached_level"], 5)
            self.assertEqual(r["seconds_back_after_detach"], 8)
            # 90 is never within 2% of 100.
            self.assertIsNone(r["seconds_to_baseline_while_attached"])


class JitLog(unittest.TestCase):
    """Lines as JDK 17 writes them with -Xlog:jit+compilation=debug:file=...:timemillis."""

    LINES = [
        "[1796161779912ms]    1       3       java.lang.Object::<init> (1 bytes)\n",
        "[1796161779918ms]    8       3       D$A::f (4 bytes)   made not entrant\n",
        "[1796161779927ms]   10 %     3       D::run @ 4 (27 bytes)   made not entrant\n",
        "[1796161781000ms]   11       4       D::run (27 bytes)\n",
        "not a compilation line\n",
    ]

    def test_parse_and_count(self):
        compiles, not_entrant = jitlog.parse(self.LINES)
        self.assertEqual(len(compiles), 2)
        self.assertEqual(len(not_entrant), 2)
        self.assertEqual(jitlog.count(compiles, 1796161779.9, 1796161780.0), 1)
        self.assertEqual(jitlog.count(not_entrant, 1796161779.918, 1796161779.927), 1)

    def test_gc_pauses(self):
        lines = [
            "[1796161772124ms] GC(12) Pause Young (Normal) (G1 Evacuation Pause) 100M->20M(256M) 3.456ms\n",
            "[1796161772200ms] GC(13) Concurrent Mark Cycle 12.000ms\n",
            "[1796161773000ms] GC(14) Pause Full (G1 Compaction Pause) 250M->240M(256M) 150.5ms\n",
            "[1796161773001ms] Using G1\n",
        ]
        pauses = jitlog.parse_gc(lines)
        self.assertEqual(len(pauses), 2)
        n, ms = jitlog.pause_ms(pauses, 1796161772.0, 1796161774.0)
        self.assertEqual(n, 2)
        self.assertAlmostEqual(ms, 153.956)


if __name__ == "__main__":
    unittest.main()
