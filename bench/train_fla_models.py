#!/usr/bin/env python3
"""Training throughput of FLA's own causal LMs, FLA alone against FLA with lina as its backend, in one process.

The method of FLA's benchmarks/benchmark_training_throughput.py: AutoModelForCausalLM.from_config(config) in
bf16, accelerate's Accelerator(mixed_precision='bf16'), fused AdamW (lr 3e-4, betas (0.9, 0.95), weight decay
0.1) with a cosine schedule, random tokens with labels = tokens (and FLA's random cu_seqlens with --varlen),
warm-up steps, then timed steps with a synchronize after each; tokens/s = tokens / wall time of the timed
steps; peak memory = torch.cuda.max_memory_allocated over the warm-up and timed steps (lina's scratch is
taken from PyTorch's allocator, so it is included). Each (model, size, data) cell runs FLA first, then FLA with
lina registered (`lina.fla_backend.register()`, switched per run by FLA's own FLA_LINA variable), same seed.
After every timed run of the process, each cell runs again for --profile-steps steps under torch.profiler (no
run is timed after a profiler session: it leaves CUDA launches slower for the rest of the process): the GPU time
of the attention op (lina::chunk_* operators, or FLA's Chunk*Function forward and backward) as a fraction of all
GPU time, and with --profile-top N the N kernels with the most GPU time.

Models: gla, kda, gated_deltanet; sizes: `default` (FLA's config defaults) and `340m` (hidden 1024, 24 layers).

    python3 bench/train_fla_models.py --models kda,gated_deltanet,gla --sizes default,340m --json out.json
    python3 bench/train_fla_models.py --cpu-smoke      # tiny configs on the CPU backend, 2 steps, no timing

--cpu-smoke (CI): FLA's RMSNorm, gated RMSNorm and activations have only Triton kernels, so on the CPU they are replaced, in
this process only, by the same functions written in torch; the attention op runs on lina's CPU backend.
"""
import argparse
import gc
import json
import os
import platform
import re
import subprocess
import time

import torch

SIZES = {
    "default": {},
    "340m": {"gla": dict(hidden_size=1024, num_hidden_layers=24, num_heads=4),
             "kda": dict(hidden_size=1024, num_hidden_layers=24, num_heads=8, head_dim=128),
             "gated_deltanet": dict(hidden_size=1024, num_hidden_layers=24, num_heads=4, head_dim=256)},
    "smoke": {"gla": dict(hidden_size=64, num_hidden_layers=2, num_heads=2, vocab_size=256),
              "kda": dict(hidden_size=64, num_hidden_layers=2, num_heads=2, head_dim=32, vocab_size=256),
              "gated_deltanet": dict(hidden_size=64, num_hidden_layers=2, num_heads=2, head_dim=32, vocab_size=256)},
}
CPU_SMOKE_FLAGS = dict(fuse_norm=False, fuse_swiglu=False, fuse_cross_entropy=False, use_short_conv=False)
ATTENTION_OP = re.compile(r"^(lina::chunk_\w+|Chunk\w*Function|autograd::engine::evaluate_function: Chunk\w*FunctionBackward)$")


def prepare_inputs(batch_size, seq_len, varlen, vocab_size, device):
    """FLA's prepare_inputs (context_len unset)."""
    if varlen:
        tokens = torch.randint(high=vocab_size, size=(1, batch_size * seq_len), device=device)
        cu_seqlens = torch.cat([
            torch.tensor([0]),
            torch.randperm(batch_size * seq_len - 16)[:torch.randint(8, 64, size=(1,))] + 16,
            torch.tensor([batch_size * seq_len]),
        ], 0).sort()[0].to(dtype=torch.int32, device=device)
    else:
        tokens = torch.randint(high=vocab_size, size=(batch_size, seq_len), device=device)
        cu_seqlens = None
    return tokens, cu_seqlens


def make_config(name, size, cpu, sizes=SIZES):
    import fla  # noqa: F401  (registers FLA's configs with transformers)
    from transformers import AutoConfig
    config = AutoConfig.for_model(name)
    for key, value in sizes[size].get(name, {}).items():
        setattr(config, key, value)
    if cpu:
        for key, value in CPU_SMOKE_FLAGS.items():
            setattr(config, key, value)
    return config


def count_attention_fraction(prof):
    """GPU time of the kernels launched under the attention op / GPU time of all kernels. Each kernel is counted
    once, through the CPU event that launched it (FunctionEvent.kernels); it is the attention op's if that event
    has an attention event among its ancestors (lina's forward operator appears twice in that chain: its
    autograd kernel calls it again below autograd)."""
    total = attention = 0.0
    for e in prof.events():
        launched = sum(k.duration for k in getattr(e, "kernels", []))
        if not launched:
            continue
        total += launched
        node = e
        while node is not None and not ATTENTION_OP.match(node.name):
            node = node.cpu_parent
        if node is not None:
            attention += launched
    return (attention / total if total else None), total / 1e3


