"""FLA 0.6.0's decode ops (fused_recurrent_gla / fused_recurrent_kda / fused_recurrent_gated_delta_rule) on lina's
operators torch.ops.lina.fused_recurrent_{gla,kda,gdn}: one token or a few per sequence against an fp32 state.

Each function takes FLA's arguments and returns FLA's (o, final_state or None). Beyond FLA's public signatures, every
op takes vLLM's continuous-batching keywords that FLA's fused_recurrent_kda_fwd has (ssm_state_indices,
num_accepted_tokens, inplace_final_state; include/lina/fused_recurrent.h says what they mean), and lina's
cu_seqlens_cpu and variant. A keyword FLA accepts that lina cannot honour is refused by name with the reason
(NotImplementedError); an unknown keyword is a TypeError.

Forward only: lina's decode has no backward. A call whose inputs require grad under grad mode raises RuntimeError
(FLA's GDN raises at backward instead); call it under torch.no_grad() / torch.inference_mode(). The ops are
CUDA-graph capturable (nothing is read back to the host; pass cu_seqlens_cpu with varlen calls under capture).

state_v_first=True (FLA's layers pass it): lina's state is [K, V]; the state is passed as its transpose, which costs
nothing in a decode loop (the state lina returns is a transposed view of a [K, V] tensor, and its transpose is that
tensor again). A state written in place (a pool, or inplace_final_state) must be such a view: a V-first pool in
memory is refused by name.
"""
import torch

import lina._library  # noqa: F401  (loads torch.ops.lina)
from lina.ops import _by_v_blocks, _cu_seqlens_cpu, _f32, _none, _num_seqs, _refuse, _v_blocks

_ops = torch.ops.lina

# ---- fake kernels: output shapes only, for torch.compile and fake / meta tensors ---------------------------


def _decode_fake(q, v, state_indices, inplace_final_state, output_final_state, cu_seqlens, out):
    o = q.new_empty((0,)) if out is not None else q.new_empty(v.shape)
    if inplace_final_state or not output_final_state:
        return o, _none(q)
    rows = q.shape[0] * q.shape[1] if state_indices is not None else _num_seqs(q, cu_seqlens)
    return o, q.new_empty((rows, v.shape[2], q.shape[3], v.shape[3]), dtype=torch.float32)


@torch.library.register_fake("lina::fused_recurrent_gla")
def _gla_fake(q, k, v, g, scale, initial_state, state_indices, num_accepted_tokens, inplace_final_state,
              output_final_state, reverse, cu_seqlens, cu_seqlens_cpu, out, variant):
    return _decode_fake(q, v, state_indices, inplace_final_state, output_final_state, cu_seqlens, out)


@torch.library.register_fake("lina::fused_recurrent_kda")
def _kda_fake(q, k, v, g, beta, scale, initial_state, state_indices, num_accepted_tokens, inplace_final_state,
              output_final_state, l2norm, gate, beta_sigmoid, neg_eigval, lower_bound, A_log, dt_bias, cu_seqlens,
              cu_seqlens_cpu, out, variant):
    return _decode_fake(q, v, state_indices, inplace_final_state, output_final_state, cu_seqlens, out)


@torch.library.register_fake("lina::fused_recurrent_gdn")
def _gdn_fake(q, k, v, g, beta, scale, initial_state, state_indices, num_accepted_tokens, inplace_final_state,
              output_final_state, l2norm, gate, beta_sigmoid, neg_eigval, A_log, dt_bias, cu_seqlens, cu_seqlens_cpu,
              out, variant):
    return _decode_fake(q, v, state_indices, inplace_final_state, output_final_state, cu_seqlens, out)


# ---- FLA's interface ----------------------------------------------------------------------------------------


def _state_v_first(op, kwargs, state_v_first):
    """FLA's deprecated alias of state_v_first; what is left in kwargs is unknown: a TypeError."""
    if "transpose_state_layout" in kwargs:
        if state_v_first:
            raise ValueError(f"lina.{op}: pass `state_v_first` or the deprecated `transpose_state_layout`, not both")
        state_v_first = bool(kwargs.pop("transpose_state_layout"))
    if kwargs:
        raise TypeError(f"lina.{op}: unexpected keyword argument(s) {sorted(kwargs)}")
    return state_v_first


