"""The one reference every implementation's output is checked against, and FLA's metric and tolerance.

The reference is lina's naive recurrence as a PyTorch operator (torch.ops.lina.<op>_reference, docs/pytorch.md):
the fp32 GPU recurrence for CUDA tensors, the fp64 host recurrence for CPU tensors. Without lina's extension every
check is recorded as unverified, with the reason.
"""
import torch

# FLA's tests: RMS error ratio ||ref - out|| / ||ref|| (assert_close's err_ratio), 0.004 GLA, 0.005 delta rules
TOLERANCE = {"chunk_gla": 0.004, "chunk_kda": 0.005, "chunk_gdn": 0.005}



def err_ratio(ref, out):
    ref, out = ref.double(), out.double()
    if not torch.isfinite(out).all():
        return float("inf")
    return ((ref - out).pow(2).mean().sqrt() / (ref.pow(2).mean().sqrt() + 1e-8)).item()


class Reference:
    """lina's recurrence through its torch operators; `reason` says why it is unavailable (None when it is)."""

    def __init__(self, lib=None):
        del lib  # the C ABI's library is no longer needed; --lib is accepted for old command lines
        self.reason, self.library = None, None
        try:
            import lina._library
            self.library = lina._library.library_path()
        except ImportError as e:
            self.reason = f"lina's extension could not be loaded ({e}); set LINA_TORCH_LIB or install lina"

    @staticmethod
    def name(device):
        return "gpu_fp32_naive" if device.type == "cuda" else "cpu_fp64_recurrence"

    def output(self, work):
        """The reference o for `work` (fp32 on CUDA, fp64 on the CPU), or (None, why not)."""
        if self.reason is not None:
            return None, self.reason
        t, f, ops = work.tensors, work.fla_flags(), torch.ops.lina
        try:
            if work.op == "chunk_gla":
                o, _ = ops.chunk_gla_reference(t["q"], t["k"], t["v"], t["g"], None, None, False, work.cu, None)
            else:
                flags = (f.get("use_qk_l2norm_in_kernel", False), f.get("use_gate_in_kernel", False),
                         f.get("use_beta_sigmoid_in_kernel", False), f.get("allow_neg_eigval", False))
                tail = (t.get("A_log"), t.get("dt_bias"), work.cu, None)
                if work.op == "chunk_kda":
                    o, _ = ops.chunk_kda_reference(t["q"], t["k"], t["v"], t["g"], t["beta"], None, None, False, *flags,
                                                   f.get("safe_gate", False), f.get("lower_bound"), *tail)
                else:
                    o, _ = ops.chunk_gdn_reference(t["q"], t["k"], t["v"], t["g"], t["beta"], None, None, False, *flags,
                                                   *tail)
        except (ValueError, NotImplementedError, RuntimeError) as e:
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
