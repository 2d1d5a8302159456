#!/usr/bin/env python3
"""lina vs FLA Triton, same run, same inputs, same timer (the harness's method in Python).

Timer (both sides), by default the method of FLA's own runner, triton.testing.do_bench (the one the
anchors and every published comparison use): a 256 MB buffer cleared with zero_() before every sample
(Triton's get_empty_cache_for_benchmark), CUDA events around each call, no synchronisation between the
samples of a batch (the host enqueues ahead, as do_bench does), warm-up of max(1, 25 ms / estimate)
calls after an estimate from 5 flushed calls; then batches of max(--min-samples, 100 ms / estimate)
samples (at most --max-samples) until relative noise (std/mean) is under --max-noise or --budget-s per
cell is spent. It stays the primary number (median_ms, the speedup and x floor columns). Inputs follow
FLA's benchmarks/ops/registry.py transforms from one torch seed. Writes lina.bench/1 JSON and a markdown
table. --timer synced is the method of the early records (a 2 x L2 flush and a synchronize after
every sample): it also counts the host time of a call whenever the GPU finishes the flush before the
host has enqueued the call's kernels, which do_bench does not (its queue stays ahead of the GPU).

--gpu-time (off by default) times every cell a second time, same inputs and stopping rule, GPU only:
host time is then hidden for every sample, whatever the queue state.
Each GPU-only sample is: flush, torch.cuda._sleep(N), start event, call, end event. N covers the host
time of one call (max(0.2 ms, 3 x the median host ms of 5 calls after a synchronize); cycles per ms
measured once per process), so every kernel is queued before the GPU reaches the start event. A sample whose start
event has already fired when the call and end event are enqueued (host not hidden) is dropped and N
doubled, at most 4 times; the row gets gpu_error if it still happens 3 times at that length (a call that
waits for the GPU, e.g. a device-to-host copy). Each sample is then reduced by the median interval of
11 empty start/end pairs measured the same way (flush, sleep N) after each row's samples. Fields: gpu_*
per row, columns "FLA GPU ms | lina GPU ms | GPU speedup | lina GPU x floor" in the markdown. The
primary numbers are measured first and exactly as without the flag.

    python3 bench/fla_side_by_side.py --ops chunk_gla --modes fwd fwdbwd --lib build/bindings/liblina_c.so --out /tmp/side
bench/procedures/side_by_side.sh runs it one process per op (bench/README.md).
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bindings" / "python"))
import lina_torch  # noqa: E402

DEFAULT_SHAPES = ["B1_T8192_H96_D128", "B2_T16384_H16_D128", "B4_T2048_H16_D128", "B4_T4096_H64_D128",
                  "B8_T2048_H32_D256", "B8_T1024_H8_D64"]
HBM_GBPS = 4300.0  # measured device copy on the lent H200 (anchors/README.md)
TC_TFLOPS = 790.0
# --gpu-time: the sleep before each sample, as a multiple of the host time of a call, with a floor
GPU_SLEEP_FLOOR_MS = 0.2
GPU_SLEEP_HOST_MULT = 3.0
GPU_SLEEP_DOUBLINGS = 4  # after a sample whose host time was not hidden
GPU_LEAKS_AT_CAP = 3  # leaked samples at the longest sleep before the row gives up
GPU_SIZING_CALLS = 5
GPU_CORRECTION_N = 11
# triton.testing.do_bench (Triton 3.6, FLA's runner): flush buffer, warm-up and measurement windows
DOBENCH_FLUSH_BYTES = 256 << 20
DOBENCH_WARMUP_MS, DOBENCH_REP_MS = 25.0, 100.0
PRIMARY_METHODS = {
    "dobench": "as triton.testing.do_bench (FLA's runner): 256 MB zero_() flush, start event, call, end event; "
               "samples enqueued back to back, one synchronize per batch; warm-up max(1, 25 ms / estimate) calls",
    "synced": "2 x L2 (min 64 MB) flush, start event, call, end event, synchronize after every sample "
              "(host time of a call is counted whenever the GPU finishes the flush first)",
}
GPU_METHOD = ("L2 flush, torch.cuda._sleep(N), start event, call, end event, minus the median of "
              f"{GPU_CORRECTION_N} empty start/end pairs after the same flush and sleep (per row); "
              f"N = max({GPU_SLEEP_FLOOR_MS} ms, {GPU_SLEEP_HOST_MULT:g} x median host ms of {GPU_SIZING_CALLS} calls), "
              f"doubled (at most {GPU_SLEEP_DOUBLINGS} times) after a sample whose start event fired before "
              "the call was enqueued; such samples are dropped")


def parse_shape(name):
    parts = dict((p[0], int(p[1:])) for p in name.split("_") if p[0] in "BTHD" and p[1:].isdigit())
    return parts["B"], parts["T"], parts["H"], parts["D"]


def floor_us(op, tokens_heads, d):
    """anchors/README.md 'Floors': bytes per token-head in the forward, and FLOPs with C = 64."""
    C = 64
    byts = {"chunk_gla": 10 * d, "chunk_kda": 10 * d + 2, "chunk_gdn": 8 * d + 4}[op] * tokens_heads
    flops = (4 * C * d + 4 * d * d if op == "chunk_gla" else 10 * C * d + 6 * d * d + C * C) * tokens_heads
    return byts, flops, max(byts / (HBM_GBPS * 1e3), flops / (TC_TFLOPS * 1e6))


def longtail_cu(total, seed):
    """Many short sequences plus a few long ones, packed to exactly `total` tokens."""
    g = torch.Generator().manual_seed(seed)
    lens, left = [], total
    while left > 0:
        long = torch.rand(1, generator=g).item() < 0.1
        n = int(torch.randint(2048, 8192, (1,), generator=g)) if long else int(torch.randint(16, 512, (1,), generator=g))
        n = min(n, left)
        lens.append(n)
        left -= n
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32)


def make_inputs(op, B, T, H, D, seed, cu=None):
    torch.manual_seed(seed)
    dev, dt = "cuda", torch.bfloat16
    q, k, v = (torch.randn(B, T, H, D, device=dev, dtype=dt) for _ in range(3))
    x = torch.randn(B, T, H, D if op != "chunk_gdn" else 1, device=dev, dtype=dt)
    if op == "chunk_gla":
        g = F.logsigmoid(x.float()).clamp_min(-5).to(dt)
        return dict(q=q, k=k, v=v, g=g)
    g = F.logsigmoid(x.float()).to(dt)
    if op == "chunk_gdn":
        g = g.squeeze(-1)
    beta = torch.sigmoid(torch.randn(B, T, H, device=dev, dtype=torch.float32)).to(dt)
    return dict(q=q, k=k, v=v, g=g, beta=beta)


def call(impl, op, t, cu):
    if impl == "fla":
        if op == "chunk_gla":
            from fla.ops.gla import chunk_gla
            return chunk_gla(t["q"], t["k"], t["v"], t["g"], cu_seqlens=cu)[0]
        if op == "chunk_kda":
            from fla.ops.kda import chunk_kda
            return chunk_kda(t["q"], t["k"], t["v"], t["g"], t["beta"], use_qk_l2norm_in_kernel=True, safe_gate=True,
                             lower_bound=-5.0, cu_seqlens=cu)[0]
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        return chunk_gated_delta_rule(t["q"], t["k"], t["v"], t["g"], t["beta"], use_qk_l2norm_in_kernel=True,
                                      cu_seqlens=cu)[0]
    if op == "chunk_gla":
        return lina_torch.chunk_gla(t["q"], t["k"], t["v"], t["g"], cu_seqlens=cu)[0]
    if op == "chunk_kda":
        return lina_torch.chunk_kda(t["q"], t["k"], t["v"], t["g"], t["beta"], use_qk_l2norm_in_kernel=True,
                                    safe_gate=True, lower_bound=-5.0, cu_seqlens=cu)[0]
    return lina_torch.chunk_gdn(t["q"], t["k"], t["v"], t["g"], t["beta"], use_qk_l2norm_in_kernel=True, cu_seqlens=cu)[0]


def timed_fn(impl, op, mode, t, cu):
    """What one sample of a cell calls, on leaf copies of the inputs `t`: fwd (the training forward:
    inputs that need gradients), infer (no grad), fwdbwd (forward, then autograd backward with a fixed
    random do). FLA's GDN forward runs without grad (FLA refuses its backward here)."""
    grad = mode != "infer" and not (impl == "fla" and op == "chunk_gdn")
    ti = {n: x.detach().clone().requires_grad_(grad and n in ("q", "k", "v", "g", "beta")) for n, x in t.items()}
    o = call(impl, op, ti, cu)
    do = torch.randn_like(o)
    if mode == "fwdbwd":
        leaves = [x for x in ti.values() if x.requires_grad]
        fn = lambda: torch.autograd.grad(call(impl, op, ti, cu), leaves, do)  # noqa: E731
        fn()
        return fn
    if grad:
        return lambda: call(impl, op, ti, cu)

    def no_grad_fn():
        with torch.no_grad():
            return call(impl, op, ti, cu)
    return no_grad_fn


