"""FLA 0.6.0's chunk_gla / chunk_kda / chunk_gated_delta_rule on lina's operators (torch.ops.lina.*).

Each function takes FLA's arguments and keywords. A keyword FLA accepts is either honoured or refused with
an error that names it (lina has no context parallelism, no intermediate-state output, one chunk size);
an unknown keyword is a TypeError, as in Python. Inputs may be non-contiguous (FLA makes them contiguous,
so does lina). The operators carry fake kernels here (torch.compile, meta tensors) and C++ autograd.
"""
import torch

import lina._library  # noqa: F401  (loads torch.ops.lina)
from lina.host_copy import cached_host_copy

_ops = torch.ops.lina

# ---- fake kernels: output shapes only, for torch.compile and fake / meta tensors ---------------------------


def _none(like):
    return like.new_empty((0,), dtype=torch.float32)


def _num_seqs(q, cu_seqlens):
    return q.shape[0] if cu_seqlens is None else cu_seqlens.shape[0] - 1


@torch.library.register_fake("lina::chunk_gla_fwd")
def _gla_fwd_fake(q, k, v, g, scale, initial_state, output_final_state, cu_seqlens, cu_seqlens_cpu, training, variant):
    ht = (q.new_empty((_num_seqs(q, cu_seqlens), q.shape[2], q.shape[3], v.shape[3]), dtype=torch.float32)
          if output_final_state else _none(q))
    return v.new_empty(v.shape), ht


@torch.library.register_fake("lina::chunk_gla_bwd")
def _gla_bwd_fake(q, k, v, g, scale, initial_state, cu_seqlens, cu_seqlens_cpu, do, dht, variant):
    dh0 = initial_state.new_empty(initial_state.shape) if initial_state is not None else _none(q)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), g.new_empty(g.shape), dh0


def _delta_fwd_fake(q, v, output_final_state, cu_seqlens):
    ht = (q.new_empty((_num_seqs(q, cu_seqlens), v.shape[2], q.shape[3], v.shape[3]), dtype=torch.float32)
          if output_final_state else _none(q))
    return q.new_empty(v.shape), ht


def _delta_bwd_fake(q, k, v, g, beta, initial_state, A_log, dt_bias, need_dA_log, need_ddt_bias):
    def like(t, need=True):
        return t.new_empty(t.shape) if (need and t is not None) else _none(q)
    return (like(q), like(k), like(v), like(g), like(beta), like(initial_state), like(A_log, need_dA_log),
            like(dt_bias, need_ddt_bias))


@torch.library.register_fake("lina::chunk_kda_fwd")
def _kda_fwd_fake(q, k, v, g, beta, scale, initial_state, output_final_state, l2norm, gate, beta_sigmoid, neg_eigval,
                  safe_gate, lower_bound, A_log, dt_bias, cu_seqlens, cu_seqlens_cpu, training, variant):
    return _delta_fwd_fake(q, v, output_final_state, cu_seqlens)


@torch.library.register_fake("lina::chunk_kda_bwd")
def _kda_bwd_fake(q, k, v, g, beta, scale, initial_state, l2norm, gate, beta_sigmoid, neg_eigval, safe_gate,
                  lower_bound, A_log, dt_bias, cu_seqlens, cu_seqlens_cpu, do, dht, need_dA_log, need_ddt_bias, variant):
    return _delta_bwd_fake(q, k, v, g, beta, initial_state, A_log, dt_bias, need_dA_log, need_ddt_bias)


@torch.library.register_fake("lina::chunk_gdn_fwd")
def _gdn_fwd_fake(q, k, v, g, beta, scale, initial_state, output_final_state, l2norm, gate, beta_sigmoid, neg_eigval,
                  A_log, dt_bias, cu_seqlens, cu_seqlens_cpu, training, variant):
    return _delta_fwd_fake(q, v, output_final_state, cu_seqlens)


@torch.library.register_fake("lina::chunk_gdn_bwd")
def _gdn_bwd_fake(q, k, v, g, beta, scale, initial_state, l2norm, gate, beta_sigmoid, neg_eigval, A_log, dt_bias,
                  cu_seqlens, cu_seqlens_cpu, do, dht, need_dA_log, need_ddt_bias, variant):
    return _delta_bwd_fake(q, k, v, g, beta, initial_state, A_log, dt_bias, need_dA_log, need_ddt_bias)


def _reference_fake(q, v, state_heads, output_final_state, cu_seqlens):
    dtype = torch.float32 if q.device.type == "cuda" else torch.float64
    ht = (q.new_empty((_num_seqs(q, cu_seqlens), state_heads, q.shape[3], v.shape[3]), dtype=dtype)
          if output_final_state else _none(q))
    return q.new_empty(v.shape, dtype=dtype), ht


