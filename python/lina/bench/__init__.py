"""lina.bench: the same-GPU side by side of lina and its peers (`python -m lina.bench`).

Every implementation (lina, FLA's Triton kernels, and FlashKDA, FlashInfer, FlashQLA when installed) runs
on the same seeded inputs under the same timers (triton.testing.do_bench's method, and optionally a GPU-only
timer that hides host time behind a sleep kernel), and every output is checked against one reference: lina's
fp32 GPU recurrence through its C ABI (liblina_c.so), or its fp64 host recurrence for CPU tensors. The
results are lina.bench/1 JSON (one row per implementation and cell, `impl` naming it) that `lina summarize`
reads, and a markdown table with each implementation's speedup over a baseline (default FLA) per shape and
their geomean. bench/README.md and docs/side-by-side.md describe the method and the flags.
"""