def stop_reason(a, samples, t0):
    """The stopping rule of both timers: None while sampling should go on."""
    n = len(samples)
    if n >= a.min_samples:
        noise = statistics.stdev(samples) / statistics.mean(samples)
        if noise < a.max_noise:
            return "noise"
        if time.perf_counter() - t0 > a.budget_s or n >= a.max_samples:
            return "time_budget"
    return None


class HostNotHidden(RuntimeError):
    """--gpu-time: the GPU kept reaching the start event before the host had enqueued the call."""


class Timer:
    def __init__(self, args):
        self.args = args
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        flush_bytes = DOBENCH_FLUSH_BYTES if args.timer == "dobench" else max(2 * l2, 64 << 20)
        self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
        if getattr(args, "gpu_time", False):
            self.cycles_per_ms = self.sleep_cycles_per_ms()

    def time(self, fn):
        return self.time_dobench(fn) if self.args.timer == "dobench" else self.time_synced(fn)

    def time_dobench(self, fn):
        """triton.testing.do_bench's loop (flush, start event, call, end event; synchronised once per batch,
        not per sample) under this script's stopping rule."""
        a = self.args
        fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(5):
            self.flush.zero_()
            fn()
        e.record()
        torch.cuda.synchronize()
        estimate_ms = max(s.elapsed_time(e) / 5, 1e-3)
        for _ in range(max(1, int(DOBENCH_WARMUP_MS / estimate_ms))):
            fn()
        batch = min(a.max_samples, max(a.min_samples, int(DOBENCH_REP_MS / estimate_ms)))
        samples, t0 = [], time.perf_counter()
        while True:
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(batch)]
            for s, e in events:
                self.flush.zero_()
                s.record()
                fn()
                e.record()
            torch.cuda.synchronize()
            samples += [s.elapsed_time(e) for s, e in events]
            why = stop_reason(a, samples, t0)
            if why:
                return samples, why

    def time_synced(self, fn):
        a = self.args
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        samples, t0 = [], time.perf_counter()
        while True:
            self.flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            samples.append(s.elapsed_time(e))
            why = stop_reason(a, samples, t0)
            if why:
                return samples, why

    def sleep_cycles_per_ms(self, cycles=2_000_000):
        """GPU clock cycles of torch.cuda._sleep per ms (the SM clock as this run sees it), to size sleeps."""
        torch.cuda._sleep(10 * cycles)  # loads the kernel and lets the SM clock rise from idle
        torch.cuda.synchronize()
        ms = []
        for _ in range(5):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.cuda._sleep(cycles)
            e.record()
            e.synchronize()
            ms.append(s.elapsed_time(e))
        return cycles / statistics.median(ms)

    def sleep_then_time(self, cycles, fn=None):
        """One GPU-only sample: (event ms, host ms of the call, whether the start event had fired before
        the call and the end event were enqueued, i.e. host time may be inside the interval)."""
        self.flush.zero_()
        torch.cuda._sleep(cycles)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        h0 = time.perf_counter()
        if fn is not None:
            fn()
        e.record()
        host_ms = (time.perf_counter() - h0) * 1e3
        leaked = s.query()
        e.synchronize()
        return s.elapsed_time(e), host_ms, leaked

    def time_gpu(self, fn):
        """--gpu-time: the GPU time of fn alone, as gpu_* row fields; called after time(fn), so fn is warm.
        The budget clock starts before the sizing, so sizing and samples share --budget-s under time()'s
        stopping rule; the leak rule bounds the doublings, the correction is a fixed 11 short samples."""
        a, t0 = self.args, time.perf_counter()
        host = []
        for _ in range(GPU_SIZING_CALLS):  # after a synchronize, as in the samples (the host is slower after a wait)
            self.flush.zero_()
            torch.cuda.synchronize()
            h0 = time.perf_counter()
            fn()
            host.append((time.perf_counter() - h0) * 1e3)
            torch.cuda.synchronize()
        cycles = int(max(GPU_SLEEP_FLOOR_MS, GPU_SLEEP_HOST_MULT * statistics.median(host)) * self.cycles_per_ms)
        cap = cycles << GPU_SLEEP_DOUBLINGS
        samples, call_host, leaks, cap_leaks = [], [], 0, 0
        while True:
            ms, host_ms, leaked = self.sleep_then_time(cycles, fn)
            call_host.append(host_ms)
            if leaked:  # the GPU waited for the host inside the interval: drop it, sleep longer
                leaks += 1
                if cycles >= cap:
                    cap_leaks += 1
                    if cap_leaks >= GPU_LEAKS_AT_CAP:
                        raise HostNotHidden(f"{leaks} samples, sleep up to {cycles / self.cycles_per_ms:.1f} ms, host "
                                            f"{statistics.median(call_host):.2f} ms per call (does the call wait for the GPU?)")
                cycles = min(2 * cycles, cap)
                continue
            samples.append(ms)
            why = stop_reason(a, samples, t0)
            if why:
                break
        # the same flush and sleep with nothing between the events: what the interval shows besides the call.
        # Per row, not per process: it then matches this row's final sleep and clock state, costs ~11 sleeps
        corr = statistics.median(self.sleep_then_time(cycles)[0] for _ in range(GPU_CORRECTION_N))
        st = stats([x - corr for x in samples])
        return dict({"gpu_" + k: v for k, v in st.items()}, gpu_stop_reason=why, gpu_correction_ms=corr,
                    gpu_correction_samples=GPU_CORRECTION_N, gpu_sleep_cycles=cycles,
                    gpu_sleep_ms=cycles / self.cycles_per_ms, gpu_sizing_host_ms=statistics.median(host),
                    gpu_call_host_ms=statistics.median(call_host), gpu_leaked_samples=leaks)


