"""FlashKDA (MoonshotAI/FlashKDA, package flash_kda): a forward-only CUTLASS chunk_kda for SM90 and newer.

Its public API (README, "Kernel API"): flash_kda.fwd(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound,
initial_state=None, final_state=None, cu_seqlens=None), bf16 q / k / v [B, T, H, 128], the raw gate g
[B, T, H, K] with A_log fp32 [H] and dt_bias fp32 [H, K] (the gate is computed in the kernel), beta logits
[B, T, H], the output written into `out`; varlen takes int64 cu_seqlens with B = 1. It is FLA's KDA with
use_gate_in_kernel, use_beta_sigmoid_in_kernel, safe_gate and lower_bound, which the side by side runs with
--gate in_kernel; the q / k L2 norm is part of its kernel (FLA's use_qk_l2norm_in_kernel)."""
import torch

from lina.bench.impls.base import Implementation, need_cuda_arch, register
from lina.bench.workload import KDA_LOWER_BOUND


@register
class FlashKda(Implementation):
    name = "flashkda"
    label = "flashkda-cuda"
    package = module_name = "flash_kda"
    ops, forward_only = ("chunk_kda",), True
    cu64 = (None, None)  # (the cell's cu_seqlens, its int64 copy): the reference keeps the identity valid

    def unusable(self, device):
        if not hasattr(self.module, "fwd"):
            return "flash_kda has no fwd (the API this plugin calls)"
        return need_cuda_arch(device, (9, 10, 11, 12), "FlashKDA")

    def supports(self, work, mode):
        why = super().supports(work, mode)
        if why:
            return why
        if work.gate != "in_kernel":
            return "FlashKDA computes the gate in its kernel: run with --gate in_kernel"
        if work.D != 128:
            return f"FlashKDA takes K = V = 128 only (this shape has D = {work.D})"
        if not work.safe_gate:
            return "FlashKDA takes safe_gate's lower bound only: run with --safe-gate on"
        return None

    def forward(self, work, t):
        q = t["q"]
        cu = None
        if work.varlen:  # int64, converted once per cell (not timed)
            if self.cu64[0] is not work.cu:
                self.cu64 = (work.cu, work.cu.to(torch.int64))
            cu = self.cu64[1]
        out = torch.empty_like(t["v"])
        self.module.fwd(q, t["k"], t["v"], t["g"], t["beta"], work.D ** -0.5, out, t["A_log"],
                        t["dt_bias"].view(work.H, work.D), KDA_LOWER_BOUND, cu_seqlens=cu)
        return out
