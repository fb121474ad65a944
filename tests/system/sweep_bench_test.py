#!/usr/bin/env python3
"""The pure parts of bench/gpu/sweep_bench.py, without a GPU: the cell
matrix, each cell's plan, the safety check, the target's judgement and the
dry run (issue 44, item 6). Run by `meson test bench-sweep-selftest`."""
import argparse
import contextlib
import io
import os
import sys
import tempfile
import unittest
from unittest import mock

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "gpu")
sys.path.insert(0, BENCH)
import sweep_bench as sb  # noqa: E402
from oversub_bench import OversubBench, coarsen, job_model, simulate_bound  # noqa: E402

CARD = 143771   # MiB, an H200
HOST = 125 * 1024


def cell(name):
    return next(c for c in sb.make_cells(True) if c["name"] == name)


class Cells(unittest.TestCase):
    def test_the_sweep_crosses_bursts_and_pauses_and_then_styles(self):
        cells = sb.make_cells()
        names = [c["name"] for c in cells]
        self.assertEqual(len(names), len(set(names)))
        per_size = len(sb.BURSTS) * len(sb.PAUSES) + len(sb.STYLES) - 1
        self.assertEqual(len(cells), len(sb.SIZES) * per_size)
        self.assertIn("equal-caching-b0.5-p1", names)
        self.assertIn("unequal-caching-b0.01-p0", names)
        self.assertIn("over-small-b0.5-p1", names)
        self.assertNotIn("triple-growing-b3-p2", names)
        full = sb.make_cells(full_cross=True)
        self.assertEqual(len(full), len(sb.SIZES) * len(sb.STYLES) * len(sb.BURSTS)
                         * len(sb.PAUSES))

    def test_patterns_pick_cells_and_one_that_matches_none_is_an_error(self):
        cells = sb.make_cells()
        got = sb.select(cells, ["triple-*-b0.5-p1", "equal-caching-b3-p2"])
        self.assertEqual([c["name"] for c in got],  # in the sweep's order
                         ["equal-caching-b3-p2", "triple-caching-b0.5-p1",
                          "triple-one-block-b0.5-p1", "triple-small-b0.5-p1",
                          "triple-growing-b0.5-p1"])
        self.assertEqual(sb.select(cells, []), cells)
        with self.assertRaises(ValueError):
            sb.select(cells, ["equal-caching-b7-p1"])


class Plans(unittest.TestCase):
    def test_an_equal_pair_is_1_15_x_the_card_and_does_not_fit_it(self):
        p = sb.plan_cell(cell("equal-caching-b0.5-p1"), CARD, False, 1.0, 500)
        self.assertEqual(p["ws_mib"], [int(0.575 * CARD)] * 2)
        self.assertEqual(p["excess_mib"], 2 * int(0.575 * CARD) + 2 * 500 - CARD)
        self.assertFalse(p["fits"])
        self.assertFalse(p["single_oversub"])
        self.assertEqual(p["capacity_args"], [])
        self.assertEqual(p["steps"], 8)
        self.assertNotIn("--touch-mib", p["jobs"][0])

    def test_a_burst_shorter_than_a_pass_touches_part_of_the_memory(self):
        p = sb.plan_cell(cell("triple-caching-b0.01-p0"), CARD, False, 1.0, 500)
        self.assertEqual(p["steps"], 200)
        j = p["jobs"][0]
        self.assertEqual(j[j.index("--passes") + 1], 1)
        self.assertEqual(j[j.index("--touch-mib") + 1], 10240)  # 10 ms at 1 ms a GiB

    def test_quick_emulates_a_small_card_where_plain_fits(self):
        p = sb.plan_cell(cell("unequal-small-b0.5-p1"), CARD, True, 1.0, 500)
        self.assertEqual(p["capacity_args"], ["--capacity", "4096M"])
        self.assertTrue(p["fits"])
        self.assertLessEqual(p["steps"], 4)
        self.assertEqual(p["jobs"][1][p["jobs"][1].index("--alloc-style") + 1], "small")

    def test_a_process_larger_than_the_card_moves_at_most_the_smaller_one(self):
        p = sb.plan_cell(cell("over-caching-b0.5-p1"), CARD, False, 1.0, 500)
        self.assertTrue(p["single_oversub"])
        self.assertGreater(p["ws_mib"][0], CARD)
        self.assertEqual(p["excess_mib"], p["ws_mib"][1])


