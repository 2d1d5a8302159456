"""python -m lina.bench on the CPU backend: the implementation list, the per-cell rows each labelled by
implementation, the checks against lina's host reference, the speedups against a baseline and their geomean.
No timed assertion: the CPU timer only feeds the arithmetic under test.
    LINA_TORCH_LIB=BUILD/bindings/torch/_C.so LINA_LIB=BUILD/bindings/liblina_c.so PYTHONPATH=python \\
        python -m unittest tests/python/test_bench_cpu.py -v
"""
import contextlib
import io
import json
import math
import os
import tempfile
import unittest
from pathlib import Path

import torch

from lina.bench import cli
from lina.bench.impls import REGISTRY
from lina.bench.impls.flashkda import FlashKda
from lina.bench.impls.lina_impl import Lina
from lina.bench.workload import make_workload

TINY = ["--device", "cpu", "--shapes", "B1_T64_H2_D32", "--varlen-tokens", "0", "--min-samples", "2",
        "--max-samples", "3", "--budget-s", "0.01"]


class LinaAgain(Lina):
    """lina a second time under another label: a two-implementation file without a peer installed."""
    name = "lina_again"

    def row_label(self, device):
        return "again-" + device.type


def run(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(argv)
    return rc, out.getvalue()


class BenchCpu(unittest.TestCase):
    def test_list_names_every_plugin_and_why_one_cannot_run(self):
        rc, text = run(["--list", "--device", "cpu"])
        self.assertEqual(rc, 0)
        for name in ("lina", "fla", "flashkda", "flashinfer", "flashqla"):
            self.assertIn(name, text)
        fla_line = next(line for line in text.splitlines() if line.split()[:1] == ["fla"])
        self.assertIn("unavailable: ", fla_line)  # not installed here, or its Triton kernels need CUDA tensors

    def test_unknown_implementation_is_refused_by_name(self):
        with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(io.StringIO()) as err:
            cli.main(["--list", "--impls", "lina,nope"])
        self.assertEqual(e.exception.code, 2)
        self.assertIn("--impls / --baseline: ['nope'] unknown", err.getvalue())

    def test_flashkda_declines_what_its_kernel_does_not_compute(self):
        kda = FlashKda()
        work = make_workload("chunk_kda", "B1_T64_H2_D64", 0, torch.device("meta"))
        self.assertIn("--gate in_kernel", kda.supports(work, "fwd"))
        work = make_workload("chunk_kda", "B1_T64_H2_D64", 0, torch.device("meta"), gate="in_kernel")
        self.assertIn("K = V = 128", kda.supports(work, "fwd"))
        work = make_workload("chunk_kda", "B1_T64_H2_D128", 0, torch.device("meta"), gate="in_kernel", safe_gate=False)
        self.assertIn("--safe-gate on", kda.supports(work, "fwd"))
        self.assertNotIn("safe_gate", work.fla_flags())
        work = make_workload("chunk_kda", "B1_T64_H2_D128", 0, torch.device("meta"), gate="in_kernel")
        self.assertTrue(work.fla_flags()["safe_gate"])
        self.assertIsNone(kda.supports(work, "fwd"))
        self.assertEqual(kda.supports(work, "fwdbwd"), "flashkda has no backward")
        self.assertIn("offers no chunk_gla", kda.supports(make_workload("chunk_gla", "B1_T64_H2_D128", 0,
                                                                        torch.device("meta")), "fwd"))

    def test_two_implementations_same_inputs_checked_with_speedups(self):
        REGISTRY["lina_again"] = LinaAgain
        self.addCleanup(REGISTRY.pop, "lina_again")
        lib = os.environ.get("LINA_LIB")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "side")
            argv = TINY + ["--ops", "chunk_gla,chunk_kda", "--modes", "fwd", "--impls", "lina,lina_again,flashkda",
                           "--baseline", "lina_again", "--out", out] + (["--lib", lib] if lib else [])
            rc, _ = run(argv)
            self.assertEqual(rc, 0)
            doc = json.loads(Path(out + ".json").read_text())
            md = Path(out + ".md").read_text()
        self.assertEqual(doc["schema"], "lina.bench/1")
        self.assertEqual(doc["config"]["baseline_impl"], "again-cpu")
        flashkda = next(d for d in doc["config"]["implementations"] if d["name"] == "flashkda")
        self.assertFalse(flashkda["available"])  # not installed, or no CUDA here: said once, with the reason
        self.assertTrue(flashkda["reason"])
        rows = doc["results"]
        self.assertEqual([(r["op"], r["impl"]) for r in rows],
                         [("chunk_gla", "lina-cpu"), ("chunk_gla", "again-cpu"), ("chunk_kda", "lina-cpu"),
                          ("chunk_kda", "again-cpu")])
        for r in rows:
            self.assertEqual(r["check"]["reference"], "cpu_fp64_recurrence")
            if lib:
                self.assertTrue(r["check"]["pass"], r["check"])
            self.assertEqual(r["baseline"], "again-cpu")
        speedups = []
        for lina_row, base_row in zip(rows[0::2], rows[1::2]):
            self.assertAlmostEqual(lina_row["speedup_vs_baseline"], base_row["median_ms"] / lina_row["median_ms"])
            self.assertEqual(base_row["speedup_vs_baseline"], 1.0)
            self.assertEqual(lina_row["vs_baseline_err_ratio"], 0.0)  # the same kernels on the same inputs
            speedups.append(lina_row["speedup_vs_baseline"])
        self.assertIn("| lina-cpu ms | again-cpu ms | lina-cpu vs again-cpu |", md)
        self.assertIn(f"Geomean speedup of lina-cpu over again-cpu, chunk_gla fwd, over 1 shapes: {speedups[0]:.2f}x", md)
        self.assertIn("- flashkda (flashkda-cuda): not run: ", md)
        self.assertTrue(all(math.isfinite(s) and s > 0 for s in speedups))

    def test_decode_cells_check_the_state_and_state_the_floor(self):
        REGISTRY["lina_again"] = LinaAgain
        self.addCleanup(REGISTRY.pop, "lina_again")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "decode")
            rc, _ = run(TINY + ["--ops", "fused_recurrent_kda", "--decode-batches", "1,2", "--impls", "lina,lina_again",
                                "--baseline", "lina_again", "--out", out])
            self.assertEqual(rc, 0)
            doc = json.loads(Path(out + ".json").read_text())
            md = Path(out + ".md").read_text()
        rows = doc["results"]
        self.assertEqual([(r["shape"], r["impl"]) for r in rows],
                         [("B1_T1_H32_HV32_K128_V128", "lina-cpu"), ("B1_T1_H32_HV32_K128_V128", "again-cpu"),
                          ("B2_T1_H32_HV32_K128_V128", "lina-cpu"), ("B2_T1_H32_HV32_K128_V128", "again-cpu")])
        for r in rows:
            self.assertEqual(r["mode"], "decode")
            self.assertEqual(r["shape_keys"]["state"], "pool, in place")  # KDA in vLLM's form
            self.assertTrue(r["check"]["pass"], r["check"])  # o and the pool's slots against the chunk reference
            self.assertIn("state_err_ratio", r["check"])
            # the floor: the fp32 state [B, 32, 128, 128] read and written once
            self.assertEqual(r["bytes"], 2 * r["shape_keys"]["B"] * 32 * 128 * 128 * 4)
            self.assertAlmostEqual(r["frac_floor"] * r["x_floor"], 1.0)
        self.assertIn("Decode floor", md)

    def test_decode_dry_run_lists_the_real_model_shapes(self):
        rc, text = run(["--device", "cpu", "--dry-run", "--ops", "fused_recurrent_gdn,fused_recurrent_gla"])
        self.assertEqual(rc, 0)
        for batch in (1, 64, 1024):
            self.assertIn(f"fused_recurrent_gdn decode B{batch}_T1_H16_HV32_K128_V128: lina -> runs", text)
        self.assertIn("fused_recurrent_gla decode B1024_T1_H16_HV16_K128_V128", text)


if __name__ == "__main__":
    unittest.main()
