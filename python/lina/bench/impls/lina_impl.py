"""lina through its PyTorch operators (lina.chunk_gla / chunk_kda / chunk_gated_delta_rule and the decode ops
lina.fused_recurrent_*, FLA's signatures).
lina's scratch comes from PyTorch's caching allocator, so torch's peak memory counts it."""
import torch

from lina.bench.decode import DECODE_OPS, decode_call
from lina.bench.impls.base import Implementation, register


@register
class Lina(Implementation):
    name, label, module_name = "lina", "lina-cuda", "lina"
    ops = ("chunk_gla", "chunk_kda", "chunk_gdn") + DECODE_OPS

    def row_label(self, device):
        return "lina-cuda" if device.type == "cuda" else "lina-cpu"

    def available(self, device):
        if self.module is None:
            return False, (f"{self.reason} (without an installed lina, point LINA_TORCH_LIB at a build's "
                           "bindings/torch/_C.so and put the checkout's python/ on PYTHONPATH)")
        return super().available(device)

    def unusable(self, device):
        return "no CUDA device is visible" if device.type == "cuda" and not torch.cuda.is_available() else None

    def forward(self, work, t):
        m, cu, flags = self.module, work.cu, work.fla_flags()
        if work.op == "chunk_gla":
            return m.chunk_gla(t["q"], t["k"], t["v"], t["g"], cu_seqlens=cu)[0]
        fn = m.chunk_kda if work.op == "chunk_kda" else m.chunk_gated_delta_rule
        extra = {n: t[n] for n in ("A_log", "dt_bias") if n in t}
        return fn(t["q"], t["k"], t["v"], t["g"], t["beta"], cu_seqlens=cu, **flags, **extra)[0]

    def decode_step(self, work, t):
        import lina.decode as d
        return decode_call(dict(gla=d.fused_recurrent_gla, gdn=d.fused_recurrent_gated_delta_rule,
                                kda_fwd=d.fused_recurrent_kda_fwd), work, t)
