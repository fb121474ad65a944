#!/usr/bin/env python3
"""bench/gpu/switch_report.py on logs written here, without a GPU: which
grants are switches, who released for them, how long they took and the
summary against the targets (issue 44). Run by `meson test
bench-switch-report-selftest`."""
import os
import sys
import unittest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "gpu")
sys.path.insert(0, BENCH)
import switch_report as sr  # noqa: E402

GIB = 1 << 30


def line(t, pid, msg):
    return f"[nvshare {t:.6f}] pid {pid}: {msg}"


def swap_in(t, pid, gib, ms=400, wait=0):
    return line(t, pid, f"swapped in {int(gib * GIB)} bytes to GPU 0 in {ms} ms (lock 0, device "
                        f"memory 1, mapping 0, access 1, last copies 300 ms; {wait} ms waiting "
                        f"for room)")


def swap_out(t, pid, gib, ms=400, making_ms=None):
    tail = ("" if making_ms is None else
            f"; {making_ms} ms of the swap-out making it")
    return line(t, pid, f"swapped out {int(gib * GIB)} bytes from GPU 0 in {ms} ms (host memory "
                        f"made meanwhile: 0 MiB, 0 ms faulting it in, 0 ms registering it{tail})")


def granted(t, pid, ready_ms=None):
    tail = "" if ready_ms is None else f": ready {ready_ms} ms after nvshared's grant"
    return line(t, pid, "lock granted (contended)" + tail)


# Two processes, 1 and 2, taking turns: 20 GiB each way at every switch.
PAIR = [
    granted(10.0, 1, 0),
    # 1 lets go before its swap-out; 2 is granted at 10.01 and ready at 10.51.
    line(10.0, 1, "let go before swapping out: the next holder's swap-in overlaps it"),
    swap_out(10.45, 1, 20),
    line(10.45, 1, "released early: idle for 20 ms"),
    swap_in(10.51, 2, 20, wait=100),
    granted(10.51, 2, 500),
    # A Shrink's swap-out of 1 while it waits: not part of any switch.
    swap_out(11.0, 1, 1),
    # 2 swaps out before it releases; 1 asks later and is ready 0.45 s after its grant.
    swap_out(12.0, 2, 20),
    line(12.0, 2, "released early: idle for 20 ms"),
    line(12.2, 1, "work resumed after a pause of 900 ms: asking for the GPU"),
    swap_in(12.65, 1, 20),
    granted(12.65, 1, 450),
    # A small swap-in: below --min-gib.
    line(13.0, 1, "released: the GPU is full while shared"),
    swap_in(13.1, 2, 0.5),
    granted(13.1, 2, 90),
]


class Switches(unittest.TestCase):
    def test_each_switch_is_timed_from_its_grant_and_paired_with_its_release(self):
        sws = sr.switches(sr.events(PAIR), GIB)
        self.assertEqual([(s["releaser"], s["holder"]) for s in sws], [(1, 2), (2, 1)])
        self.assertAlmostEqual(sws[0]["took_s"], 0.5)
        self.assertEqual(sws[0]["out_bytes"], 20 * GIB, "the swap-out after letting go")
        self.assertEqual(sws[0]["wait_ms"], 100)
        self.assertAlmostEqual(sws[1]["took_s"], 0.45)
        self.assertEqual(sws[1]["out_bytes"], 20 * GIB, "the swap-out before the release only")

    def test_an_older_log_is_timed_from_the_release_or_a_later_ask(self):
        old = [x.split(": ready")[0] if "lock granted" in x else x for x in PAIR]
        sws = sr.switches(sr.events(old), GIB)
        self.assertEqual([s["from"] for s in sws], ["release", "release"])
        self.assertAlmostEqual(sws[0]["took_s"], 0.51)  # from letting go at 10.0
        self.assertAlmostEqual(sws[1]["took_s"], 0.45)  # from the ask at 12.2

    def test_a_grant_after_an_exit_or_with_no_release_is_no_switch_in_an_older_log(self):
        log = [granted(1.0, 1), swap_in(5.0, 2, 20), granted(5.0, 2)]  # 1 ended unseen
        self.assertEqual(sr.switches(sr.events(log), GIB), [])

    def test_a_grant_after_an_exit_keeps_its_own_time_but_has_no_releaser(self):
        log = [granted(1.0, 1, 0), swap_in(5.0, 2, 20), granted(5.0, 2, 420)]
        [s] = sr.switches(sr.events(log), GIB)
        self.assertIsNone(s["releaser"])
        self.assertEqual(s["out_bytes"], 0)
        self.assertAlmostEqual(s["took_s"], 0.42)


