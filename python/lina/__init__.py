"""lina: linear-attention kernels for NVIDIA Hopper as PyTorch operators, with FLA's interface.

    import lina
    o, ht = lina.chunk_kda(q, k, v, g, beta, output_final_state=True)   # FLA 0.6.0's chunk_kda signature
    lina.fla_backend.register()                                         # FLA's own layers then run lina

The operators are torch.ops.lina.* (torch.library custom ops: fake kernels for torch.compile, autograd,
CUDA-graph capturable); lina.chunk_gla / chunk_kda / chunk_gated_delta_rule take FLA's keywords.
"""
from lina._library import library_path, version
from lina.ops import chunk_gated_delta_rule, chunk_gdn, chunk_gla, chunk_kda

__all__ = ["chunk_gla", "chunk_kda", "chunk_gated_delta_rule", "chunk_gdn", "library_path", "version"]
__version__ = version()
