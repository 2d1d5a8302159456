"""PyTorch front end for lina through its C ABI (bindings/lina_c.h), with autograd.

    import lina_torch
    o, ht = lina_torch.chunk_gla(q, k, v, g, initial_state=h0, output_final_state=True)

The shared library is found through $LINA_LIB or next to a build directory (build/bindings). Tensors
must be contiguous; CUDA tensors run the CUDA backend on the current stream, CPU tensors the CPU one.
"""
import ctypes
import functools
import json
import os
import struct
import sys
import threading
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from lina.host_copy import cached_host_copy  # noqa: E402  (the package's; importing it loads no extension)

_DTYPES = {torch.float64: 0, torch.float32: 1, torch.bfloat16: 2, torch.float16: 3, torch.int32: 4, torch.int64: 5}


class _Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("dtype", ctypes.c_int32),
                ("device", ctypes.c_int32), ("device_index", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 6)]


# call() packs each tensor record straight into a reused buffer with this layout (one struct.pack_into
# per tensor instead of building ctypes objects: ~10 of the binding's ~15 us per call were that).
_TENSOR_REC = struct.Struct("@PPiiii6q")
assert _TENSOR_REC.size == ctypes.sizeof(_Tensor) and all(
    getattr(_Tensor, f).offset == o for f, o in (("data", 8), ("dtype", 16), ("rank", 28), ("shape", 32))), "_Tensor layout"
_PAD = tuple((0,) * (6 - r) for r in range(7))  # zero shape entries after rank r
_NAMES = {}  # argument name -> (NUL-terminated buffer kept alive, its address)


def _name_addr(name):
    e = _NAMES.get(name)
    if e is None:
        b = ctypes.create_string_buffer(name.encode())
        e = _NAMES[name] = (b, ctypes.addressof(b))
    return e[1]


def _find_library():
    env = os.environ.get("LINA_LIB")
    candidates = [Path(env)] if env else []
    root = Path(__file__).resolve().parents[2]
    candidates += [root / d / "bindings" / "liblina_c.so" for d in ("build", "build-cuda", "build-release")]
    for c in candidates:
        if c.is_file():
            return str(c)
    raise FileNotFoundError("liblina_c.so not found: build lina (scripts/build.sh) or set LINA_LIB")


_lib = None


def library():
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL(_find_library())
        _lib.lina_c_call.restype = ctypes.c_int
        _lib.lina_c_call.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int,  # const lina_c_tensor*
                                     ctypes.c_char_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                     ctypes.c_char_p, ctypes.c_size_t]
        u64p = ctypes.POINTER(ctypes.c_uint64)
        _lib.lina_c_workspace_stats.argtypes = [u64p, u64p, u64p]
    return _lib


def workspace_stats():
    """lina's device scratch pool: dict(reserved, used, used_high) in bytes (torch's allocator never sees it)."""
    vals = [ctypes.c_uint64(0) for _ in range(3)]
    if library().lina_c_workspace_stats(*[ctypes.byref(v) for v in vals]) != 0:
        raise LinaError(1, "lina_c_workspace_stats failed")
    return dict(zip(("reserved", "used", "used_high"), (v.value for v in vals)))


def workspace_reset_high_water():
    if library().lina_c_workspace_reset_high_water() != 0:
        raise LinaError(1, "lina_c_workspace_reset_high_water failed")