class Summary(unittest.TestCase):
    def test_ratios_against_the_bound_and_the_first_switch_against_the_later(self):
        sws = sr.switches(sr.events(PAIR), GIB)
        rows, summary = sr.report(sws, 55.0, 55.0, 50.0)
        bound = 20 * GIB / 50e9  # both ways at once
        self.assertAlmostEqual(rows[0]["bound_s"], bound)
        self.assertAlmostEqual(rows[0]["ratio"], 0.5 / bound)
        self.assertAlmostEqual(summary["median_ratio"], (0.5 / bound + 0.45 / bound) / 2)
        self.assertAlmostEqual(summary["first_vs_later"], 0.5 / 0.45)

    def test_the_first_switch_is_compared_with_later_ones_of_its_size(self):
        def row(gib, took):
            return {"t": 1.0, "releaser": 1, "holder": 2, "took_s": took, "from": "grant",
                    "out_bytes": int(gib * GIB), "in_bytes": int(gib * GIB), "wait_ms": 0,
                    "in_ms": 0}
        # A start's small swap-in first, then switches of 20 GiB.
        _, summary = sr.report([row(1.5, 0.2), row(20, 0.8), row(20, 0.5), row(20, 0.4)],
                               55.0, 55.0, 50.0)
        self.assertAlmostEqual(summary["first_s_per_gib"], 0.8 / 20)
        self.assertAlmostEqual(summary["later_s_per_gib"], 0.45 / 20)
        self.assertAlmostEqual(summary["first_vs_later"], 0.8 / 0.45)

    def test_one_way_only_is_bounded_at_that_way_s_rate(self):
        rows, _ = sr.report([{"t": 1.0, "releaser": None, "holder": 2, "took_s": 1.0,
                              "from": "grant", "out_bytes": 0, "in_bytes": 55 * 10**9,
                              "wait_ms": 0, "in_ms": 900}], 40.0, 55.0, 50.0)
        self.assertAlmostEqual(rows[0]["bound_s"], 1.0)


# A filling holder (2) gets its room from a waiter (1) in two rounds of 1 GiB:
# the first found its host memory made ahead, the second waited 20 ms for it.
# The holder's memory that finds the room logs nothing (no data to copy).
ROUNDS = [
    line(20.000, 2, "GPU 0 lacks 1024 MiB for our new memory: asking nvshared for room"),
    line(20.004, 1, "nvshared asks for room: leaving at most 9216 MiB on the GPUs we do not "
                    "hold"),
    swap_out(20.025, 1, 1, ms=21, making_ms=0),
    line(20.100, 2, "GPU 0 lacks 1024 MiB for our new memory: asking nvshared for room"),
    line(20.150, 1, "nvshared asks for room: leaving at most 8192 MiB on the GPUs we do not "
                    "hold"),
    swap_out(20.190, 1, 1, ms=40, making_ms=20),
    # An ask nobody answered (the process ended): no round.
    line(21.000, 2, "GPU 0 lacks 64 MiB for our new memory: asking nvshared for room"),
]


class RoomRounds(unittest.TestCase):
    def test_each_round_pairs_the_ask_with_the_giver_s_shrink_and_swap_out(self):
        rounds = sr.room_rounds(sr.events(ROUNDS))
        self.assertEqual([(r["holder"], r["giver"]) for r in rounds], [(2, 1), (2, 1)])
        self.assertAlmostEqual(rounds[0]["took_ms"], 25.0)
        self.assertAlmostEqual(rounds[0]["read_ms"], 4.0)
        self.assertEqual(rounds[0]["out_ms"], 21)
        self.assertEqual(rounds[1]["making_ms"], 20)
        self.assertAlmostEqual(rounds[1]["read_ms"], 50.0)

    def test_the_summary_is_per_gib_given_with_the_medians(self):
        rs = sr.rounds_summary(sr.room_rounds(sr.events(ROUNDS)))
        self.assertEqual(rs["rounds"], 2)
        self.assertAlmostEqual(rs["ms_per_gib"], (25.0 + 90.0) / 2)
        self.assertAlmostEqual(rs["median_read_ms"], 27.0)
        self.assertAlmostEqual(rs["median_out_ms"], 30.5)
        self.assertAlmostEqual(rs["median_making_ms"], 10.0)

    def test_a_shrink_after_the_holder_s_next_ask_is_not_the_earlier_ask_s(self):
        log = [line(1.0, 2, "GPU 0 lacks 64 MiB for our new memory: asking nvshared for room"),
               line(1.2, 2, "GPU 0 lacks 64 MiB for our new memory: asking nvshared for room"),
               line(1.3, 1, "nvshared asks for room: leaving at most 0 MiB on the GPUs we do "
                            "not hold"),
               swap_out(1.35, 1, 0.0625, ms=50)]
        [r] = sr.room_rounds(sr.events(log))
        self.assertAlmostEqual(r["t"], 1.2)
        self.assertIsNone(r["making_ms"], "a library before the making time was said")


if __name__ == "__main__":
    unittest.main()