def stats(samples):
    s = sorted(samples)

    def pct(p):
        x = (len(s) - 1) * p
        lo, hi = math.floor(x), math.ceil(x)
        return s[lo] + (s[hi] - s[lo]) * (x - lo)
    return dict(samples=len(s), times_ms=samples, median_ms=pct(0.5), mean_ms=statistics.mean(s),
                std_ms=statistics.stdev(s) if len(s) > 1 else 0.0, min_ms=s[0], p10_ms=pct(0.1), p20_ms=pct(0.2),
                p80_ms=pct(0.8), p90_ms=pct(0.9), noise=statistics.stdev(s) / statistics.mean(s) if len(s) > 1 else 0.0)


def err_ratio(ref, out):
    ref, out = ref.double(), out.double()
    if not torch.isfinite(out).all():
        return float("inf")
    return ((ref - out).pow(2).mean().sqrt() / (ref.pow(2).mean().sqrt() + 1e-8)).item()


def lina_check(op, t, cu, o):
    """This cell's lina output against lina's GPU fp32 naive-recurrence reference (None if absent)."""
    ref = torch.empty(o.shape, dtype=torch.float32, device=o.device)
    kw = dict(use_qk_l2norm_in_kernel=True) if op != "chunk_gla" else {}
    if op == "chunk_kda":
        kw.update(safe_gate=True, lower_bound=-5.0)
    try:
        lina_torch.call(op, "gpu_reference_forward", dict(t, cu_seqlens=cu, o=ref), **kw)
    except lina_torch.LinaError as e:
        return dict(reference="gpu_fp32_naive", pass_=None, reason=str(e))
    r = err_ratio(ref, o.float())
    return dict(reference="gpu_fp32_naive", err_ratio=r, tolerance=0.005 if op != "chunk_gla" else 0.004,
                pass_=r < (0.005 if op != "chunk_gla" else 0.004))


