"""The one reference every implementation's output is checked against, and FLA's metric and tolerance.

lina's PyTorch extension has no reference operator, so the reference runs through lina's C ABI
(liblina_c.so, via the ctypes wrapper bindings/python/lina_torch.py of this checkout): the fp32 GPU
naive recurrence (phase gpu_reference_forward) for CUDA tensors, the fp64 host recurrence (reference_forward)
for CPU tensors. Without the library or the wrapper every check is recorded as unverified, with the reason.
"""
import os
import sys
from pathlib import Path

import torch

# FLA's tests: RMS error ratio ||ref - out|| / ||ref|| (assert_close's err_ratio), 0.004 GLA, 0.005 delta rules
TOLERANCE = {"chunk_gla": 0.004, "chunk_kda": 0.005, "chunk_gdn": 0.005}
_WRAPPER_DIR = Path(__file__).resolve().parents[3] / "bindings" / "python"


def err_ratio(ref, out):
    ref, out = ref.double(), out.double()
    if not torch.isfinite(out).all():
        return float("inf")
    return ((ref - out).pow(2).mean().sqrt() / (ref.pow(2).mean().sqrt() + 1e-8)).item()


class Reference:
    """lina's recurrence through liblina_c.so; `reason` says why it is unavailable (None when it is)."""

    def __init__(self, lib=None):
        self.wrapper, self.reason, self.library = None, None, None
        if lib:
            os.environ["LINA_LIB"] = lib  # read when lina_torch first loads the library
        if not (_WRAPPER_DIR / "lina_torch.py").is_file():
            self.reason = f"the C ABI wrapper {_WRAPPER_DIR}/lina_torch.py is not there (run from a lina checkout)"
            return
        sys.path.insert(0, str(_WRAPPER_DIR))
        try:
            import lina_torch
            lina_torch.library()
            self.library = lina_torch._find_library()
        except (ImportError, OSError) as e:  # FileNotFoundError included: no liblina_c.so
            self.reason = f"liblina_c.so could not be loaded ({e}); pass --lib or set LINA_LIB"
            return
        self.wrapper = lina_torch

    @staticmethod
    def name(device):
        return "gpu_fp32_naive" if device.type == "cuda" else "cpu_fp64_recurrence"

    def output(self, work):
        """The reference o for `work` (fp32 on CUDA, fp64 on the CPU), or (None, why not)."""
        if self.wrapper is None:
            return None, self.reason
        cuda = work.device.type == "cuda"
        o = torch.empty(work.tensors["v"].shape, dtype=torch.float32 if cuda else torch.float64, device=work.device)
        try:
            self.wrapper.call(work.op, "gpu_reference_forward" if cuda else "reference_forward",
                              dict(work.tensors, cu_seqlens=work.cu, o=o), **work.fla_flags())
        except self.wrapper.LinaError as e:
            return None, str(e)
        return o, None

    @staticmethod
    def check(work, ref, out, why_not=None):
        """The row's `check` object: FLA's metric against the reference, pass null when there is none."""
        name = Reference.name(work.device)
        if ref is None:
            return {"reference": name, "pass": None, "reason": why_not}
        r = err_ratio(ref, out)
        tol = TOLERANCE[work.op]
        return {"reference": name, "err_ratio": r, "tolerance": tol, "pass": r < tol}
