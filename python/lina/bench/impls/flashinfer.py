"""FlashInfer's GDN prefill (package flashinfer-python, flashinfer.gdn_prefill.chunk_gated_delta_rule): forward
only, on Hopper.

Its documented signature: chunk_gated_delta_rule(q, k, v, g=None, beta=None, scale=None, initial_state=None,
output_final_state=False, cu_seqlens=None, use_qk_l2norm_in_kernel=False, output=None, ...), packed tokens
[total_tokens, H, D] with cu_seqlens, g the forget gate in linear space (alpha = exp(log g)) and beta, both
float32 [total_tokens, H]. The side by side's dense cells are passed as B sequences of T tokens; the gate's
exp and the float32 copies are made once per cell, outside the timed call."""
import torch

from lina.bench.impls.base import Implementation, need_cuda_arch, register


@register
class FlashInfer(Implementation):
    name = "flashinfer"
    label = "flashinfer"
    package, module_name = "flashinfer-python", "flashinfer.gdn_prefill"
    ops, forward_only = ("chunk_gdn",), True
    inputs = (None, None)  # (the q they were made from, FlashInfer's inputs): one input set at a time

    def unusable(self, device):
        if not hasattr(self.module, "chunk_gated_delta_rule"):
            return "flashinfer.gdn_prefill has no chunk_gated_delta_rule"
        return need_cuda_arch(device, (9,), "FlashInfer's GDN prefill")

    def packed(self, work, t):
        """FlashInfer's layout of `t`, made once per input set: views for q / k / v, float32 gates."""
        if self.inputs[0] is not t["q"]:
            n = work.B * work.T
            cu = (work.cu if work.varlen else torch.arange(0, n + 1, work.T, device=work.device, dtype=torch.int32))
            self.inputs = (t["q"], dict(q=t["q"].reshape(n, work.H, -1), k=t["k"].reshape(n, work.H, -1),
                                     v=t["v"].reshape(n, work.H, -1), g=t["g"].float().exp().reshape(n, work.H),
                                     beta=t["beta"].float().reshape(n, work.H), cu=cu.to(torch.int64)))
        return self.inputs[1]

    def forward(self, work, t):
        p = self.packed(work, t)
        o = self.module.chunk_gated_delta_rule(p["q"], p["k"], p["v"], g=p["g"], beta=p["beta"], scale=work.D ** -0.5,
                                               cu_seqlens=p["cu"], use_qk_l2norm_in_kernel=True)
        o = o[0] if isinstance(o, tuple) else o
        return o.view(t["v"].shape)