def run_cell(args, timer, op, mode, shape, cu=None):
    B, T, H, D = parse_shape(shape)
    t = make_inputs(op, B, T, H, D, args.seed, cu)
    row_common = dict(op=op, mode=mode, shape=shape, shape_keys=dict(B=B, T=T, H=H, HV=H, K=D, V=D,
                                                                     varlen="longtail" if cu is not None else None,
                                                                     num_seqs=(cu.numel() - 1) if cu is not None else B))
    tokens_heads = B * T * H
    byts, flops, floor = floor_us(op, tokens_heads, D)
    rows, outs = [], {}
    for impl in args.impls:
        if impl == "fla" and op == "chunk_gdn" and mode != "fwd":
            rows.append(dict(row_common, impl="fla-triton", skipped="FLA refuses chunk_gated_delta_rule backward on Triton 3.6 / Hopper"))
            continue
        try:
            fn = timed_fn(impl, op, mode, t, cu)
            torch.cuda.synchronize()
            base_mem = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            if impl == "lina":  # lina's kernels take scratch from its own pool, which torch does not see
                lina_ws0 = lina_torch.workspace_stats()["used"]
                lina_torch.workspace_reset_high_water()
            fn()
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base_mem
            if impl == "lina":
                peak += max(0, lina_torch.workspace_stats()["used_high"] - lina_ws0)
            samples, why = timer.time(fn)
        except Exception as e:  # noqa: BLE001 - recorded, never hidden
            rows.append(dict(row_common, impl=impl, error=f"{type(e).__name__}: {e}"))
            continue
        st = stats(samples)
        row = dict(row_common, impl="lina-cuda" if impl == "lina" else "fla-triton", stop_reason=why, **st,
                   ns_per_token_head=st["median_ms"] * 1e6 / tokens_heads, bytes=byts, flops=flops,
                   floor_us=floor, x_floor=st["median_ms"] * 1e3 / floor, peak_extra_mem_bytes=peak,
                   gbps=byts / (st["median_ms"] * 1e6), frac_hbm=byts / (st["median_ms"] * 1e6) / HBM_GBPS)
        if args.gpu_time:  # after the primary samples, which thus run as they do without the flag
            try:
                g = timer.time_gpu(fn)
                g.update(gpu_ns_per_token_head=g["gpu_median_ms"] * 1e6 / tokens_heads,
                         gpu_x_floor=g["gpu_median_ms"] * 1e3 / floor)
            except Exception as e:  # noqa: BLE001 - recorded; the primary row stands
                g = dict(gpu_error=f"{type(e).__name__}: {e}")
            row.update(g)
        with torch.no_grad():
            outs[impl] = call(impl, op, {n: x.detach() for n, x in t.items()}, cu).float()
        if impl == "lina":
            c = lina_check(op, t, cu, outs[impl])
            row["check"] = {("pass" if k == "pass_" else k): v for k, v in c.items()}
        rows.append(row)
        gpu_s = ""
        if args.gpu_time:
            gpu_s = (f"  GPU {row['gpu_median_ms']:8.3f} ms  x{row['gpu_x_floor']:.1f} floor" if "gpu_median_ms" in row
                     else f"  GPU {row.get('gpu_error')}")
        print(f"  {op:10s} {mode:7s} {shape:34s} {row['impl']:11s} {st['median_ms']:8.3f} ms  "
              f"{row['ns_per_token_head']:6.2f} ns/th  x{row['x_floor']:.1f} floor{gpu_s}", flush=True)
    if "lina" in outs and "fla" in outs:
        for r in rows:
            if r.get("impl") == "lina-cuda":
                r["vs_fla_err_ratio"] = err_ratio(outs["fla"], outs["lina"])
    return rows