def top_kernels(prof, n):
    """The n kernels of the profiled steps with the most GPU time: [name (first 120 characters), ms, launches]."""
    by_name = {}
    for e in prof.events():
        for k in getattr(e, "kernels", []):
            ms, count = by_name.get(k.name, (0.0, 0))
            by_name[k.name] = (ms + k.duration / 1e3, count + 1)
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:n]
    return [[name[:120], round(ms, 3), count] for name, (ms, count) in ranked]


def run_cell(name, size, backend, a, device, profile=False):
    """One training run; returns its record. profile: a second run of the cell, after every timed run of the
    process (a torch.profiler session leaves CUDA launches slower for the rest of the process, so no run is timed
    after one): two warm-up steps, then --profile-steps steps under the profiler; returns what they measured."""
    from accelerate import Accelerator
    from torch.optim import AdamW
    from transformers import AutoModelForCausalLM
    from transformers.optimization import get_cosine_schedule_with_warmup
    os.environ["FLA_LINA"] = "1" if backend == "lina" else "0"
    torch.manual_seed(a.seed)
    config = make_config(name, size, device.type == "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_config(config).to(device).to(dtype)
    params = model.num_parameters()
    accelerator = Accelerator(mixed_precision="bf16" if device.type == "cuda" else "no", cpu=device.type == "cpu")
    optimizer = AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=device.type == "cuda")
    scheduler = get_cosine_schedule_with_warmup(optimizer, 0, 1024)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()

    def step():
        tokens, cu_seqlens = prepare_inputs(a.batch_size, a.seq_len, a.varlen, config.vocab_size, device)
        loss = model(tokens, labels=tokens, cu_seqlens=cu_seqlens).loss
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        return loss

    if profile:
        rec = profiled_steps(step, sync, a)
    else:
        t0 = time.time()
        for i in range(a.warmup_steps):
            loss = step()
            if a.verbose:
                sync()
                print(f"  {name} {size} {backend} warm-up step {i + 1}: {time.time() - t0:.1f} s", flush=True)
        sync()
        start = time.time()
        for _ in range(a.steps):
            loss = step()
            sync()
        duration = time.time() - start
        rec = {"model": name, "size": size, "backend": backend, "params": params, "batch_size": a.batch_size,
               "seq_len": a.seq_len, "varlen": a.varlen, "warmup_steps": a.warmup_steps, "steps": a.steps,
               "loss": float(loss), "tokens_per_s": a.batch_size * a.seq_len * a.steps / duration if duration else None,
               "ms_per_step": duration / max(a.steps, 1) * 1e3, "lina_gdn_training": a.lina_gdn_training,
               "head_dims": {k: getattr(config, k, None) for k in ("num_heads", "head_dim", "expand_v", "hidden_size",
                                                                   "num_hidden_layers")}}
        if device.type == "cuda":
            rec["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
        if backend == "lina":
            import lina.fla_backend
            rec["lina_declines"] = {f"{op}: {why}": n for (op, why), n in lina.fla_backend.declines().items()}
    del model, optimizer, scheduler, accelerator
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rec


def profiled_steps(step, sync, a):
    """Two warm-up steps, then --profile-steps steps under torch.profiler: what they measured."""
    for _ in range(min(a.warmup_steps, 2)):
        step()
    sync()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(a.profile_steps):
            step()
        sync()
    rec = {}
    rec["attention_gpu_fraction"], rec["profiled_gpu_ms"] = count_attention_fraction(prof)
    if a.profile_top:
        rec["top_kernels"] = top_kernels(prof, a.profile_top)
    return rec


def machine():
    m = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        import fla
        import transformers
        m.update(fla=fla.__version__, transformers=transformers.__version__)
    except Exception as e:  # recorded, not fatal: the run itself imports them
        m["import_error"] = str(e)
    if torch.cuda.is_available():
        m["gpu"] = torch.cuda.get_device_name()
        try:
            m["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm",
                                              "--format=csv,noheader"], capture_output=True, text=True,
                                             timeout=20).stdout.strip()
        except Exception as e:
            m["nvidia_smi"] = f"unavailable: {e}"
    return m


def install_cpu_norms():
    """On the CPU only: FLA's RMSNorm, gated RMSNorm and activations in torch (FLA has Triton kernels alone for
    them)."""
    import fla.modules

    def rms(self, x):
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.weight is not None:
            y = y * self.weight
        return y + self.bias if getattr(self, "bias", None) is not None else y

    def norm(self, x, residual=None, prenorm=False, residual_in_fp32=False):
        if residual is not None or prenorm:
            raise NotImplementedError("cpu smoke: the norm takes no residual")
        return rms(self, x)

    def gated(self, x, g, residual=None, prenorm=False, residual_in_fp32=False):
        gate = torch.nn.functional.silu(g) if self.activation in ("swish", "silu") else torch.sigmoid(g)
        return norm(self, x, residual, prenorm) * gate
    fla.modules.RMSNorm.forward = norm
    fla.modules.FusedRMSNormGated.forward = gated
    from fla.modules.activations import ACT2FN  # the layers look their activations up here when built
    for name in ("swish", "silu"):
        ACT2FN[name] = torch.nn.functional.silu
    ACT2FN["sigmoid"] = torch.sigmoid
    import fla.modules.mlp
    fla.modules.mlp.swiglu = lambda gate, y: torch.nn.functional.silu(gate) * y


