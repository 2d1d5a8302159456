"""FlashQLA (QwenLM/FlashQLA, package flash_qla): TileLang GDN forward and backward for SM90 / SM100.

Its high-level API (README, "Usage"): flash_qla.chunk_gated_delta_rule(q, k, v, g, beta, scale=...,
initial_state=None, output_final_state=..., cu_seqlens=None) -> (o, final_state), FLA's [B, T, H, D] layout
and FLA's log-space gate. The plugin passes use_qk_l2norm_in_kernel=True when the function takes it (as FLA's
does) and declines otherwise, so that every implementation does the same work."""
import inspect

from lina.bench.impls.base import Implementation, need_cuda_arch, register


@register
class FlashQla(Implementation):
    name = "flashqla"
    label = "flashqla-tilelang"
    package, module_name = "flash-qla", "flash_qla"
    ops = ("chunk_gdn",)

    def unusable(self, device):
        fn = getattr(self.module, "chunk_gated_delta_rule", None)
        if fn is None:
            return "flash_qla has no chunk_gated_delta_rule"
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}
        if "use_qk_l2norm_in_kernel" not in params and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            return "flash_qla.chunk_gated_delta_rule takes no use_qk_l2norm_in_kernel (the side by side's GDN)"
        return need_cuda_arch(device, (9, 10), "FlashQLA")

    def forward(self, work, t):
        return self.module.chunk_gated_delta_rule(t["q"], t["k"], t["v"], t["g"], t["beta"], scale=work.D ** -0.5,
                                                  cu_seqlens=work.cu, use_qk_l2norm_in_kernel=True)[0]