@torch.library.register_fake("lina::chunk_gla_reference")
def _gla_reference_fake(q, k, v, g, scale, initial_state, output_final_state, cu_seqlens, cu_seqlens_cpu):
    return _reference_fake(q, v, q.shape[2], output_final_state, cu_seqlens)


@torch.library.register_fake("lina::chunk_kda_reference")
def _kda_reference_fake(q, k, v, g, beta, scale, initial_state, output_final_state, l2norm, gate, beta_sigmoid,
                        neg_eigval, safe_gate, lower_bound, A_log, dt_bias, cu_seqlens, cu_seqlens_cpu):
    return _reference_fake(q, v, v.shape[2], output_final_state, cu_seqlens)


@torch.library.register_fake("lina::chunk_gdn_reference")
def _gdn_reference_fake(q, k, v, g, beta, scale, initial_state, output_final_state, l2norm, gate, beta_sigmoid,
                        neg_eigval, A_log, dt_bias, cu_seqlens, cu_seqlens_cpu):
    return _reference_fake(q, v, v.shape[2], output_final_state, cu_seqlens)


# Autograd: C++ autograd functions in the extension (bindings/torch/torch_ops.cpp); the backward recomputes
# from the saved inputs (lina keeps nothing between the two calls).

# ---- FLA's interface ----------------------------------------------------------------------------------------

def _cu_seqlens_cpu(cu, given):
    """The host copy of cu_seqlens lina validates and plans varlen work with. Without one, lina reads a CUDA
    cu_seqlens back in every forward and backward (a blocking copy); a loop that reuses one cu_seqlens tensor
    pays it once (lina.host_copy). Inside torch.compile the tensor is passed as it is."""
    if given is not None or cu is None or not cu.is_cuda or torch.compiler.is_compiling():
        return given
    return cached_host_copy(cu)


def _training(*tensors):
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _state_in(initial_state, state_v_first):
    # lina's state is [N, H, K, V]; FLA's state_v_first layout is [N, H, V, K].
    return initial_state.transpose(-1, -2) if (state_v_first and initial_state is not None) else initial_state


def _state_out(ht, output_final_state, state_v_first):
    if not output_final_state:
        return None
    return ht.transpose(-1, -2) if state_v_first else ht


# Value columns of the state are independent in these recurrences (S is [K, V]; every update and read acts
# on each column alone), so a V wider than the CUDA kernels take runs as several calls on column blocks whose
# outputs are concatenated; autograd sums the blocks' gradients of q, k, g, beta. FLA's default GLA and
# GatedDeltaNet layers have V = 512.
_CUDA_MAX_V = 256


