"""lina as a backend of FLA (flash-linear-attention 0.6.0): FLA's layers and models run lina's kernels with
no change to their code, and fall back to FLA's Triton kernels, with the reason logged, where lina declines.

    import lina.fla_backend
    lina.fla_backend.register()      # once, after importing fla; FLA_LINA=0 in the environment turns it off

FLA dispatches chunk_kda (by function), chunk_gated_delta_rule (operation "gated_delta_rule") and the decode
step fused_recurrent_kda_fwd (operation "kda") through fla.backends: lina registers a BaseBackend there, priority
0, whose verifiers say why lina declines a call. FLA 0.6.0 has no dispatch point at chunk_gla's entry nor at
fused_recurrent_gla's or fused_recurrent_gated_delta_rule's, so register() rebinds those names in FLA's layer
modules (fla.layers.gla, fla.layers.gated_deltanet) to functions that ask the same kind of verifier first.
Decode calls whose inputs require grad (FLA's GLA layer decodes short sequences in training too) are declined:
lina's decode is forward only.

chunk_gated_delta_rule in training (CUDA inputs that require grad) is declined where FLA's own gated backward
runs: lina's GatedDeltaNet forward + backward is slower than FLA's there (benchmarks/RECORDS.md, "Training").
FLA 0.6.0 refuses that backward on Hopper with Triton 3.4 to 3.7.0 (its version guard), and there lina serves.
`register(gdn_training=True)` sends those calls to lina all the same (to measure it).

Declines are logged by FLA's dispatcher (logger "fla.backends", level INFO) and counted in `declines()`.
"""
import collections
import functools
import logging

import torch

from lina import decode, ops

logger = logging.getLogger(__name__)

_DECLINES = collections.Counter()  # (op, reason) -> calls declined
_CUDA_HEAD_DIMS = (64, 128, 256)
_GDN_TRAINING = False  # register(gdn_training=...)


def declines():
    """{(op, reason): count} of the calls lina declined since register()."""
    return dict(_DECLINES)


def _decline(op, reason):
    _DECLINES[(op, reason)] += 1
    return False, f"lina declines: {reason}"


def _tensors_reason(tensors):
    """Why lina cannot take these tensors ({name: tensor}, q and v among them), or None."""
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            return f"`{name}` is not a tensor"
        if t.device.type not in ("cuda", "cpu"):
            return f"`{name}` is on {t.device.type}"
    q, v = tensors["q"], tensors["v"]
    if q.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        return f"`q` dtype {q.dtype}"
    if q.dim() != 4 or v.dim() != 4:
        return "q and v must be [B, T, H, D]"
    return None


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
    reason = _tensors_reason(tensors)
    if reason:
        return reason
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


def fla_gated_backward_runs():
    """Whether FLA's own gated chunk backward runs in this process: FLA 0.6.0 raises in it on Hopper with Triton
    3.4 to 3.7.0 (a Triton miscompile, FLA issue #640) unless fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 is set."""
    try:
        import fla.ops.common.chunk_o as chunk_o
    except Exception:
        return False
    guarded = getattr(chunk_o, "IS_NVIDIA_HOPPER", False) and getattr(chunk_o, "TRITON_ABOVE_3_4_0", False)
    return not guarded or bool(getattr(chunk_o, "TRITON_ABOVE_3_7_1", False))


def _gdn_verifier(*args, **kwargs):
    a = _bound(ops.chunk_gated_delta_rule, args, kwargs)
    reason = _common_reason(a.get("q"), a.get("k"), a.get("v"), a.get("g"), a, delta=True)
    if reason is None and not _GDN_TRAINING and a["q"].is_cuda and torch.is_grad_enabled():
        trained = [n for n in ("q", "k", "v", "g", "beta") if isinstance(a.get(n), torch.Tensor) and a[n].requires_grad]
        if trained and fla_gated_backward_runs():
            reason = (f"training (`{trained[0]}` requires grad): lina's chunk_gated_delta_rule forward + backward is "
                      "slower than FLA's where FLA's gated backward runs (register(gdn_training=True) overrides)")
    return (True, None) if reason is None else _decline("chunk_gated_delta_rule", reason)


def _gla_verifier(*args, **kwargs):
    a = _bound(ops.chunk_gla, args, kwargs)
    reason = _common_reason(a.get("q"), a.get("k"), a.get("v"), a.get("g"), a, delta=False)
    if reason is None and a["q"].is_cuda:
        # lina's CUDA chunk_gla kernels read bf16 q and g (docs/kernels/chunk_gla_fwd.md); FLA takes any float
        for name in ("q", "g"):
            if a[name].dtype != torch.bfloat16:
                reason = f"`{name}` dtype {a[name].dtype} (lina's CUDA chunk_gla takes bfloat16)"
                break
    return (True, None) if reason is None else _decline("chunk_gla", reason)


# ---- decode (fused_recurrent) ---------------------------------------------------------------------------------