def machine():
    p = torch.cuda.get_device_properties(0)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        smi = ""
    return dict(gpu=p.name, sm_count=p.multi_processor_count, compute_capability=f"{p.major}.{p.minor}",
                l2_bytes=p.L2_cache_size, nvidia_smi=smi, torch=torch.__version__, cuda_runtime=torch.version.cuda,
                host=platform.node(), ceilings=dict(hbm_gbps=HBM_GBPS, bf16_tflops=TC_TFLOPS, source="anchors/README.md"))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ops", default="chunk_gla")
    ap.add_argument("--modes", nargs="+", default=["fwd", "fwdbwd"], help="fwd, fwdbwd (space or comma separated)")
    ap.add_argument("--shapes", default=",".join(DEFAULT_SHAPES))
    ap.add_argument("--varlen-tokens", type=int, default=32768, help="longtail varlen set at H16_D128 (0: none)")
    ap.add_argument("--impls", default="lina,fla")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-samples", type=int, default=10)
    ap.add_argument("--max-samples", type=int, default=200)
    ap.add_argument("--max-noise", type=float, default=0.005)
    ap.add_argument("--budget-s", type=float, default=1.0)
    ap.add_argument("--timer", choices=sorted(PRIMARY_METHODS), default="dobench",
                    help="primary timer: dobench (FLA's runner, default) or synced (a synchronize after every sample)")
    ap.add_argument("--out", required=True, help="output path prefix (.json and .md are written)")
    ap.add_argument("--append", action="store_true",
                    help="add this invocation's rows to an existing OUT.json (same machine, same lina build) and "
                         "rewrite OUT.md over all of them; each invocation's command is kept")
    ap.add_argument("--gpu-time", action="store_true",
                    help="also time every cell GPU only (host time hidden behind a sleep kernel), as gpu_* fields "
                         "and extra markdown columns; about doubles the time per cell")
    ap.add_argument("--lib", help="lina's liblina_c.so (default: $LINA_LIB, else build/bindings of this checkout)")
    ap.add_argument("--git-sha", default=os.environ.get("LINA_GIT_SHA", ""),
                    help="the commit lina was built from, recorded in the JSON (default: $LINA_GIT_SHA)")
    args = ap.parse_args()
    if args.lib:
        if not Path(args.lib).is_file():
            ap.error(f"--lib: {args.lib} is not a file, expected lina's liblina_c.so")
        os.environ["LINA_LIB"] = args.lib  # read when lina_torch first loads the library
    # "fwd,fwdbwd" was once taken as one mode and timed as fwd under that label: split and refuse unknowns
    args.modes = [m for arg in args.modes for m in arg.split(",") if m]
    bad = [m for m in args.modes if m not in ("fwd", "fwdbwd")]
    if bad:
        ap.error(f"--modes: {bad} not supported, expected fwd or fwdbwd")
    args.impls = args.impls.split(",")
    timer = Timer(args)
    sha = args.git_sha
    doc = dict(schema="lina.bench/1", kind="run", tool=dict(name="lina fla_side_by_side.py", git_sha=sha),
               machine=machine(), config=dict(seed=args.seed, l2_flush=True, graphs=False, timer=args.timer,
                                              primary_method=PRIMARY_METHODS[args.timer], min_samples=args.min_samples,
                                              max_noise=args.max_noise, time_budget_s=args.budget_s,
                                              command=" ".join(sys.argv)),
               results=[])
    if args.gpu_time:
        doc["config"].update(gpu_time=True, gpu_time_method=GPU_METHOD, gpu_sleep_cycles_per_ms=timer.cycles_per_ms)
    prev = Path(args.out + ".json")
    if args.append and prev.exists():
        old_doc = json.loads(prev.read_text())
        old_timer = old_doc["config"].get("timer", "synced")  # files before --timer were all synced
        if old_timer != args.timer:
            ap.error(f"--append: {prev} was timed with --timer {old_timer}, this run with --timer {args.timer}")
        doc["results"] = old_doc["results"]
        doc["config"]["commands"] = old_doc["config"].get("commands", [old_doc["config"]["command"]]) + [doc["config"]["command"]]
        for k, v in old_doc["config"].items():  # rows timed GPU only earlier in this file keep their description
            if k.startswith("gpu_") or k == "primary_method":
                doc["config"].setdefault(k, v)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)

    def save(new_rows):  # after every cell, so a run stopped by a time limit keeps what it measured
        doc["results"] += new_rows
        Path(args.out + ".json").write_text(json.dumps(doc, indent=1))
        Path(args.out + ".md").write_text(markdown(doc))

    for op in args.ops.split(","):
        for mode in args.modes:
            for shape in filter(None, args.shapes.split(",")):
                save(run_cell(args, timer, op, mode, shape))
            if args.varlen_tokens:
                cu = longtail_cu(args.varlen_tokens, args.seed).cuda()
                save(run_cell(args, timer, op, mode, f"varlen_longtail_B1_T{args.varlen_tokens}_H16_D128", cu))
    print(markdown(doc))