def _written_in_place(ssm_state_indices, inplace_final_state):
    return inplace_final_state or ssm_state_indices is not None


def _state_in(op, initial_state, state_v_first, in_place):
    """lina's [.., K, V] view of the caller's state; a state written in place must be one without a copy."""
    if initial_state is None or not state_v_first:
        return initial_state
    h0 = initial_state.transpose(-1, -2)
    if in_place and not h0.is_contiguous():
        _refuse(op, "state_v_first", True, "the state is written where it is and lina's state is [K, V]: a V-first "
                "pool or state updated in place must be the transpose of a contiguous [.., K, V] tensor")
    return h0


def _run(op, call, q, v, initial_state, output_final_state, inplace_final_state, ssm_state_indices, state_v_first,
         out=None):
    """call(v, h0, out) -> (o, ht) of the torch op, once or per column block of v (dense state only); returns FLA's
    (o, final_state): the caller's initial_state when it was updated in place, a fresh state, or None."""
    in_place = _written_in_place(ssm_state_indices, inplace_final_state)
    h0 = _state_in(op, initial_state, state_v_first, in_place)
    widths = None if in_place or out is not None else _v_blocks(v, True)
    if widths:
        o, ht = _by_v_blocks(lambda vb, hb: call(vb, hb, None), v, h0, widths)
    else:
        o, ht = call(v, h0, out)
    o = out if out is not None else o
    if inplace_final_state:
        return o, initial_state
    if not output_final_state:
        return o, None
    return o, ht.transpose(-1, -2) if state_v_first else ht


def fused_recurrent_gla(q, k, v, gk=None, gv=None, scale=None, initial_state=None, output_final_state=False,
                        reverse=False, state_v_first=False, cu_seqlens=None, *, cu_seqlens_cpu=None,
                        ssm_state_indices=None, num_accepted_tokens=None, inplace_final_state=False, variant="",
                        **kwargs):
    """FLA's fused_recurrent_gla: returns (o, final_state or None). gk absent = no decay (log gate 0)."""
    op = "fused_recurrent_gla"
    state_v_first = _state_v_first(op, kwargs, state_v_first)
    if gv is not None:
        _refuse(op, "gv", "a tensor", "lina's GLA decays the state per key channel only (gk)")
    g = gk if gk is not None else torch.zeros_like(k)
    cu_cpu = _cu_seqlens_cpu(cu_seqlens, cu_seqlens_cpu)

    def call(v, h0, out):
        return _ops.fused_recurrent_gla(q, k, v, g, scale, h0, ssm_state_indices, num_accepted_tokens,
                                        inplace_final_state, output_final_state, reverse, cu_seqlens, cu_cpu, out,
                                        variant)
    return _run(op, call, q, v, initial_state, output_final_state, inplace_final_state, ssm_state_indices,
                state_v_first)


def _refuse_value_beta(op, beta, v):
    if beta.dim() == v.dim():
        _refuse(op, "beta", f"shape {list(beta.shape)}", "lina takes one beta per value head, [B, T, HV] (FLA's "
                "per-value-channel beta [B, T, HV, V] is not supported)")


def fused_recurrent_kda_fwd(q, k, v, g, beta, A_log=None, dt_bias=None, initial_state=None, scale=None,
                            output_final_state=False, inplace_final_state=True, state_v_first=False, cu_seqlens=None,
                            ssm_state_indices=None, num_accepted_tokens=None, use_qk_l2norm_in_kernel=False,
                            use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                            lower_bound=None, out=None, *, cu_seqlens_cpu=None, variant="", **kwargs):
    """FLA's fused_recurrent_kda_fwd (the function FLA dispatches, vLLM's form): inplace_final_state defaults to
    True; `out` receives o. Returns (o, final_state): initial_state itself when it was updated in place."""
    op = "fused_recurrent_kda"
    state_v_first = _state_v_first(op, kwargs, state_v_first)
    _refuse_value_beta(op, beta, v)
    A_log, dt_bias = _f32(A_log), _f32(dt_bias)
    cu_cpu = _cu_seqlens_cpu(cu_seqlens, cu_seqlens_cpu)

    def call(v, h0, out):
        return _ops.fused_recurrent_kda(q, k, v, g, beta, scale, h0, ssm_state_indices, num_accepted_tokens,
                                        inplace_final_state, output_final_state, use_qk_l2norm_in_kernel,
                                        use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound,
                                        A_log, dt_bias, cu_seqlens, cu_cpu, out, variant)
    return _run(op, call, q, v, initial_state, output_final_state, inplace_final_state, ssm_state_indices,
                state_v_first, out)


