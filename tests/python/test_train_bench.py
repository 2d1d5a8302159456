"""bench/train_fla_models.py's order of runs: every cell's timed run before any profiled one (a torch.profiler
session leaves the process's later launches slower, which once made FLA + lina look 15 % slower than FLA on the
same kernels), and the records saved after each run. No GPU, no FLA: the runs are stand-ins.

    python -m pytest tests/python/test_train_bench.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))

from train_fla_models import timed_then_profiled  # noqa: E402


class TrainBenchOrder(unittest.TestCase):
    CELLS = [("kda", "default", "fla"), ("kda", "default", "lina"), ("gla", "340m", "fla"), ("gla", "340m", "lina")]

    def run_order(self, profile):
        events, saved = [], []

        def timed(*cell):
            events.append(("timed", cell))
            return {"cell": cell}

        def profiled(*args):
            *cell, rec = args
            events.append(("profiled", tuple(cell)))
            rec["profiled"] = True

        records = timed_then_profiled(self.CELLS, timed, profiled if profile else None,
                                      lambda recs: saved.append(len(recs)))
        return events, saved, records

    def test_every_timed_run_comes_before_any_profiled_one(self):
        events, saved, records = self.run_order(profile=True)
        kinds = [k for k, _ in events]
        self.assertEqual(kinds, ["timed"] * 4 + ["profiled"] * 4)
        self.assertEqual([c for _, c in events[:4]], self.CELLS)
        self.assertEqual([c for _, c in events[4:]], self.CELLS)
        self.assertTrue(all(r.get("profiled") for r in records))
        self.assertEqual(saved, [1, 2, 3, 4, 4, 4, 4, 4])  # after every run, all records so far

    def test_without_profiling_only_the_timed_runs(self):
        events, saved, records = self.run_order(profile=False)
        self.assertEqual([k for k, _ in events], ["timed"] * 4)
        self.assertEqual(saved, [1, 2, 3, 4])
        self.assertFalse(any("profiled" in r for r in records))


if __name__ == "__main__":
    unittest.main()
