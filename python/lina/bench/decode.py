"""The decode cells of the side by side (--ops fused_recurrent_*): one decode step (T = 1) at batch 1, 64 and 1024
with the state sizes of real models, timed per implementation by the primary timer (do_bench's method) and, on
CUDA, GPU only by CUDA-graph replay; the floor is reading and writing the fp32 state once at HBM speed.

The call is each op's decode form as serving runs it: KDA as vLLM calls FLA's fused_recurrent_kda_fwd (a state pool
updated in place through ssm_state_indices, in-kernel gate, beta sigmoid, q/k l2norm: Kimi-Linear's layer);
GDN with Qwen3-Next's in-kernel gate and GLA with FLA's GLA layer gate, both with a dense state in and a fresh final
state out (FLA's fused_recurrent_gated_delta_rule and fused_recurrent_gla have no pool). Every implementation gets
the same form, so the bytes moved are the same. Outputs and states are checked against lina's chunk reference with
the same initial state.
"""
import dataclasses
import time

import torch
import torch.nn.functional as F

from lina.bench.reference import Reference, err_ratio
from lina.bench.run import annotate_baseline, peak_extra_memory
from lina.bench.timers import stats, stop_reason
from lina.bench.workload import HBM_GBPS

DECODE_OPS = ("fused_recurrent_gla", "fused_recurrent_kda", "fused_recurrent_gdn")
DECODE_MODE = "decode"
DECODE_BATCHES = (1, 64, 1024)
# (H, HV, K, V) and whose state it is
MODELS = {"fused_recurrent_gdn": ((16, 32, 128, 128), "Qwen3-Next GatedDeltaNet"),
          "fused_recurrent_kda": ((32, 32, 128, 128), "Kimi-Linear KDA"),
          "fused_recurrent_gla": ((16, 16, 128, 128), "GLA, head dim 128")}
TOLERANCE = {"fused_recurrent_gla": 0.004, "fused_recurrent_kda": 0.005, "fused_recurrent_gdn": 0.005}
GRAPH_METHOD = ("CUDA graph of one call (captured after 3 warm-up calls on a side stream), replayed as: L2 flush, "
                "start event, replay, end event; stopping rule of the primary timer")
GRAPH_BATCH = 20  # replays enqueued per synchronize


def decode_shape(op, batch):
    (H, HV, K, V), _ = MODELS[op]
    return f"B{batch}_T1_H{H}_HV{HV}_K{K}_V{V}"


def parse_decode_shape(name):
    """B<b>_T<t>_H<h>_HV<hv>_K<k>_V<v> -> dict(B, T, H, HV, K, V)."""
    parts = {}
    for p in name.split("_"):
        key = p.rstrip("0123456789")
        if key in ("B", "T", "H", "HV", "K", "V") and p[len(key):].isdigit():
            parts[key] = int(p[len(key):])
    missing = [k for k in ("B", "T", "H", "HV", "K", "V") if k not in parts]
    if missing:
        raise ValueError(f"decode shape '{name}' has no {', '.join(missing)} part; expected e.g. B64_T1_H16_HV32_K128_V128")
    return parts


@dataclasses.dataclass
class DecodeWork:
    """One decode cell's inputs (implementations time copies of them)."""
    op: str
    shape: str
    dims: dict
    tensors: dict  # q, k, v, g, beta (delta rules), A_log, dt_bias, state ([S, HV, K, V] f32), indices (KDA: [B])
    flags: dict
    pooled: bool

    @property
    def device(self):
        return self.tensors["q"].device

    @property
    def gate(self):
        return "in_kernel" if self.op != "fused_recurrent_gla" else "precomputed"

    def state_bytes(self):
        d = self.dims
        return d["B"] * d["HV"] * d["K"] * d["V"] * 4

    def shape_keys(self):
        d = self.dims
        return dict(d, num_seqs=d["B"], model=MODELS[self.op][1], state=("pool, in place" if self.pooled
                                                                          else "dense in, fresh final state out"))


