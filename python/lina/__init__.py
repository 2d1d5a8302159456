"""lina: linear-attention kernels for NVIDIA Hopper as PyTorch operators, with FLA's interface.

    import lina
    o, ht = lina.chunk_kda(q, k, v, g, beta, output_final_state=True)   # FLA 0.6.0's chunk_kda signature
    o, ht = lina.fused_recurrent_kda(q1, k1, v1, g1, beta1, initial_state=ht, output_final_state=True)  # decode
    lina.fla_backend.register()                                         # FLA's own layers then run lina

The operators are torch.ops.lina.* (torch.library custom ops: fake kernels for torch.compile, C++ autograd,
CUDA-graph capturable); lina.chunk_gla / chunk_kda / chunk_gated_delta_rule and the decode ops
lina.fused_recurrent_gla / fused_recurrent_kda / fused_recurrent_gated_delta_rule (forward only) take FLA's keywords. The
extension loads on first use of any of them, so tools such as `python -m lina.bench --list` start without it.
"""
import importlib

# Submodules that load on first attribute access, as the operators do.
_SUBMODULES = ("context_parallel", "decode", "fla_backend", "ops", "bench")
_DECODE = ("fused_recurrent_gla", "fused_recurrent_kda", "fused_recurrent_gated_delta_rule", "fused_recurrent_gdn")

__all__ = ["chunk_gla", "chunk_kda", "chunk_gated_delta_rule", "chunk_gdn", *_DECODE, "library_path", "version"]
_FROM = {"chunk_gla": "lina.ops", "chunk_kda": "lina.ops", "chunk_gated_delta_rule": "lina.ops",
         "chunk_gdn": "lina.ops", **{name: "lina.decode" for name in _DECODE}, "library_path": "lina._library",
         "version": "lina._library"}


def __getattr__(name):
    if name == "__version__":
        return importlib.import_module("lina._library").version()
    if name in _SUBMODULES:
        return importlib.import_module(f"lina.{name}")
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module 'lina' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