class LinaError(RuntimeError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


_TLS = threading.local()  # per-thread message buffers, reused across calls


@functools.lru_cache(maxsize=256)
def _kwargs_json(items):
    return json.dumps(dict(items)).encode()


def call(op, phase, tensors, **kwargs):
    """Runs lina op `op` in `phase` on named tensors (None values are skipped); returns kernel names.

    This is the host path of every timed call from PyTorch, so it packs the C records in one pass into a
    per-thread buffer and reuses what does not change between calls (names, message buffers, encoded kwargs)."""
    bufs = getattr(_TLS, "bufs", None)
    if bufs is None:
        recs = ctypes.create_string_buffer(_TENSOR_REC.size * 16)
        bufs = _TLS.bufs = (ctypes.create_string_buffer(4096), ctypes.create_string_buffer(4096), recs, ctypes.addressof(recs))
    err, kernels, recs, recs_addr = bufs
    n, stream, pack = 0, None, _TENSOR_REC.pack_into
    for name, t in tensors.items():
        if t is None:
            continue
        if not t.is_contiguous():
            raise LinaError(2, f"argument `{name}`: a non-contiguous tensor, expected a contiguous one")
        code = _DTYPES.get(t.dtype)
        if code is None:
            raise LinaError(2, f"argument `{name}`: dtype {t.dtype} is not supported")
        shape = t.shape
        rank = len(shape)
        if rank > 6:
            raise LinaError(2, f"argument `{name}`: rank {rank}, expected at most 6")
        dev = t.get_device()  # -1 on the CPU
        if dev >= 0 and stream is None:
            stream = torch._C._cuda_getCurrentRawStream(dev)
        if (n + 1) * _TENSOR_REC.size > len(recs):  # more tensors than any op passes today: grow
            grown = ctypes.create_string_buffer(2 * len(recs))
            ctypes.memmove(grown, recs, n * _TENSOR_REC.size)
            recs, recs_addr = grown, ctypes.addressof(grown)
            _TLS.bufs = bufs = (err, kernels, recs, recs_addr)
        pack(recs, n * _TENSOR_REC.size, _name_addr(name), t.data_ptr(), code, 1 if dev >= 0 else 0, max(dev, 0), rank,
             *shape, *_PAD[rank])
        n += 1
    rc = library().lina_c_call(op.encode(), phase.encode(), recs_addr, n, _kwargs_json(tuple(sorted(kwargs.items()))),
                               stream, err, 4096, kernels, 4096)
    if rc != 0:
        raise LinaError(rc, err.value.decode())
    return [k for k in kernels.value.decode().split(",") if k]


def _cu_seqlens_cpu(cu):
    """A host copy of a CUDA cu_seqlens, passed as cu_seqlens_cpu: without it lina's validation reads
    cu_seqlens back with a blocking copy in every forward and backward call. A loop that reuses one
    cu_seqlens tensor pays that copy once (FLA caches its varlen chunk indices per tensor the same way)."""
    return cached_host_copy(cu) if cu is not None and cu.is_cuda else None


def _need_rank4(**tensors):
    # The shapes are unpacked here before the C side sees them: refuse by name like the C side does.
    for name, t in tensors.items():
        if t.dim() != 4:
            raise LinaError(2, f"argument `{name}`: rank {t.dim()} (shape {list(t.shape)}), expected rank 4 [B, T, heads, dim]")


def _num_seqs(q, cu_seqlens):
    return q.shape[0] if cu_seqlens is None else cu_seqlens.numel() - 1


class _ChunkGla(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, g, scale, initial_state, output_final_state, cu_seqlens):
        _need_rank4(q=q, v=v)
        B, T, H, K = q.shape
        V = v.shape[-1]
        o = torch.empty_like(v)
        ht = q.new_empty(_num_seqs(q, cu_seqlens), H, K, V, dtype=torch.float32) if output_final_state else None
        phase = "forward" if torch.is_grad_enabled() or ctx.needs_input_grad[0] else "inference"
        call("chunk_gla", phase, dict(q=q, k=k, v=v, g=g, initial_state=initial_state, cu_seqlens=cu_seqlens,
                                      cu_seqlens_cpu=_cu_seqlens_cpu(cu_seqlens), o=o, final_state=ht), scale=scale)
        ctx.save_for_backward(q, k, v, g, initial_state, cu_seqlens)
        ctx.scale = scale
        return o, ht

    @staticmethod
    def backward(ctx, do, dht):
        q, k, v, g, h0, cu = ctx.saved_tensors
        dq, dk, dv, dg = (torch.empty_like(x) for x in (q, k, v, g))
        dh0 = torch.empty_like(h0) if h0 is not None else None
        call("chunk_gla", "backward", dict(q=q, k=k, v=v, g=g, initial_state=h0, cu_seqlens=cu, cu_seqlens_cpu=_cu_seqlens_cpu(cu),
                                           do=do.contiguous(),
                                           dht=dht.contiguous() if dht is not None else None,
                                           dq=dq, dk=dk, dv=dv, dg=dg, dh0=dh0), scale=ctx.scale)
        return dq, dk, dv, dg, None, dh0, None, None


def chunk_gla(q, k, v, g, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None):
    """FLA's chunk_gla signature; returns (o, final_state or None)."""
    return _ChunkGla.apply(q, k, v, g, scale, initial_state, output_final_state, cu_seqlens)


class _ChunkDelta(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens, output_final_state, kw_items):
        kw = dict(kw_items)
        _need_rank4(q=q, v=v)
        B, T, HV, V = v.shape
        K = q.shape[-1]
        o = torch.empty(B, T, HV, V, dtype=q.dtype, device=q.device)
        ht = q.new_empty(_num_seqs(q, cu_seqlens), HV, K, V, dtype=torch.float32) if output_final_state else None
        phase = "forward" if any(ctx.needs_input_grad) else "inference"
        call(op, phase, dict(q=q, k=k, v=v, g=g, beta=beta, A_log=A_log, dt_bias=dt_bias, initial_state=initial_state,
                             cu_seqlens=cu_seqlens, cu_seqlens_cpu=_cu_seqlens_cpu(cu_seqlens), o=o, final_state=ht), **kw)
        ctx.save_for_backward(q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens)
        ctx.op, ctx.kw = op, kw
        return o, ht

    @staticmethod
    def backward(ctx, do, dht):
        q, k, v, g, beta, A_log, dt_bias, h0, cu = ctx.saved_tensors
        dq, dk, dv, dg, dbeta = (torch.empty_like(x) for x in (q, k, v, g, beta))
        dh0 = torch.empty_like(h0) if h0 is not None else None
        gate = ctx.kw.get("use_gate_in_kernel", False)
        dA = torch.empty_like(A_log) if (gate and A_log is not None) else None
        ddt = torch.empty_like(dt_bias) if (gate and dt_bias is not None) else None
        call(ctx.op, "backward", dict(q=q, k=k, v=v, g=g, beta=beta, A_log=A_log, dt_bias=dt_bias, initial_state=h0,
                                      cu_seqlens=cu, cu_seqlens_cpu=_cu_seqlens_cpu(cu), do=do.contiguous(),
                                      dht=dht.contiguous() if dht is not None else None, dq=dq, dk=dk, dv=dv, dg=dg,
                                      dbeta=dbeta, dh0=dh0, dA_log=dA, ddt_bias=ddt), **ctx.kw)
        return None, dq, dk, dv, dg, dbeta, dA, ddt, dh0, None, None, None


def _delta(op, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, A_log, dt_bias, **flags):
    kw = {key: val for key, val in dict(scale=scale, **flags).items() if val is not None}
    return _ChunkDelta.apply(op, q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens, output_final_state,
                             tuple(sorted(kw.items())))


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
              allow_neg_eigval=False, safe_gate=False, lower_bound=None, cu_seqlens=None, A_log=None, dt_bias=None):
    """FLA's chunk_kda signature (A_log / dt_bias as keywords)."""
    return _delta("chunk_kda", q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, A_log, dt_bias,
                  use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_gate_in_kernel=use_gate_in_kernel,
                  use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
                  safe_gate=safe_gate, lower_bound=lower_bound)


def chunk_gdn(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
              use_gate_in_kernel=False, cu_seqlens=None, A_log=None, dt_bias=None):
    """FLA's chunk_gated_delta_rule signature (A_log / dt_bias as keywords)."""
    return _delta("chunk_gdn", q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, A_log, dt_bias,
                  use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                  allow_neg_eigval=allow_neg_eigval, use_gate_in_kernel=use_gate_in_kernel)