def fused_recurrent_kda(q, k, v, g, beta, A_log=None, dt_bias=None, scale=None, initial_state=None,
                        output_final_state=False, use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                        use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, lower_bound=None,
                        state_v_first=False, cu_seqlens=None, *, cu_seqlens_cpu=None, ssm_state_indices=None,
                        num_accepted_tokens=None, inplace_final_state=False, variant="", **kwargs):
    """FLA's fused_recurrent_kda: returns (o, final_state or None)."""
    return fused_recurrent_kda_fwd(
        q, k, v, g, beta, A_log=A_log, dt_bias=dt_bias, initial_state=initial_state, scale=scale,
        output_final_state=output_final_state, inplace_final_state=inplace_final_state, state_v_first=state_v_first,
        cu_seqlens=cu_seqlens, ssm_state_indices=ssm_state_indices, num_accepted_tokens=num_accepted_tokens,
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_gate_in_kernel=use_gate_in_kernel,
        use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
        lower_bound=lower_bound, cu_seqlens_cpu=cu_seqlens_cpu, variant=variant, **kwargs)


def fused_recurrent_gated_delta_rule(q, k, v, g=None, gk=None, gv=None, beta=None, scale=None, initial_state=None,
                                     output_final_state=False, use_qk_l2norm_in_kernel=False,
                                     use_gate_in_kernel=False, A_log=None, dt_bias=None,
                                     use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, state_v_first=False,
                                     cu_seqlens=None, *, cu_seqlens_cpu=None, ssm_state_indices=None,
                                     num_accepted_tokens=None, inplace_final_state=False, variant="", **kwargs):
    """FLA's fused_recurrent_gated_delta_rule: returns (o, final_state or None). As in FLA, g absent = no decay,
    beta absent = 1, and A_log / dt_bias are ignored without use_gate_in_kernel."""
    op = "fused_recurrent_gated_delta_rule"
    state_v_first = _state_v_first(op, kwargs, state_v_first)
    for name, t in (("gk", gk), ("gv", gv)):
        if t is not None:
            _refuse(op, name, "a tensor", "lina's GDN decays the state by one scalar per value head (g)")
    if use_gate_in_kernel:
        if A_log is None:
            raise ValueError(f"lina.{op}: `A_log` must be given with use_gate_in_kernel=True")
        if g is None:
            raise ValueError(f"lina.{op}: `g` (the raw gate) must be given with use_gate_in_kernel=True")
    else:
        A_log = dt_bias = None
    g = g if g is not None else q.new_zeros(v.shape[:3])
    beta = beta if beta is not None else q.new_ones(v.shape[:3])
    _refuse_value_beta(op, beta, v)
    A_log, dt_bias = _f32(A_log), _f32(dt_bias)
    cu_cpu = _cu_seqlens_cpu(cu_seqlens, cu_seqlens_cpu)

    def call(v, h0, out):
        return _ops.fused_recurrent_gdn(q, k, v, g, beta, scale, h0, ssm_state_indices, num_accepted_tokens,
                                        inplace_final_state, output_final_state, use_qk_l2norm_in_kernel,
                                        use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, A_log,
                                        dt_bias, cu_seqlens, cu_cpu, out, variant)
    return _run(op, call, q, v, initial_state, output_final_state, inplace_final_state, ssm_state_indices,
                state_v_first)


fused_recurrent_gdn = fused_recurrent_gated_delta_rule