def _v_blocks(v, gla):
    """Column widths for a CUDA call whose V is wider than the kernels take, else None."""
    V = v.shape[-1]
    if not v.is_cuda or V <= _CUDA_MAX_V:
        return None
    for width in ((256, 128, 64) if gla else (256, 192, 128, 64)):
        if V % width == 0:
            return [width] * (V // width)
    return None  # lina's front door refuses V by name


def _by_v_blocks(call, v, h0, widths):
    """call(v_block, h0_block) -> (o, ht) per column block; returns the concatenated (o, ht)."""
    outs, states, start = [], [], 0
    for w in widths:
        hb = h0[..., start:start + w] if h0 is not None else None
        o, ht = call(v[..., start:start + w], hb)
        outs.append(o)
        states.append(ht)
        start += w
    ht = torch.cat(states, dim=-1) if states[0].numel() else states[0]
    return torch.cat(outs, dim=-1), ht


def _f32(t):
    # A_log / dt_bias: lina's kernels read them as float32; FLA's models hold them in the model's dtype (bf16
    # after model.to(torch.bfloat16)). The cast is differentiable, so their gradients return in that dtype.
    return t.float() if t is not None and t.dtype != torch.float32 else t


def _refuse(op, name, value, why):
    raise NotImplementedError(f"lina.{op}: argument `{name}`={value!r} is not supported: {why}")


def _check_fla_keywords(op, kwargs, state_v_first, cp_context=None, return_intermediate_states=False, use_graph=False,
                        max_num_seqs=None, chunk_sizes=(64,)):
    """FLA's keywords that lina does not honour, refused by name; returns state_v_first (with FLA's deprecated
    alias). What is left in kwargs after the known keywords are popped is unknown: a TypeError."""
    if "transpose_state_layout" in kwargs:
        if state_v_first:
            raise ValueError(f"lina.{op}: pass `state_v_first` or the deprecated `transpose_state_layout`, not both")
        state_v_first = bool(kwargs.pop("transpose_state_layout"))
    chunk_size = kwargs.pop("chunk_size", 64)
    if chunk_size not in chunk_sizes:
        _refuse(op, "chunk_size", chunk_size, "lina's kernels work in chunks of 64 tokens")
    if "head_first" in kwargs:
        _refuse(op, "head_first", kwargs.pop("head_first"), "FLA removed the head-first layout; pass [B, T, H, D]")
    if cp_context is not None:
        _refuse(op, "cp_context", cp_context, "lina.chunk_* run one sequence segment per call; lina.context_parallel has the context-parallel forms")
    if return_intermediate_states:
        _refuse(op, "return_intermediate_states", True, "lina does not return the per-chunk states")
    if use_graph:
        _refuse(op, "use_graph", True, "lina plans varlen work from cu_seqlens on the host, so a captured graph "
                "cannot be replayed with other cu_seqlens contents; lina's calls capture as they are (pass "
                "cu_seqlens_cpu for varlen calls under capture)")
    if max_num_seqs is not None:
        _refuse(op, "max_num_seqs", max_num_seqs, "it only applies with use_graph=True")
    if kwargs:
        raise TypeError(f"lina.{op}: unexpected keyword argument(s) {sorted(kwargs)}")
    return state_v_first


def _run(call, v, h0, gla, output_final_state, state_v_first):
    """call(v, h0) -> (o, ht), once or per column block of v; returns FLA's (o, final_state or None)."""
    widths = _v_blocks(v, gla)
    o, ht = _by_v_blocks(call, v, h0, widths) if widths else call(v, h0)
    return o, _state_out(ht, output_final_state, state_v_first)


def chunk_gla(q, k, v, g, scale=None, initial_state=None, output_final_state=False, state_v_first=False,
              cu_seqlens=None, cu_seqlens_cpu=None, *, variant=""):
    """FLA's chunk_gla: returns (o, final_state or None). `variant` (lina only) names a kernel variant."""
    h0 = _state_in(initial_state, state_v_first)
    cu_cpu = _cu_seqlens_cpu(cu_seqlens, cu_seqlens_cpu)
    training = _training(q, k, v, g, h0)

    def call(v, h0):
        return _ops.chunk_gla_fwd(q, k, v, g, scale, h0, output_final_state, cu_seqlens, cu_cpu, training, variant)
    return _run(call, v, h0, True, output_final_state, state_v_first)


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
              allow_neg_eigval=False, safe_gate=False, lower_bound=None, disable_recompute=False,
              return_intermediate_states=False, state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
              cp_context=None, use_graph=False, max_num_seqs=None, **kwargs):
    """FLA's chunk_kda (A_log / dt_bias as keywords, as FLA takes them): returns (o, final_state or None).

    disable_recompute is accepted and changes nothing: lina's backward always recomputes from the inputs."""
    A_log, dt_bias, variant = _f32(kwargs.pop("A_log", None)), _f32(kwargs.pop("dt_bias", None)), kwargs.pop("variant", "")
    state_v_first = _check_fla_keywords("chunk_kda", kwargs, state_v_first, cp_context, return_intermediate_states,
                                        use_graph, max_num_seqs, chunk_sizes=(64,))
    h0 = _state_in(initial_state, state_v_first)
    cu_cpu = _cu_seqlens_cpu(cu_seqlens, cu_seqlens_cpu)
    training = _training(q, k, v, g, beta, h0, A_log, dt_bias)

    def call(v, h0):
        return _ops.chunk_kda_fwd(q, k, v, g, beta, scale, h0, output_final_state, use_qk_l2norm_in_kernel,
                                  use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, safe_gate,
                                  lower_bound, A_log, dt_bias, cu_seqlens, cu_cpu, training, variant)
    return _run(call, v, h0, False, output_final_state, state_v_first)


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                           state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, chunk_indices=None,
                           cp_context=None, **kwargs):
    """FLA's chunk_gated_delta_rule (use_gate_in_kernel / A_log / dt_bias as keywords, as FLA takes them):
    returns (o, final_state or None). chunk_indices, FLA's precomputed varlen chunk list, is not needed."""
    gate = bool(kwargs.pop("use_gate_in_kernel", False))
    A_log, dt_bias, variant = _f32(kwargs.pop("A_log", None)), _f32(kwargs.pop("dt_bias", None)), kwargs.pop("variant", "")
    state_v_first = _check_fla_keywords("chunk_gated_delta_rule", kwargs, state_v_first, cp_context,
                                        chunk_sizes=(64,))
    del chunk_indices  # lina derives its chunk list from cu_seqlens
    h0 = _state_in(initial_state, state_v_first)
    cu_cpu = _cu_seqlens_cpu(cu_seqlens, cu_seqlens_cpu)
    training = _training(q, k, v, g, beta, h0, A_log, dt_bias)

    def call(v, h0):
        return _ops.chunk_gdn_fwd(q, k, v, g, beta, scale, h0, output_final_state, use_qk_l2norm_in_kernel, gate,
                                  use_beta_sigmoid_in_kernel, allow_neg_eigval, A_log, dt_bias, cu_seqlens, cu_cpu,
                                  training, variant)
    return _run(call, v, h0, False, output_final_state, state_v_first)


chunk_gdn = chunk_gated_delta_rule