def _decode_reason(a, gate_name):
    """Why lina cannot run this decode call (FLA's arguments by name), or None; mirrors lina.decode's refusals and
    the CUDA kernels' head dims (K, V in 64, 128, 256; a dense state also takes V as column blocks of those)."""
    q, k, v = a.get("q"), a.get("k"), a.get("v")
    for name in ("gv",) + (("gk",) if gate_name != "gk" else ()):
        if a.get(name) is not None:
            return f"`{name}` is given (lina has no such gate)"
    optional = ((gate_name, a.get(gate_name)), ("beta", a.get("beta")), ("initial_state", a.get("initial_state")))
    tensors = dict(q=q, k=k, v=v, **{n: t for n, t in optional if t is not None})
    reason = _tensors_reason(tensors)
    if reason:
        return reason
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors.values()):
        return "inputs require grad (lina's decode is forward only)"
    beta = a.get("beta")
    if isinstance(beta, torch.Tensor) and beta.dim() == v.dim():
        return "`beta` per value channel [B, T, HV, V] (lina takes [B, T, HV])"
    h0 = a.get("initial_state")
    in_place = a.get("inplace_final_state", False) or a.get("ssm_state_indices") is not None
    if in_place and a.get("state_v_first") and h0 is not None and not h0.transpose(-1, -2).is_contiguous():
        return "a V-first state pool in memory (lina updates a [K, V] state in place)"
    if q.is_cuda:
        K, V = q.shape[-1], v.shape[-1]
        if K not in _CUDA_HEAD_DIMS:
            return f"head dim K={K} (lina's CUDA decode kernels take 64, 128, 256)"
        if V not in _CUDA_HEAD_DIMS and (in_place or V < 256 or V % 64):
            return f"head dim V={V} (lina's CUDA decode kernels take 64, 128, 256; a dense state also a multiple of 64)"
    return None


def _decode_verifier(op, fn, gate_name):
    def verify(*args, **kwargs):
        reason = _decode_reason(_bound(fn, args, kwargs), gate_name)
        return (True, None) if reason is None else _decline(op, reason)
    return verify


_fused_recurrent_kda_verifier = _decode_verifier("fused_recurrent_kda", decode.fused_recurrent_kda_fwd, "g")
_fused_recurrent_kda_layer_verifier = _decode_verifier("fused_recurrent_kda", decode.fused_recurrent_kda, "g")
_fused_recurrent_gla_verifier = _decode_verifier("fused_recurrent_gla", decode.fused_recurrent_gla, "gk")
_fused_recurrent_gdn_verifier = _decode_verifier("fused_recurrent_gated_delta_rule",
                                                 decode.fused_recurrent_gated_delta_rule, "g")


_registered = False
SERVED = ["chunk_kda", "chunk_gated_delta_rule", "chunk_gla", "fused_recurrent_kda", "fused_recurrent_gla",
          "fused_recurrent_gated_delta_rule"]


def register(gdn_training=False):
    """Registers lina with FLA's dispatcher (idempotent). Returns the FLA functions now served by lina.
    gdn_training: also take chunk_gated_delta_rule calls that train where FLA's gated backward runs (see above;
    a later call may change it)."""
    global _registered, _GDN_TRAINING
    _GDN_TRAINING = bool(gdn_training)
    if _registered:
        return list(SERVED)
    from fla.backends import BaseBackend, register as fla_register

    class LinaBackend(BaseBackend):
        backend_type = "lina"
        package_name = "lina"
        env_var = "FLA_LINA"  # FLA_LINA=0 turns lina off, FLA's own switch for a backend
        priority = 0

        # FLA looks these up by the dispatched function's name: operation "gated_delta_rule" ...
        def chunk_gated_delta_rule(self, *args, **kwargs):
            return ops.chunk_gated_delta_rule(*args, **kwargs)

        def chunk_gated_delta_rule_verifier(self, *args, **kwargs):
            return _gdn_verifier(*args, **kwargs)

        # ... and operation "kda" (FLA's fused_recurrent_kda calls it, so does vLLM's form of the call)
        def fused_recurrent_kda_fwd(self, *args, **kwargs):
            return decode.fused_recurrent_kda_fwd(*args, **kwargs)

        def fused_recurrent_kda_fwd_verifier(self, *args, **kwargs):
            return _fused_recurrent_kda_verifier(*args, **kwargs)

    import fla.ops.kda

    fla_register(fla.ops.kda.chunk_kda, backend=LinaBackend, verifier=_kda_verifier)(ops.chunk_kda)
    fla_register("gated_delta_rule")(LinaBackend)
    fla_register("kda")(LinaBackend)
    _patch_layer("fla.layers.gla", "chunk_gla", LinaBackend, _gla_verifier, ops.chunk_gla)
    _patch_layer("fla.layers.gla", "fused_recurrent_gla", LinaBackend, _fused_recurrent_gla_verifier,
                 decode.fused_recurrent_gla)
    _patch_layer("fla.layers.gated_deltanet", "fused_recurrent_gated_delta_rule", LinaBackend,
                 _fused_recurrent_gdn_verifier, decode.fused_recurrent_gated_delta_rule)
    # FLA's fused_recurrent_kda copies the layer's V-first state to a contiguous one before its dispatch point;
    # lina takes the state as it is
    _patch_layer("fla.layers.kda", "fused_recurrent_kda", LinaBackend, _fused_recurrent_kda_layer_verifier,
                 decode.fused_recurrent_kda)
    _registered = True
    return list(SERVED)


def _patch_layer(module_name, name, backend, verifier, implementation):
    """Rebinds `name` in FLA's layer module to lina's implementation behind the verifier (FLA's function where
    lina declines or FLA_LINA=0)."""
    import importlib

    module = importlib.import_module(module_name)
    fla_fn = getattr(module, name)
    if getattr(fla_fn, "_lina", False):
        return

    @functools.wraps(fla_fn)
    def routed(*args, **kwargs):
        if backend.is_available() and backend().is_enabled():
            accepted, reason = verifier(*args, **kwargs)
            if accepted:
                return implementation(*args, **kwargs)
            logger.info("lina: %s -> FLA: %s", name, reason)
        return fla_fn(*args, **kwargs)

    routed._lina = True
    setattr(module, name, torch.compiler.disable(routed))