class Safety(unittest.TestCase):
    def test_no_cell_of_the_sweep_is_refused_on_an_h200_with_125_gib(self):
        for c in sb.make_cells(True):
            p = sb.plan_cell(c, CARD, False, 1.0, 500)
            self.assertIsNone(sb.refusal(c, p, CARD, HOST, 1.3), c["name"])

    def test_refused_over_half_the_host_over_the_cap_or_too_large_alone(self):
        c = cell("triple-caching-b0.5-p1")
        p = sb.plan_cell(c, CARD, False, 1.0, 500)
        self.assertIn("half the host", sb.refusal(c, p, CARD, 32 * 1024, 1.3))
        self.assertIn("1.2 x", sb.refusal(c, p, CARD, HOST, 1.2))
        big = dict(p, ws_mib=[CARD - 512, 1024])
        self.assertIn("alone", sb.refusal(cell("equal-caching-b0.5-p1"), big, CARD, HOST, 1.3))
        self.assertIsNone(sb.refusal(cell("over-caching-b0.5-p1"), big, CARD, HOST, 1.3))


class Judgement(unittest.TestCase):
    def row(self, name, nv, seq, ser, ovl, ran=True):
        return dict(name=name, nvshare_s=nv, sequential_s=seq, serialized_s=ser,
                    overlapped_s=ovl, nvshare_ran=ran)

    def test_within_the_better_of_sequential_and_serialized_plus_noise(self):
        s = sb.judge([self.row("a", 30.9, 40, 30, 28), self.row("b", 31.0, 40, 30, 28),
                      self.row("c", 20, None, 25, 18), self.row("d", None, 40, 30, 28),
                      self.row("e", None, 40, 30, 28, ran=False)])
        self.assertEqual(s["within"], ["a", "c"])
        self.assertEqual(s["slower"], ["b"])
        self.assertEqual(s["failed"], ["d"])
        self.assertEqual(s["not_judged"], ["e"])
        self.assertEqual(s["judged"], 4)
        self.assertFalse(s["met"])
        self.assertIn("NOT met", sb.summary_line(s, ["f"]))
        self.assertIn("not run: f", sb.summary_line(s, ["f"]))

    def test_the_median_cell_within_1_2_x_the_overlapped_bound(self):
        rows = [self.row("a", 10, 20, 20, 9), self.row("b", 12, 20, 20, 10),
                self.row("c", 15, 20, 20, 10)]
        s = sb.judge(rows)
        self.assertAlmostEqual(s["median_vs_overlapped"], 1.2)
        self.assertTrue(s["median_met"] and s["met"])
        self.assertFalse(sb.judge(rows[1:])["median_met"])  # 1.2, 1.5: median 1.35


class Bound(unittest.TestCase):
    def test_different_jobs_each_as_measured(self):
        def job(g, c, k):
            return {"gpu_s": [g] * k, "steps": [g + c] * (k - 1) + [g], "startup_s": 1.0,
                    "fill_s": 0.0, "verify_s": 0.0, "wall_s": 1.0 + k * g + (k - 1) * c,
                    "total_s": 1.0 + k * g + (k - 1) * c}
        jobs = [job(1.0, 1.0, 3), job(0.5, 1.0, 3)]
        b = OversubBench.bound_from(jobs, 2, 0.2, "torch", each=True)
        t, _ = simulate_bound([(m["startup_s"], m["bursts"])
                               for m in (job_model([j], "torch") for j in jobs)], 0.2)
        self.assertAlmostEqual(b["bound_s"], t)
        self.assertEqual(b["gpu_step_s"], [1.0, 0.5])
        # the larger job's bursts fill the other's pauses: 1 + 5 s, and two switches
        self.assertLess(b["bound_s"], 1 + 5 + 1.5 + 1.0)


    def test_many_steps_are_joined_so_that_the_bound_stays_quick(self):
        bursts = [(0.01, 0.25)] * 199 + [(0.01, 0.0)]
        c = coarsen(bursts, 24)
        self.assertLessEqual(len(c), 24)
        self.assertAlmostEqual(sum(g + p for g, p in c), sum(g + p for g, p in bursts))
        self.assertEqual(c[-1][1], 0.0)
        self.assertEqual(coarsen(bursts[:8], 8), bursts[:8])
        job = {"gpu_s": [0.01] * 200, "steps": [0.26] * 199 + [0.01], "startup_s": 1.0,
               "fill_s": 0.0, "verify_s": 0.0, "wall_s": 53.75, "total_s": 53.75}
        b = OversubBench.bound_from([job] * 3, 3, 0.5, "torch", True, sb.MOST_BURSTS[3])
        self.assertFalse(b["exact"])
        self.assertGreater(b["bound_s"], 53.75)


