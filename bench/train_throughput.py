#!/usr/bin/env python3
"""End-to-end training throughput of a small linear-attention LM block stack (FLA's
benchmark_training_throughput.py, for lina's kernels and, side by side, FLA's).

    python3 bench/train_throughput.py --name kda --batch-size 2 --seq-len 8192 [--varlen] [--impl lina|fla]

Each layer: RMSNorm -> q/k/v/gate(/beta) projections -> the chunk op -> output projection -> residual,
then an MLP. Timed: forward + backward + AdamW step, after warm-up; prints tokens/s and writes JSON.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bindings" / "python"))


def op_fn(name, impl):
    if impl == "lina":
        import lina_torch as m
        return {"gla": m.chunk_gla, "kda": m.chunk_kda, "gdn": m.chunk_gdn}[name]
    if name == "gla":
        from fla.ops.gla import chunk_gla
        return chunk_gla
    if name == "kda":
        from fla.ops.kda import chunk_kda
        return chunk_kda
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    return chunk_gated_delta_rule


class Layer(nn.Module):
    def __init__(self, name, impl, d_model, heads, head_dim):
        super().__init__()
        self.name, self.h, self.d = name, heads, head_dim
        self.fn = op_fn(name, impl)
        inner = heads * head_dim
        self.norm1, self.norm2 = nn.RMSNorm(d_model), nn.RMSNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * inner, bias=False)
        self.gate = nn.Linear(d_model, inner if name != "gdn" else heads, bias=False)
        self.beta = nn.Linear(d_model, heads, bias=False) if name != "gla" else None
        self.out = nn.Linear(inner, d_model, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model, bias=False), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model, bias=False))

    def forward(self, x, cu_seqlens):
        B, T, _ = x.shape
        y = self.norm1(x)
        q, k, v = self.qkv(y).view(B, T, 3, self.h, self.d).unbind(2)
        gx = self.gate(y)
        if self.name == "gla":
            g = F.logsigmoid(gx.view(B, T, self.h, self.d).float()).clamp_min(-5).to(x.dtype)
            o = self.fn(q.contiguous(), k.contiguous(), v.contiguous(), g.contiguous(), cu_seqlens=cu_seqlens)[0]
        else:
            beta = torch.sigmoid(self.beta(y).float()).to(x.dtype).contiguous()
            if self.name == "kda":
                g = F.logsigmoid(gx.view(B, T, self.h, self.d).float()).clamp_min(-5).to(x.dtype).contiguous()
                o = self.fn(q.contiguous(), k.contiguous(), v.contiguous(), g, beta, use_qk_l2norm_in_kernel=True,
                            safe_gate=True, lower_bound=-5.0, cu_seqlens=cu_seqlens)[0]
            else:
                g = F.logsigmoid(gx.float()).to(x.dtype).contiguous()
                o = self.fn(q.contiguous(), k.contiguous(), v.contiguous(), g, beta, use_qk_l2norm_in_kernel=True,
                            cu_seqlens=cu_seqlens)[0]
        x = x + self.out(o.reshape(B, T, -1))
        return x + self.mlp(self.norm2(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--name", choices=["gla", "kda", "gdn"], required=True)
    ap.add_argument("--impl", choices=["lina", "fla"], default="lina")
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=8192)
    ap.add_argument("--varlen", action="store_true", help="pack the batch as one varlen sequence set")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=1024)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--lib", help="lina's liblina_c.so (default: $LINA_LIB, else build/bindings of this checkout)")
    a = ap.parse_args()
    if a.lib:
        if not Path(a.lib).is_file():
            ap.error(f"--lib: {a.lib} is not a file, expected lina's liblina_c.so")
        os.environ["LINA_LIB"] = a.lib  # read when lina_torch first loads the library
    if not torch.cuda.is_available():
        print("train-bench: no CUDA GPU visible to PyTorch", file=sys.stderr)
        sys.exit(2)
    torch.manual_seed(a.seed)
    heads = a.d_model // a.head_dim
    model = nn.Sequential(*[Layer(a.name, a.impl, a.d_model, heads, a.head_dim) for _ in range(a.layers)]).cuda().bfloat16()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    B, T = (1, a.batch_size * a.seq_len) if a.varlen else (a.batch_size, a.seq_len)
    cu = None
    if a.varlen:
        g = torch.Generator().manual_seed(a.seed)
        cuts = sorted(torch.randint(1, T, (a.batch_size * 4 - 1,), generator=g).tolist())
        cu = torch.tensor([0] + cuts + [T], dtype=torch.int32, device="cuda")
    x = torch.randn(B, T, a.d_model, device="cuda", dtype=torch.bfloat16)

    def step():
        y = x
        for layer in model:
            y = layer(y, cu)
        loss = y.float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    res = dict(name=a.name, impl=a.impl, batch_size=a.batch_size, seq_len=a.seq_len, varlen=a.varlen, layers=a.layers,
               d_model=a.d_model, head_dim=a.head_dim, step_s_median=med, tokens_per_s=B * T / med, step_times_s=times,
               gpu=torch.cuda.get_device_name(0))
    print(f"{a.impl} {a.name} B{a.batch_size} T{a.seq_len}{' varlen' if a.varlen else ''}: "
          f"{med * 1e3:.1f} ms/step, {B * T / med:,.0f} tokens/s")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