def make_decode_workload(op, shape, seed, device):
    """Seeded inputs made on `device` (on meta: shapes only, for --dry-run)."""
    d = parse_decode_shape(shape)
    B, T, H, HV, K, V = (d[x] for x in ("B", "T", "H", "HV", "K", "V"))
    meta = device.type == "meta"
    gen = None if meta else torch.Generator(device=device).manual_seed(seed)

    def randn(*s, scale=1.0, dtype=torch.bfloat16):
        if meta:
            return torch.empty(*s, device=device, dtype=dtype)
        return (torch.randn(*s, generator=gen, device=device) * scale).to(dtype)
    t = dict(q=randn(B, T, H, K), k=randn(B, T, H, K), v=randn(B, T, HV, V),
             state=randn(B, HV, K, V, scale=0.1, dtype=torch.float32))
    flags = {}
    if op == "fused_recurrent_gla":
        t["g"] = (F.logsigmoid(randn(B, T, H, K, dtype=torch.float32)) / 16).to(torch.bfloat16)
    else:
        kda = op == "fused_recurrent_kda"
        t["g"] = randn(B, T, HV, K) if kda else randn(B, T, HV)
        t["beta"] = randn(B, T, HV)
        a = randn(HV, dtype=torch.float32)
        t["A_log"] = a if meta else a.uniform_(1, 16, generator=gen).log()
        t["dt_bias"] = randn(HV * K if kda else HV, scale=0.5, dtype=torch.float32)
        flags = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True)
    pooled = op == "fused_recurrent_kda"
    if pooled:  # the batch's slots in a pool of B states, in a seeded order
        t["indices"] = (torch.empty(B, device=device, dtype=torch.int32) if meta else
                        torch.randperm(B, generator=gen, device=device).to(torch.int32))
    return DecodeWork(op=op, shape=shape, dims=d, tensors=t, flags=flags, pooled=pooled)


def decode_call(fns, work, t):
    """One decode step through FLA-signature functions fns = {gla, gdn, kda_fwd}; returns (o, the state after)."""
    f = work.flags
    if work.op == "fused_recurrent_kda":
        return fns["kda_fwd"](t["q"], t["k"], t["v"], t["g"], t["beta"], A_log=t["A_log"], dt_bias=t["dt_bias"],
                              initial_state=t["state"], ssm_state_indices=t["indices"], inplace_final_state=True, **f)
    if work.op == "fused_recurrent_gdn":
        return fns["gdn"](t["q"], t["k"], t["v"], t["g"], beta=t["beta"], A_log=t["A_log"], dt_bias=t["dt_bias"],
                          initial_state=t["state"], output_final_state=True, **f)
    return fns["gla"](t["q"], t["k"], t["v"], gk=t["g"], initial_state=t["state"], output_final_state=True)


def reference(work):
    """lina's chunk reference from the same initial state: (o, state after) as the op leaves them, or (None, why)."""
    t, f, ops = work.tensors, work.flags, torch.ops.lina
    h0 = t["state"][t["indices"].long()] if work.pooled else t["state"]
    try:
        if work.op == "fused_recurrent_gla":
            o, ht = ops.chunk_gla_reference(t["q"], t["k"], t["v"], t["g"], None, h0, True, None, None)
        else:
            flags = (f["use_qk_l2norm_in_kernel"], f["use_gate_in_kernel"], f["use_beta_sigmoid_in_kernel"], False)
            tail = (t["A_log"], t["dt_bias"], None, None)
            if work.op == "fused_recurrent_kda":
                o, ht = ops.chunk_kda_reference(t["q"], t["k"], t["v"], t["g"], t["beta"], None, h0, True, *flags,
                                                False, None, *tail)
            else:
                o, ht = ops.chunk_gdn_reference(t["q"], t["k"], t["v"], t["g"], t["beta"], None, h0, True, *flags,
                                                *tail)
    except (ValueError, NotImplementedError, RuntimeError, ImportError) as e:
        return None, f"{type(e).__name__}: {e}"
    return (o, ht), None


def check(work, ref, why, out):
    """The row's check: FLA's metric on o and on the state the step left (the pool's slots, or the final state)."""
    name = Reference.name(work.device)
    if ref is None:
        return {"reference": name, "pass": None, "reason": why}
    o, state = out
    if work.pooled:
        state = state[work.tensors["indices"].long()]
    r_o, r_h = err_ratio(ref[0], o.float()), err_ratio(ref[1], state.float())
    tol = TOLERANCE[work.op]
    return {"reference": name + " (chunk reference, same initial state)", "err_ratio": r_o, "state_err_ratio": r_h,
            "tolerance": tol, "pass": r_o < tol and r_h < tol}