class Switches(unittest.TestCase):
    def test_only_nvshare_runs_with_the_debug_log_and_only_when_asked(self):
        def env(cfg, switches):
            b = argparse.Namespace(plan=None, a=argparse.Namespace(switches=switches))
            return sb.SweepBench.config_env(b, cfg)
        self.assertEqual(env("nvshare", True).get("NVSHARE_DEBUG"), "1")
        self.assertNotIn("NVSHARE_DEBUG", env("serialized", True))
        self.assertNotIn("NVSHARE_DEBUG", env("nvshare", False))

    def test_the_rates_of_switches_are_the_bound_s_also_when_given(self):
        b = argparse.Namespace(a=argparse.Namespace(swap_gbs=30.0))
        _, ovl, rates = OversubBench.switch_costs(b, 30e9)
        self.assertAlmostEqual(ovl, 1.0)
        self.assertEqual((rates["out_gbs"], rates["in_gbs"], rates["both_gbs_each_way"]),
                         (30.0, 30.0, 30.0))

    def test_a_run_s_switches_from_its_logs_at_the_cell_s_rates(self):
        gib = 1 << 30

        def line(t, pid, msg):
            return f"[nvshare {t:.6f}] pid {pid}: {msg}\n"
        one = (line(10.0, 1, "let go before swapping out: the next holder's swap-in overlaps it")
               + line(10.4, 1, f"swapped out {20 * gib} bytes from GPU 0 in 400 ms (host memory "
                               "made meanwhile: 0 MiB, 0 ms faulting it in, 0 ms registering it)")
               + line(10.4, 1, "released early: idle for 20 ms"))
        two = (line(10.6, 2, f"swapped in {20 * gib} bytes to GPU 0 in 500 ms (lock 0, device "
                             "memory 1, mapping 0, access 1, last copies 400 ms; 0 ms waiting "
                             "for room)")
               + line(10.6, 2, "lock granted (contended): ready 580 ms after nvshared's grant"))
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, text in (("a.err", one), ("b.err", two)):
                paths.append(os.path.join(d, name))
                with open(paths[-1], "w") as f:
                    f.write(text)
            sw = sb.switch_figures(paths + [None, os.path.join(d, "gone.err")],
                                   {"out_gbs": 55.0, "in_gbs": 55.0, "both_gbs_each_way": 40.0})
        self.assertEqual(sw["switches"], 1)
        self.assertEqual(sw["took_s"], [0.58])
        self.assertAlmostEqual(sw["median_ratio"], 0.58 / (20 * gib / 40e9))
        self.assertIn("1 switches, median took/bound", sb.switches_line("cell", sw))
        self.assertEqual(sw["room_rounds"]["rounds"], 0)
        self.assertIn("0 room rounds", sb.switches_line("cell", sw))


class Phases(unittest.TestCase):
    def test_each_job_s_time_by_phase_and_a_job_without_figures(self):
        job = {"pid": 7, "startup_s": 4.5, "fill_s": 31.84, "steps": [0.5, 2.25, 0.5],
               "verify_s": 0.31, "total_s": 40.0, "wall_s": 41.86}
        line = sb.phases_line("nvshare", [job, {"pid": 8, "error": "killed"}])
        self.assertEqual(line, "nvshare: each job's start / fill / steps / check / exit, s: "
                               "4.50 / 31.84 / 3.25 (longest 2.25) / 0.31 / 1.86; "
                               "pid 8: no figures")


class DryRun(unittest.TestCase):
    def test_prints_each_cell_and_its_commands_without_a_gpu(self):
        argv = ["sweep_bench.py", "--dry-run", "--card-gib", "140.4", "--host-gib", "125",
                "--only", "equal-caching-b0.5-p1", "--nvshared", "/x/nvshared",
                "--lib", "/x/libnvshare.so"]
        buf = io.StringIO()
        with mock.patch.object(sys, "argv", argv), contextlib.redirect_stdout(buf):
            self.assertEqual(sb.main(), 0)
        out = argparse.Namespace(stdout=buf.getvalue())
        self.assertIn("equal-caching-b0.5-p1: 82667 + 82667 MiB", out.stdout)
        self.assertIn("--alloc-style caching --die-with-parent", out.stdout)
        self.assertIn("plain: not run", out.stdout)
        self.assertIn("/x/nvshared --socket SOCK --anti-thrashing on", out.stdout)
        self.assertIn("1 cells, estimated", out.stdout)


if __name__ == "__main__":
    unittest.main()
