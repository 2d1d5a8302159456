"""FLA's Triton kernels (flash-linear-attention 0.6.0), with FLA's own dispatch to other backends switched off
so that the row times FLA's Triton path: FLA hands chunk_kda to FlashKDA and chunk_gated_delta_rule to
FlashQLA when those are installed, and some backward pieces to TileLang."""
import os

from lina.bench.decode import DECODE_OPS, decode_call
from lina.bench.impls.base import Implementation, register

# FLA's switches for the backends it would dispatch to instead of its Triton kernels (fla/backends: a backend's
# env_var set to 0 turns it off); set before fla is imported unless the environment already says otherwise.
FLA_BACKEND_SWITCHES = {"FLA_FLASH_KDA": "0", "FLA_FLASH_QLA": "0", "FLA_TILELANG": "0", "FLA_LINA": "0"}


def fla_backend_env():
    for k, v in FLA_BACKEND_SWITCHES.items():
        os.environ.setdefault(k, v)
    return {k: os.environ[k] for k in FLA_BACKEND_SWITCHES}


# At import, before any plugin's package is imported (a peer's package may import fla itself).
FLA_ENV = fla_backend_env()


@register
class Fla(Implementation):
    name = "fla"
    label, package, module_name = "fla-triton", "flash-linear-attention", "fla"
    ops = ("chunk_gla", "chunk_kda", "chunk_gdn") + DECODE_OPS

    def __init__(self):
        self.env = dict(FLA_ENV)
        super().__init__()
        self.fns = {}

    def unusable(self, device):
        if device.type != "cuda":
            return f"FLA's Triton kernels run on CUDA tensors only (the run's device is {device.type})"
        return None

    def supports(self, work, mode):
        why = super().supports(work, mode)
        if why is None and work.op == "chunk_gdn" and mode != "fwd":
            why = "FLA refuses chunk_gated_delta_rule backward on Triton 3.6 / Hopper"
        return why

    def grad_enabled(self, work, mode):
        # FLA's GDN forward runs without grad (its backward is refused here, see supports)
        return super().grad_enabled(work, mode) and work.op != "chunk_gdn"

    def fn(self, op):
        if op not in self.fns:
            if op == "chunk_gla":
                from fla.ops.gla import chunk_gla as f
            elif op == "chunk_kda":
                from fla.ops.kda import chunk_kda as f
            else:
                from fla.ops.gated_delta_rule import chunk_gated_delta_rule as f
            self.fns[op] = f
        return self.fns[op]

    def forward(self, work, t):
        f, cu = self.fn(work.op), work.cu
        if work.op == "chunk_gla":
            return f(t["q"], t["k"], t["v"], t["g"], cu_seqlens=cu)[0]
        extra = {n: t[n] for n in ("A_log", "dt_bias") if n in t}
        return f(t["q"], t["k"], t["v"], t["g"], t["beta"], cu_seqlens=cu, **work.fla_flags(), **extra)[0]

    def decode_step(self, work, t):
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
        from fla.ops.gla import fused_recurrent_gla
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd
        return decode_call(dict(gla=fused_recurrent_gla, gdn=fused_recurrent_gated_delta_rule,
                                kda_fwd=fused_recurrent_kda_fwd), work, t)