def time_graph(args, flush, fn):
    """GPU time of fn replayed as a CUDA graph, as gpu_* row fields."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    torch.cuda.synchronize()
    samples, t0 = [], time.perf_counter()
    while True:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(GRAPH_BATCH)]
        for s, e in events:
            flush.zero_()
            s.record()
            graph.replay()
            e.record()
        torch.cuda.synchronize()
        samples += [s.elapsed_time(e) for s, e in events]
        why = stop_reason(args, samples, t0)
        if why:
            break
    del graph
    return dict({"gpu_" + k: v for k, v in stats(samples).items()}, gpu_stop_reason=why, gpu_method="graph_replay")


def run_decode_cell(args, timer, impls, op, shape, log=print):
    """The rows of one decode cell, one per implementation (timed, skipped or error), as run.run_cell's."""
    device = torch.device(args.device)
    work = make_decode_workload(op, shape, args.seed, device)
    common = dict(op=op, mode=DECODE_MODE, shape=shape, shape_keys=work.shape_keys(), gate=work.gate)
    byts = 2 * work.state_bytes()  # the fp32 state read once and written once; q, k, v, o are < 1% of it
    floor = byts / (HBM_GBPS * 1e3)
    ref, why = reference(work)
    cuda = device.type == "cuda"
    rows, outs = [], {}
    for impl, ok, _ in impls:
        if not ok or op not in impl.ops:
            continue
        label = impl.row_label(device)
        skip = impl.supports(work, DECODE_MODE)
        if skip:
            rows.append(dict(common, impl=label, skipped=skip))
            continue
        t = {n: x.clone() for n, x in work.tensors.items()}

        def fn():
            with torch.no_grad():
                return impl.decode_step(work, t)
        try:
            peak = peak_extra_memory(fn) if cuda else None
            samples, stop = timer.time(fn)
            st = stats(samples)
            row = dict(common, impl=label, stop_reason=stop, **st, bytes=byts, floor_us=floor,
                       x_floor=st["median_ms"] * 1e3 / floor, frac_floor=floor / (st["median_ms"] * 1e3),
                       peak_extra_mem_bytes=peak, gbps=byts / (st["median_ms"] * 1e6))
        except Exception as e:  # noqa: BLE001 - recorded, never hidden
            rows.append(dict(common, impl=label, error=f"{type(e).__name__}: {e}"))
            continue
        if cuda:
            try:
                g = time_graph(args, timer.flush, fn)
                g.update(gpu_x_floor=g["gpu_median_ms"] * 1e3 / floor, gpu_frac_floor=floor / (g["gpu_median_ms"] * 1e3))
            except Exception as e:  # noqa: BLE001 - recorded (a call that does not capture); the primary row stands
                g = dict(gpu_error=f"{type(e).__name__}: {e}")
            row.update(g)
        try:
            fresh = {n: x.clone() for n, x in work.tensors.items()}
            with torch.no_grad():
                out = impl.decode_step(work, fresh)
            outs[impl.name] = out[0].float()
            row["check"] = check(work, ref, why, out)
        except Exception as e:  # noqa: BLE001 - a timed call whose output cannot be taken is unverified
            row["check"] = {"reference": Reference.name(device), "pass": None, "reason": f"{type(e).__name__}: {e}"}
        rows.append(row)
        gpu_s = ""
        if cuda:
            gpu_s = (f"  graph {row['gpu_median_ms'] * 1e3:8.1f} us  {row['gpu_frac_floor']:.0%} of floor"
                     if "gpu_median_ms" in row else f"  graph: {row['gpu_error']}")
        log(f"  {op:20s} {shape:32s} {label:17s} {st['median_ms'] * 1e3:8.1f} us  {row['frac_floor']:.0%} of floor{gpu_s}")
    annotate_baseline(rows, outs, args.baseline_label, {impl.row_label(device): impl.name for impl, _, _ in impls})
    return rows