def markdown(doc):
    m = doc["machine"]
    lines = [f"Machine: {m['gpu']} ({m['sm_count']} SMs, CC {m['compute_capability']}), {m.get('nvidia_smi', '')}, "
             f"torch {m['torch']}, CUDA {m['cuda_runtime']}"]
    lines += [f"Command: `{c}`" for c in doc["config"].get("commands", [doc["config"]["command"]])]
    lines.append(f"Primary timer: {doc['config'].get('primary_method', PRIMARY_METHODS['synced'])}")
    gpu = doc["config"].get("gpu_time") or any(k.startswith("gpu_") for r in doc["results"] for k in r)
    lines += ["",
             "| op | mode | shape | FLA ms | lina ms | speedup | lina ns/th | lina x floor | lina check | peak extra MB lina / FLA |",
             "|---|---|---|---:|---:|---:|---:|---:|---|---:|"]
    if gpu:  # appended, so the default columns keep their places
        lines[-2] += " FLA GPU ms | lina GPU ms | GPU speedup | lina GPU x floor |"
        lines[-1] += "---:|---:|---:|---:|"
    cells = {}
    gpu_speedups, gpu_floors = {}, {}
    for r in doc["results"]:
        cells.setdefault((r["op"], r["mode"], r["shape"]), {})[r.get("impl")] = r
    speedups, floors = {}, {}
    for (op, mode, shape), c in cells.items():
        li, fl = c.get("lina-cuda", {}), c.get("fla-triton", {})
        lm, fm = li.get("median_ms"), fl.get("median_ms")
        sp = fm / lm if lm and fm else None
        if sp and shape in DEFAULT_SHAPES:  # the bars are geomeans over FLA's six default shapes
            speedups.setdefault((op, mode), []).append(sp)
        if li.get("x_floor") and shape in DEFAULT_SHAPES:
            floors.setdefault((op, mode), []).append(li["x_floor"])
        chk = li.get("check", {})
        chk_s = "n/a" if not chk else ("pass" if chk.get("pass") else ("FAIL" if chk.get("pass") is False else "unverified"))
        if chk.get("err_ratio") is not None:
            chk_s += f" ({chk['err_ratio']:.1e})"
        fmt = lambda x, f: (f % x) if x is not None else (li.get("error") or fl.get("error") or fl.get("skipped") or "-")[:40]  # noqa: E731
        lines.append(f"| {op} | {mode} | {shape} | {fmt(fm, '%.3f')} | {fmt(lm, '%.3f')} | "
                     f"{('%.2fx' % sp) if sp else '-'} | {fmt(li.get('ns_per_token_head'), '%.2f')} | "
                     f"{fmt(li.get('x_floor'), '%.1f')} | {chk_s} | "
                     f"{(li.get('peak_extra_mem_bytes') or 0) / 1e6:.0f} / {(fl.get('peak_extra_mem_bytes') or 0) / 1e6:.0f} |")
        if gpu:
            lg, fg = li.get("gpu_median_ms"), fl.get("gpu_median_ms")
            gsp = fg / lg if lg and fg else None
            if gsp and shape in DEFAULT_SHAPES:
                gpu_speedups.setdefault((op, mode), []).append(gsp)
            if li.get("gpu_x_floor") and shape in DEFAULT_SHAPES:
                gpu_floors.setdefault((op, mode), []).append(li["gpu_x_floor"])
            lines[-1] += (f" {gpu_cell(fl, 'gpu_median_ms', '%.3f')} | {gpu_cell(li, 'gpu_median_ms', '%.3f')} | "
                          f"{('%.2fx' % gsp) if gsp else '-'} | {gpu_cell(li, 'gpu_x_floor', '%.1f')} |")
    lines.append("")
    gm = lambda v: math.exp(sum(map(math.log, v)) / len(v))  # noqa: E731
    for label, sp, fl in (("", speedups, floors), ("GPU-only ", gpu_speedups, gpu_floors)):
        for (op, mode), v in sp.items():
            lines.append(f"Geomean {label}speedup {op} {mode} over {len(v)} of the six default shapes: {gm(v):.2f}x "
                         f"(slowest cell {min(v):.2f}x)")
        for (op, mode), v in fl.items():
            if mode == "fwd":
                lines.append(f"Geomean lina {label}x floor {op} {mode} over {len(v)} default shapes: {gm(v):.2f}")
    if gpu:
        lines.append("GPU columns (--gpu-time): host time hidden behind a sleep kernel, see config.gpu_time_method; "
                     "the other columns are the primary timer's.")
    return "\n".join(lines) + "\n"


def gpu_cell(r, key, f):
    """A GPU-only column of one side: the value, else why there is none."""
    x = r.get(key)
    if x is not None:
        return f % x
    return (r.get("gpu_error") or r.get("error") or r.get("skipped") or "-")[:40]


if __name__ == "__main__":
    main()