def write_records(path, records, earlier, tool="bench/train_fla_models.py"):
    """The file's earlier records and this run's (after every timed cell and every profiled one, so a run cut
    short keeps what it measured); written atomically."""
    doc = {"tool": tool, "machine": machine(), "records": earlier + records}
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(path + ".tmp", path)


def earlier_records(path):
    """The records already in --json's file (this run appends to them)."""
    if path and os.path.exists(path):
        with open(path) as f:
            return json.load(f).get("records", [])
    return []


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="gla,kda,gated_deltanet")
    p.add_argument("--sizes", default="default,340m")
    p.add_argument("--backends", default="fla,lina")
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=8192)
    p.add_argument("--varlen", action="store_true")
    p.add_argument("--warmup-steps", type=int, default=16)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--profile-steps", type=int, default=2)
    p.add_argument("--profile-top", type=int, default=0,
                   help="record the N kernels with the most GPU time over the profiled steps (name, ms, launches)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="append the records to this JSON file")
    p.add_argument("--fla-gated-bwd-on-old-triton", action="store_true",
                   help="let FLA run its gated chunk backward on Triton 3.4-3.7.0, which its version guard refuses "
                        "(fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 = True); GatedDeltaNet's FLA run needs it on "
                        "such a Triton. Its gradients are then unverified: compare the losses of the two runs")
    p.add_argument("--lina-gdn-training", action="store_true",
                   help="send GatedDeltaNet's training calls to lina even where FLA's gated backward runs (lina's FLA "
                        "backend declines them there by default: lina.fla_backend.register(gdn_training=True))")
    p.add_argument("--verbose", action="store_true", help="print the time of every warm-up step")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny configs on the CPU, 2 steps, no timing")
    a = p.parse_args()
    for name in ("warmup_steps", "steps", "profile_steps"):
        if getattr(a, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(a, name)}")
    device = torch.device("cpu" if a.cpu_smoke else "cuda")
    if a.cpu_smoke:
        a.sizes, a.batch_size, a.seq_len, a.warmup_steps, a.steps, a.profile_steps = "smoke", 1, 128, 1, 1, 0
        install_cpu_norms()
    elif not torch.cuda.is_available():
        p.error("no CUDA device (use --cpu-smoke on a machine without a GPU)")
    import fla  # noqa: F401
    if a.fla_gated_bwd_on_old_triton:
        import fla.ops.common.chunk_o
        fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 = True
    import lina.fla_backend
    lina.fla_backend.register(gdn_training=a.lina_gdn_training)
    for backend in a.backends.split(","):
        if backend not in ("fla", "lina"):
            p.error(f"--backends: {backend!r}, expected fla or lina")
    cells = [(name, size, backend) for name in a.models.split(",") for size in a.sizes.split(",")
             for backend in a.backends.split(",") if device.type == "cuda" or backend != "fla"]  # FLA: GPU only
    profiled = device.type == "cuda" and a.profile_steps > 0
    earlier = earlier_records(a.json)

    def timed(name, size, backend):
        rec = run_cell(name, size, backend, a, device)
        print(json.dumps({k: rec[k] for k in ("model", "size", "backend", "varlen", "tokens_per_s",
                                               "ms_per_step", "loss") if k in rec}
                         | {k: rec.get(k) for k in ("peak_memory_gib",)}), flush=True)
        if device.type == "cpu" and not torch.isfinite(torch.tensor(rec["loss"])):
            raise SystemExit(f"cpu smoke: {name} loss is not finite: {rec['loss']}")
        return rec

    def measured(name, size, backend, rec):
        rec.update(run_cell(name, size, backend, a, device, profile=True))
        print(json.dumps({k: rec[k] for k in ("model", "size", "backend", "attention_gpu_fraction",
                                               "profiled_gpu_ms")}), flush=True)

    def save(records):
        if a.json:
            write_records(a.json, records, earlier)
    timed_then_profiled(cells, timed, measured if profiled else None, save)


def timed_then_profiled(cells, timed, profiled, save):
    """Every cell's timed run, then (profiled not None) every cell's profiled run: no run is timed after a
    torch.profiler session of the process. timed(*cell) -> record; profiled(*cell, record) adds to it; save(records)
    after each run, so a run cut short keeps what it measured. Returns the records."""
    records = []
    for cell in cells:
        records.append(timed(*cell))
        save(records)
    if profiled is not None:
        for cell, rec in zip(cells, records):
            profiled(*cell, rec)
            save(records)
    return records

if __name__ == "__main__":
    main()
