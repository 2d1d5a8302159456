"""lina as a backend of FLA (flash-linear-attention 0.6.0): FLA's layers and models run lina's kernels with
no change to their code, and fall back to FLA's Triton kernels, with the reason logged, where lina declines.

    import lina.fla_backend
    lina.fla_backend.register()      # once, after importing fla; FLA_LINA=0 in the environment turns it off

FLA dispatches chunk_kda (by function) and chunk_gated_delta_rule (operation "gated_delta_rule") through
fla.backends: lina registers a BaseBackend there, priority 0, whose verifiers say why lina declines a call.
FLA 0.6.0 has no dispatch point at chunk_gla's entry, so register() rebinds the name chunk_gla in the GLA layer
module (fla.layers.gla) to a function that asks the same verifier first.

Declines are logged by FLA's dispatcher (logger "fla.backends", level INFO) and counted in `declines()`.
"""
import collections
import functools
import logging

import torch

from lina import ops

logger = logging.getLogger(__name__)

_DECLINES = collections.Counter()  # (op, reason) -> calls declined
_CUDA_HEAD_DIMS = (64, 128, 256)


def declines():
    """{(op, reason): count} of the calls lina declined since register()."""
    return dict(_DECLINES)


def _decline(op, reason):
    _DECLINES[(op, reason)] += 1
    return False, f"lina declines: {reason}"


def _common_reason(q, k, v, g, kwargs, delta):
    """Why lina cannot run this call, or None. Mirrors the refusals of lina's front door and of its CUDA path
    (docs/kernels/*.md, "What it supports"), so that FLA runs such calls itself instead of lina raising."""
    for name in ("cp_context",):
        if kwargs.get(name) is not None:
            return f"`{name}` is given (lina has no context parallelism)"
    for name in ("return_intermediate_states", "use_graph"):
        if kwargs.get(name):
            return f"`{name}=True` is not supported"
    if kwargs.get("chunk_size", 64) != 64:
        return f"`chunk_size={kwargs['chunk_size']}` (lina works in chunks of 64)"
    tensors = dict(q=q, k=k, v=v, g=g)
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            return f"`{name}` is not a tensor"
        if t.device.type not in ("cuda", "cpu"):
            return f"`{name}` is on {t.device.type}"
    if q.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        return f"`q` dtype {q.dtype}"
    if q.dim() != 4 or v.dim() != 4:
        return "q and v must be [B, T, H, D]"
    if q.is_cuda:
        K, V = q.shape[-1], v.shape[-1]
        if K not in _CUDA_HEAD_DIMS:
            return f"head dim K={K} (lina's CUDA kernels take 64, 128, 256)"
        # wider V runs as column blocks of at most 256 (lina.ops._v_blocks)
        v_ok = V % 64 == 0 and (delta or V > 256 or V in _CUDA_HEAD_DIMS)
        if not v_ok:
            return f"head dim V={V} (lina's CUDA kernels take {'a multiple of 64' if delta else '64, 128, 256 or a multiple of 64 above 256'})"
        for name, t in tensors.items():
            # lina makes inputs contiguous; a contiguous copy is aligned, a contiguous input must be already.
            if t.is_contiguous() and t.data_ptr() % 16 != 0:
                return f"`{name}` is not 16-byte aligned"
    return None


def _bound(fn, args, kwargs):
    """FLA's arguments by name (FLA's layers pass keywords; positional calls are bound the same way)."""
    names = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    named = dict(zip(names, args))
    named.update(kwargs)
    return named


def _kda_verifier(*args, **kwargs):
    a = _bound(ops.chunk_kda, args, kwargs)
    reason = _common_reason(a.get("q"), a.get("k"), a.get("v"), a.get("g"), a, delta=True)
    return (True, None) if reason is None else _decline("chunk_kda", reason)


def _gdn_verifier(*args, **kwargs):
    a = _bound(ops.chunk_gated_delta_rule, args, kwargs)
    reason = _common_reason(a.get("q"), a.get("k"), a.get("v"), a.get("g"), a, delta=True)
    return (True, None) if reason is None else _decline("chunk_gated_delta_rule", reason)


def _gla_verifier(*args, **kwargs):
    a = _bound(ops.chunk_gla, args, kwargs)
    reason = _common_reason(a.get("q"), a.get("k"), a.get("v"), a.get("g"), a, delta=False)
    return (True, None) if reason is None else _decline("chunk_gla", reason)


_registered = False


def register():
    """Registers lina with FLA's dispatcher (idempotent). Returns the FLA functions now served by lina."""
    global _registered
    if _registered:
        return ["chunk_kda", "chunk_gated_delta_rule", "chunk_gla"]
    from fla.backends import BaseBackend, register as fla_register

    class LinaBackend(BaseBackend):
        backend_type = "lina"
        package_name = "lina"
        env_var = "FLA_LINA"  # FLA_LINA=0 turns lina off, FLA's own switch for a backend
        priority = 0

        # operation "gated_delta_rule": FLA looks these up by the dispatched function's name.
        def chunk_gated_delta_rule(self, *args, **kwargs):
            return ops.chunk_gated_delta_rule(*args, **kwargs)

        def chunk_gated_delta_rule_verifier(self, *args, **kwargs):
            return _gdn_verifier(*args, **kwargs)

    import fla.ops.kda

    fla_register(fla.ops.kda.chunk_kda, backend=LinaBackend, verifier=_kda_verifier)(ops.chunk_kda)
    fla_register("gated_delta_rule")(LinaBackend)
    _patch_gla(LinaBackend)
    _registered = True
    return ["chunk_kda", "chunk_gated_delta_rule", "chunk_gla"]


def _patch_gla(backend):
    import fla.layers.gla as gla_layer

    fla_chunk_gla = gla_layer.chunk_gla
    if getattr(fla_chunk_gla, "_lina", False):
        return

    @functools.wraps(fla_chunk_gla)
    def chunk_gla(*args, **kwargs):
        if backend.is_available() and backend().is_enabled():
            accepted, reason = _gla_verifier(*args, **kwargs)
            if accepted:
                return ops.chunk_gla(*args, **kwargs)
            logger.info("lina: chunk_gla -> FLA: %s", reason)
        return fla_chunk_gla(*args, **kwargs)

    chunk_gla._lina = True
    gla_layer.chunk_gla = torch.compiler.disable(chunk_gla)
