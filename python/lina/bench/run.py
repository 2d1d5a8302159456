"""One cell of the side by side: the shared inputs and reference, then each implementation timed (primary
timer, then optionally GPU only), its peak extra memory, and its output checked against the reference."""
import platform
import subprocess

import torch

from lina.bench.reference import Reference, err_ratio
from lina.bench.workload import HBM_GBPS, TC_TFLOPS, floor_us, make_workload
from lina.bench.timers import stats


def run_cell(args, timer, reference, impls, op, mode, shape, cu=None, log=print):
    """impls: [(Implementation, available, why)] in --impls order. Returns the cell's rows, one per
    implementation: timed, or `skipped` / `error` with the reason."""
    device = torch.device(args.device)
    work = make_workload(op, shape, args.seed, device, args.gate, cu, args.safe_gate == "on")
    common = dict(op=op, mode=mode, shape=shape, shape_keys=work.shape_keys(), gate=work.gate)
    if op == "chunk_kda":
        common["safe_gate"] = work.safe_gate
    tokens_heads = work.B * work.T * work.H
    byts, flops, floor = floor_us(op, tokens_heads, work.D)
    ref_cache = []  # computed once per cell, when the first implementation's output is checked

    def ref():
        if not ref_cache:
            ref_cache.append(reference.output(work))
        return ref_cache[0]
    cuda = device.type == "cuda"
    rows, outs = [], {}
    for impl, ok, why in impls:
        if not ok or op not in impl.ops:  # said once, in config.implementations, not in every cell
            continue
        label = impl.row_label(device)
        skip = impl.supports(work, mode)
        if skip:
            rows.append(dict(common, impl=label, skipped=skip))
            continue
        try:
            fn = impl.prepare(work, mode)
            peak = peak_extra_memory(fn) if cuda else None
            samples, stop = timer.time(fn)
        except Exception as e:  # noqa: BLE001 - recorded, never hidden
            rows.append(dict(common, impl=label, error=f"{type(e).__name__}: {e}"))
            continue
        st = stats(samples)
        row = dict(common, impl=label, stop_reason=stop, **st, ns_per_token_head=st["median_ms"] * 1e6 / tokens_heads,
                   bytes=byts, flops=flops, floor_us=floor, x_floor=st["median_ms"] * 1e3 / floor,
                   peak_extra_mem_bytes=peak, gbps=byts / (st["median_ms"] * 1e6),
                   frac_hbm=byts / (st["median_ms"] * 1e6) / HBM_GBPS)
        if impl.forward_only and mode == "fwd":
            row["forward_kind"] = "inference"  # no autograd: the forward saves nothing for a backward
        if args.gpu_time:  # after the primary samples, which thus run as they do without the flag
            try:
                g = timer.time_gpu(fn)
                g.update(gpu_ns_per_token_head=g["gpu_median_ms"] * 1e6 / tokens_heads,
                         gpu_x_floor=g["gpu_median_ms"] * 1e3 / floor)
            except Exception as e:  # noqa: BLE001 - recorded; the primary row stands
                g = dict(gpu_error=f"{type(e).__name__}: {e}")
            row.update(g)
        try:
            outs[impl.name] = impl.output(work)
            ref_o, ref_why = ref()
            row["check"] = Reference.check(work, ref_o, outs[impl.name], ref_why)
        except Exception as e:  # noqa: BLE001 - a timed call whose output cannot be taken is unverified
            row["check"] = {"reference": Reference.name(device), "pass": None, "reason": f"{type(e).__name__}: {e}"}
        rows.append(row)
        gpu_s = ""
        if args.gpu_time:
            gpu_s = (f"  GPU {row['gpu_median_ms']:8.3f} ms  x{row['gpu_x_floor']:.1f} floor" if "gpu_median_ms" in row
                     else f"  GPU {row.get('gpu_error')}")
        log(f"  {op:10s} {mode:7s} {shape:34s} {label:17s} {st['median_ms']:8.3f} ms  "
            f"{row['ns_per_token_head']:6.2f} ns/th  x{row['x_floor']:.1f} floor{gpu_s}")
    annotate_baseline(rows, outs, args.baseline_label, {impl.row_label(device): impl.name for impl, _, _ in impls})
    return rows


def peak_extra_memory(fn):
    """Bytes one call of fn allocates beyond what is allocated before it (torch's peak; lina's scratch included)."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def annotate_baseline(rows, outs, baseline_label, names):
    """Each timed row of a cell gets its speedup over the baseline's row (baseline median / its median, the
    GPU-only one likewise) and the error ratio of its output against the baseline's."""
    base = next((r for r in rows if r.get("impl") == baseline_label and "median_ms" in r), None)
    if base is None:
        return
    base_out = outs.get(names.get(baseline_label))
    for r in rows:
        if "median_ms" not in r:
            continue
        r["baseline"] = baseline_label
        r["speedup_vs_baseline"] = base["median_ms"] / r["median_ms"]
        if r.get("gpu_median_ms") and base.get("gpu_median_ms"):
            r["gpu_speedup_vs_baseline"] = base["gpu_median_ms"] / r["gpu_median_ms"]
        out = outs.get(names.get(r["impl"]))
        if r is not base and out is not None and base_out is not None:
            r["vs_baseline_err_ratio"] = err_ratio(base_out, out)


def machine(device):
    ceilings = dict(hbm_gbps=HBM_GBPS, bf16_tflops=TC_TFLOPS, source="anchors/README.md")
    common = dict(torch=torch.__version__, cuda_runtime=torch.version.cuda, host=platform.node(), ceilings=ceilings)
    if device.type != "cuda":
        return dict(common, gpu="none (CPU tensors)", sm_count=0, compute_capability="-", l2_bytes=0, nvidia_smi="",
                    cpu=platform.processor() or platform.machine())
    p = torch.cuda.get_device_properties(device)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        smi = ""
    return dict(common, gpu=p.name, sm_count=p.multi_processor_count, compute_capability=f"{p.major}.{p.minor}",
                l2_bytes=p.L2_cache_size, nvidia_smi=smi)
