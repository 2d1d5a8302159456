#!/usr/bin/env python3
"""Generation with FLA's own causal LMs, FLA alone against FLA with lina as its backend, in one process: a prefill
(FLA's layers run the chunk op on prompts longer than 64 tokens), then N greedy decode steps (one token per sequence
through the layers' fused_recurrent op and FLA's Cache), timed per step.

Each (model, size, batch) cell runs FLA first, then FLA with lina registered (`lina.fla_backend.register()`,
switched per run by FLA's own FLA_LINA variable), same seed, same random weights and prompts. The loop is manual
(model(input_ids=next, past_key_values=cache, use_cache=True) under torch.inference_mode(), logits_to_keep=1), a
synchronize after each step: latency per step p50 / p90 (wall, as a serving loop sees it, host time included),
tokens/s = batch x steps / the decode steps' wall time, prefill time, peak memory (torch.cuda.max_memory_allocated
over prefill and decode; lina's scratch comes from PyTorch's allocator). The lina run also records how many of its
greedy tokens equal FLA's and the error ratio of its prefill logits against FLA's.

Models: gla, kda, gated_deltanet. Sizes: `small` (hidden 1024, 8 layers, head dims 128: what lina's CUDA kernels
take without column blocks; GatedDeltaNet with value heads twice the key heads as Qwen3-Next) and `default` (FLA's
config defaults).

    python3 bench/gen_fla_models.py --models kda,gated_deltanet,gla --batch-sizes 1,64 --json out.json
    python3 bench/gen_fla_models.py --cpu-smoke      # tiny configs on lina's CPU backend, no timing

--cpu-smoke (CI): the tiny configs of bench/train_fla_models.py with FLA's Triton-only norms replaced in torch; lina
runs both the prefill and the decode, and the decode's logits must match one full-sequence forward over the prompt
and the generated tokens (the chunk op over the whole sequence): the state handed from prefill to decode and from
step to step is checked end to end.
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_fla_models import SIZES as TRAIN_SIZES, earlier_records, install_cpu_norms, make_config, write_records  # noqa: E402

SIZES = {
    "small": {"gla": dict(hidden_size=1024, num_hidden_layers=8, num_heads=8, expand_k=1.0, expand_v=1.0),
              "kda": dict(hidden_size=1024, num_hidden_layers=8, num_heads=8, head_dim=128),
              "gated_deltanet": dict(hidden_size=1024, num_hidden_layers=8, num_heads=4, num_v_heads=8, head_dim=128,
                                     expand_v=1.0)},
    "default": {},
    "smoke": TRAIN_SIZES["smoke"],
}
TOKENS_MATCH_NOTE = "greedy tokens equal to FLA's run, position by position, up to the first difference"
SMOKE_TOLERANCE = 1e-3  # fp32 on the CPU: decode logits against the full-sequence forward, error ratio


def err_ratio(ref, out):
    ref, out = ref.double(), out.double()
    return ((ref - out).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt().clamp_min(1e-30)).item()


def pct(values, p):
    s = sorted(values)
    x = (len(s) - 1) * p
    lo, hi = int(x), min(int(x) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (x - lo)


def generate(model, prompt, steps, sync):
    """Prefill, then `steps` greedy decode steps; returns (tokens [B, steps], last prefill logits, prefill s,
    per-step seconds, the decode logits [B, steps, vocab])."""
    t0 = time.perf_counter()
    out = model(input_ids=prompt, use_cache=True, logits_to_keep=1)
    sync()
    prefill_s = time.perf_counter() - t0
    cache, logits = out.past_key_values, out.logits[:, -1]
    prefill_logits = logits.float()
    tokens, step_s, step_logits = [], [], []
    for _ in range(steps):
        nxt = logits.argmax(-1, keepdim=True)
        tokens.append(nxt)
        t0 = time.perf_counter()
        out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
        sync()
        step_s.append(time.perf_counter() - t0)
        cache, logits = out.past_key_values, out.logits[:, -1]
        step_logits.append(logits.float())
    return torch.cat(tokens, 1), prefill_logits, prefill_s, step_s, torch.stack(step_logits, 1)


def run_cell(name, size, batch, backend, a, device, fla_result=None):
    from transformers import AutoModelForCausalLM
    os.environ["FLA_LINA"] = "1" if backend == "lina" else "0"
    torch.manual_seed(a.seed)
    config = make_config(name, size, device.type == "cpu", SIZES)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_config(config).to(device=device, dtype=dtype).eval()
    gen = torch.Generator().manual_seed(a.seed + 1)
    prompt = torch.randint(config.vocab_size, (batch, a.prompt_len), generator=gen).to(device)
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    with torch.inference_mode():
        for _ in range(a.warmup):  # Triton autotuning and lina's first calls stay out of the figures
            generate(model, prompt, min(a.steps, 4), sync)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        if a.cpu_smoke:  # which of lina's operators ran: the smoke must have gone through both
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                tokens, prefill_logits, prefill_s, step_s, step_logits = generate(model, prompt, a.steps, sync)
            lina_calls = count_lina_calls(prof)
        else:
            tokens, prefill_logits, prefill_s, step_s, step_logits = generate(model, prompt, a.steps, sync)
    rec = {"model": name, "size": size, "backend": backend, "batch_size": batch, "prompt_len": a.prompt_len,
           "decode_steps": a.steps, "params": model.num_parameters(), "prefill_ms": prefill_s * 1e3,
           "prefill_tokens_per_s": batch * a.prompt_len / prefill_s,
           "decode_tokens_per_s": batch * a.steps / sum(step_s) if step_s else None,
           "step_ms_p50": pct(step_s, 0.5) * 1e3 if step_s else None,
           "step_ms_p90": pct(step_s, 0.9) * 1e3 if step_s else None,
           "step_ms_mean": statistics.mean(step_s) * 1e3 if step_s else None,
           "head_dims": {k: getattr(config, k, None) for k in ("hidden_size", "num_hidden_layers", "num_heads",
                                                               "num_v_heads", "head_dim", "expand_k", "expand_v")}}
    if cuda:
        rec["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    if backend == "lina":
        import lina.fla_backend
        rec["lina_declines"] = {f"{op}: {why}": n for (op, why), n in lina.fla_backend.declines().items()}
    if fla_result is not None:
        same = (tokens == fla_result["tokens"]).all(0).long()
        rec["tokens_equal_fla"] = int(same.cumprod(0).sum())
        rec["tokens_equal_fla_note"] = TOKENS_MATCH_NOTE
        rec["prefill_logits_err_ratio_vs_fla"] = err_ratio(fla_result["prefill_logits"], prefill_logits)
    result = {"tokens": tokens, "prefill_logits": prefill_logits}
    if a.cpu_smoke:
        rec["lina_calls"] = lina_calls
        if not any(op.startswith("lina::chunk_") for op in lina_calls) or not any(
                op.startswith("lina::fused_recurrent_") for op in lina_calls):
            raise SystemExit(f"cpu smoke: {name}: lina's chunk and decode operators did not both run: {lina_calls}")
        rec["decode_vs_full_forward_err_ratio"] = smoke_check(model, prompt, tokens, step_logits)
    del model
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return rec, result


def count_lina_calls(prof):
    """{lina operator: calls} in a profile (each call once: the autograd kernel's inner call is not counted)."""
    calls = {}
    for e in prof.events():
        if e.name.startswith("lina::") and not (e.cpu_parent is not None and e.cpu_parent.name == e.name):
            calls[e.name] = calls.get(e.name, 0) + 1
    return calls


def smoke_check(model, prompt, tokens, step_logits):
    """The decode logits against one forward over prompt + generated tokens (no cache): error ratio; a failure
    stops the smoke."""
    with torch.inference_mode():
        full = model(input_ids=torch.cat([prompt, tokens], 1), logits_to_keep=0).logits.float()
    ref = full[:, prompt.shape[1]:]  # the logits after each generated token
    r = err_ratio(ref, step_logits)
    if not r < SMOKE_TOLERANCE:
        raise SystemExit(f"cpu smoke: decode logits differ from the full-sequence forward: error ratio {r:.2e} "
                         f"(tolerance {SMOKE_TOLERANCE})")
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="gla,kda,gated_deltanet")
    p.add_argument("--sizes", default="small")
    p.add_argument("--backends", default="fla,lina")
    p.add_argument("--batch-sizes", default="1,64")
    p.add_argument("--prompt-len", type=int, default=512)
    p.add_argument("--steps", type=int, default=128, help="decode steps after the prefill")
    p.add_argument("--warmup", type=int, default=1, help="untimed generations (4 steps each) before the timed one")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="append the records to this JSON file")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny configs on lina's CPU backend, no timing")
    a = p.parse_args()
    for flag in ("prompt_len", "steps", "warmup"):
        if getattr(a, flag) < (1 if flag != "warmup" else 0):
            p.error(f"--{flag.replace('_', '-')}: got {getattr(a, flag)}, expected at least {1 if flag != 'warmup' else 0}")
    try:
        batches = [int(b) for b in a.batch_sizes.split(",")]
    except ValueError:
        p.error(f"--batch-sizes: got '{a.batch_sizes}', expected a comma list of positive integers")
    if any(b < 1 for b in batches):
        p.error(f"--batch-sizes: got {batches}, expected positive integers")
    for s in a.sizes.split(","):
        if s not in SIZES:
            p.error(f"--sizes: {s!r}, expected one of {', '.join(SIZES)}")
    device = torch.device("cpu" if a.cpu_smoke else "cuda")
    if a.cpu_smoke:
        a.sizes, batches, a.prompt_len, a.steps, a.warmup, a.backends = "smoke", [2], 80, 4, 0, "lina"
        install_cpu_norms()
    elif not torch.cuda.is_available():
        p.error("no CUDA device (use --cpu-smoke on a machine without a GPU)")
    import fla  # noqa: F401
    import lina.fla_backend
    lina.fla_backend.register()
    records, earlier = [], earlier_records(a.json)
    for name in a.models.split(","):
        for size in a.sizes.split(","):
            for batch in batches:
                fla_result = None
                for backend in a.backends.split(","):
                    if backend not in ("fla", "lina"):
                        p.error(f"--backends: {backend!r}, expected fla or lina")
                    rec, result = run_cell(name, size, batch, backend, a, device,
                                           fla_result if backend == "lina" else None)
                    if backend == "fla":
                        fla_result = result
                    records.append(rec)
                    if a.json:
                        write_records(a.json, records, earlier, tool="bench/gen_fla_models.py")
                    keys = ("model", "size", "backend", "batch_size", "decode_tokens_per_s", "step_ms_p50",
                            "step_ms_p90", "prefill_ms", "peak_memory_gib", "tokens_equal_fla",
                            "decode_vs_full_forward_err_ratio", "lina_calls", "lina_declines")
                    print(json.dumps({k: rec[k] for k in keys if k in rec}), flush=True)


if __name__ == "__main__":
    main()
