#!/usr/bin/env python3
"""The side by side is `python -m lina.bench` (python/lina/bench, bench/README.md): this file runs it with the
same flags, for the commands recorded in benchmarks/RECORDS.md. It needs lina's PyTorch extension
(LINA_TORCH_LIB=BUILD/bindings/torch/_C.so when lina is not installed) and, for the reference, liblina_c.so
(--lib). bench/host_overhead_probe.py imports parse_shape, make_inputs and timed_fn from here: they time lina
through the ctypes wrapper bindings/python/lina_torch.py, whose host path that probe measures.

    LINA_TORCH_LIB=build/bindings/torch/_C.so python3 bench/fla_side_by_side.py --ops chunk_gla --modes fwd \\
        --lib build/bindings/liblina_c.so --out /tmp/side
"""
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT / "python"), str(_ROOT / "bindings" / "python")]

from lina.bench.impls.base import Implementation  # noqa: E402
from lina.bench.impls.fla_impl import Fla  # noqa: E402
from lina.bench.workload import Workload, parse_shape  # noqa: E402,F401  (parse_shape: the probe's)
from lina.bench.workload import make_workload  # noqa: E402


def make_inputs(op, B, T, H, D, seed, cu=None):
    return make_workload(op, f"B{B}_T{T}_H{H}_D{D}", seed, "cuda").tensors


class _LinaCtypes(Implementation):
    """lina through bindings/python/lina_torch.py (the C ABI), as the side by side timed it before lina.bench."""
    name, label, ops = "lina", "lina-cuda", ("chunk_gla", "chunk_kda", "chunk_gdn")

    def forward(self, work, t):
        import lina_torch
        fn = {"chunk_gla": lina_torch.chunk_gla, "chunk_kda": lina_torch.chunk_kda, "chunk_gdn": lina_torch.chunk_gdn}
        args = [t[n] for n in ("q", "k", "v", "g", "beta") if n in t]
        return fn[work.op](*args, cu_seqlens=work.cu, **work.fla_flags())[0]


def timed_fn(impl, op, mode, t, cu):
    """What one sample of a cell calls: `impl` lina (the ctypes wrapper) or fla, mode fwd / fwdbwd / infer."""
    q = t["q"]
    B, T, H, D = q.shape
    work = Workload(op=op, shape=f"B{B}_T{T}_H{H}_D{D}", B=B, T=T, H=H, D=D, gate="precomputed", tensors=t, cu=cu)
    return (Fla() if impl == "fla" else _LinaCtypes()).prepare(work, mode)


if __name__ == "__main__":
    from lina.bench.cli import main
    sys.exit(main())
