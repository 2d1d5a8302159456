"""python -m lina.bench: the flags, the implementation list, and the run loop that writes OUT.json
(lina.bench/1) and OUT.md after every cell."""
import argparse
import json
import os
import sys
from pathlib import Path

import torch

import lina.bench
from lina.bench.decode import DECODE_BATCHES, DECODE_MODE, DECODE_OPS, GRAPH_METHOD, decode_shape, run_decode_cell
from lina.bench.impls import REGISTRY
from lina.bench.reference import Reference
from lina.bench.report import markdown
from lina.bench.run import machine, run_cell
from lina.bench.timers import GPU_METHOD, PRIMARY_METHODS, Timer
from lina.bench.workload import DEFAULT_SHAPES, GATES, MODES, OPS, SAFE_GATE, longtail_cu, parse_shape

EXAMPLE = """example:
  LINA_TORCH_LIB=build/bindings/torch/_C.so PYTHONPATH=python python -m lina.bench --ops chunk_kda \\
      --modes fwd --impls lina,fla,flashkda --gate in_kernel --lib build/bindings/liblina_c.so --out /tmp/side
  python -m lina.bench --ops fused_recurrent_kda,fused_recurrent_gdn,fused_recurrent_gla --impls lina,fla \\
      --out /tmp/decode    # one decode step at batch 1, 64, 1024; GPU time by CUDA-graph replay beside do_bench
  python -m lina.bench --list            # the implementations and why any is unavailable"""


def split(values):
    """Values given space or comma separated ("fwd,fwdbwd" once ran as one mode under that label)."""
    return [x for v in values for x in v.split(",") if x]


def parser():
    ap = argparse.ArgumentParser(prog="python -m lina.bench", description=lina.bench.__doc__, epilog=EXAMPLE,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", nargs="+", default=["chunk_gla"],
                    help=f"{', '.join(OPS + DECODE_OPS)} (space or comma separated); a decode op runs its decode "
                         "cells (--decode-batches), not --modes / --shapes")
    ap.add_argument("--modes", nargs="+", default=["fwd", "fwdbwd"],
                    help="fwd (training forward), fwdbwd, infer (forward without grad); space or comma separated")
    ap.add_argument("--shapes", default=",".join(DEFAULT_SHAPES), help="comma list of B_T_H_D names ('' for none)")
    ap.add_argument("--decode-batches", default=",".join(map(str, DECODE_BATCHES)),
                    help="batch sizes of the decode cells (one token per sequence, the state of a real model per op: "
                         "lina/bench/decode.py MODELS)")
    ap.add_argument("--varlen-tokens", type=int, default=32768, help="longtail varlen set at H16_D128 (0: none)")
    ap.add_argument("--impls", default="lina,fla", help=f"comma list of {', '.join(REGISTRY)} (default lina,fla)")
    ap.add_argument("--baseline", default="fla", help="the implementation the speedups are against (default fla)")
    ap.add_argument("--gate", choices=GATES, default="precomputed",
                    help="chunk_kda's gate: precomputed (FLA's registry, default) or in_kernel (raw gate, A_log, "
                         "dt_bias, beta logits: FLA's KDA layer, and what FlashKDA takes)")
    ap.add_argument("--safe-gate", choices=SAFE_GATE, default="on",
                    help="chunk_kda: safe_gate=True with lower_bound -5 (on, FLA's registry, default) or neither "
                         "(off: FLA's KDA layer default)")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (the CPU smoke: lina only, wall timer)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-samples", type=int, default=10)
    ap.add_argument("--max-samples", type=int, default=200)
    ap.add_argument("--max-noise", type=float, default=0.005)
    ap.add_argument("--budget-s", type=float, default=1.0)
    ap.add_argument("--timer", choices=sorted(PRIMARY_METHODS), default=None,
                    help="primary timer: dobench (FLA's runner, default on CUDA), synced (a synchronize after every "
                         "sample) or wall (CPU tensors, the default there)")
    ap.add_argument("--out", help="output path prefix (.json and .md are written); required unless --list / --dry-run")
    ap.add_argument("--append", action="store_true",
                    help="add this invocation's rows to an existing OUT.json (same machine, same lina build) and "
                         "rewrite OUT.md over all of them; each invocation's command is kept")
    ap.add_argument("--gpu-time", action="store_true",
                    help="also time every cell GPU only (host time hidden behind a sleep kernel), as gpu_* fields "
                         "and extra markdown columns; about doubles the time per cell")
    ap.add_argument("--lib", help="accepted and unused: the reference is lina's torch operator now (kept for old command lines)")
    ap.add_argument("--git-sha", default=os.environ.get("LINA_GIT_SHA", ""),
                    help="the commit lina was built from, recorded in the JSON (default: $LINA_GIT_SHA)")
    ap.add_argument("--list", action="store_true", help="print the implementations, whether each can run, and exit")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the implementations and the cells each would run or skip (and why), run nothing")
    return ap


def invoked_as():
    """How this process was started, for config.command: the module, or the script that runs it."""
    return "python -m lina.bench" if sys.argv[0].endswith("__main__.py") else sys.argv[0]


def check_args(ap, a):
    a.ops, a.modes = split(a.ops), split(a.modes)
    for flag, got, allowed in (("--ops", a.ops, OPS + DECODE_OPS), ("--modes", a.modes, MODES)):
        bad = [x for x in got if x not in allowed]
        if bad:
            ap.error(f"{flag}: {bad} not supported, expected {' or '.join(allowed)}")
    a.impls = split([a.impls])
    bad = [x for x in a.impls + [a.baseline] if x not in REGISTRY]
    if bad:
        ap.error(f"--impls / --baseline: {bad} unknown, expected one of {', '.join(REGISTRY)}")
    try:
        a.decode_batches = [int(b) for b in a.decode_batches.split(",") if b]
    except ValueError:
        ap.error(f"--decode-batches: got '{a.decode_batches}', expected a comma list of positive integers")
    if any(b < 1 for b in a.decode_batches):
        ap.error(f"--decode-batches: got {a.decode_batches}, expected positive integers")
    a.shapes = [s for s in a.shapes.split(",") if s]
    for s in a.shapes:
        try:
            parse_shape(s)
        except ValueError as e:
            ap.error(str(e))
    if a.device not in ("cuda", "cpu"):
        ap.error(f"--device: got '{a.device}', expected cuda or cpu")
    if a.timer is None:
        a.timer = "wall" if a.device == "cpu" else "dobench"
    if (a.timer == "wall") != (a.device == "cpu"):
        ap.error(f"--timer {a.timer} with --device {a.device}: the wall timer is for CPU tensors, the others for CUDA")
    if a.gpu_time and a.device == "cpu":
        ap.error("--gpu-time: needs --device cuda")
    if a.min_samples < 2:
        ap.error(f"--min-samples: got {a.min_samples}, expected at least 2 (the noise needs two samples)")
    if not (a.list or a.dry_run) and not a.out:
        ap.error("--out: required (the output path prefix), unless --list or --dry-run")
    if a.device == "cuda" and not (a.list or a.dry_run) and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device is visible (the CPU smoke is --device cpu)")


def implementations(device, names):
    out = []
    for n in names:
        impl = REGISTRY[n]()
        ok, why = impl.available(device)
        out.append((impl, ok, why))
    return out


def print_list(impls, device):
    print(f"implementations on {device}:")
    for impl, ok, why in impls:
        d = impl.describe(device)
        state = f"available{' (' + d['version'] + ')' if d.get('version') else ''}" if ok else f"unavailable: {why}"
        print(f"  {impl.name:10s} {impl.row_label(device):18s} ops {','.join(impl.ops):28s} {state}")


def cells(a):
    for op in a.ops:
        if op in DECODE_OPS:
            for batch in a.decode_batches:
                yield op, DECODE_MODE, decode_shape(op, batch), None
            continue
        for mode in a.modes:
            for shape in a.shapes:
                yield op, mode, shape, None
            if a.varlen_tokens:
                yield op, mode, f"varlen_longtail_B1_T{a.varlen_tokens}_H16_D128", longtail_cu(a.varlen_tokens, a.seed)


def dry_run(a, impls, device):
    """What each implementation would do per cell, decided on meta tensors (nothing is allocated or run)."""
    from lina.bench.decode import make_decode_workload
    from lina.bench.workload import make_workload
    print("cells (op mode shape: implementation -> runs | skipped: why):")
    for op, mode, shape, cu in cells(a):
        meta = torch.device("meta")
        work = (make_decode_workload(op, shape, a.seed, meta) if op in DECODE_OPS else
                make_workload(op, shape, a.seed, meta, a.gate, cu, a.safe_gate == "on"))
        parts = []
        for impl, ok, why in impls:
            skip = why if not ok else impl.supports(work, mode)
            parts.append(f"{impl.name} -> {'skipped: ' + skip if skip else 'runs'}")
        print(f"  {op} {mode} {shape}: " + "; ".join(parts))


def main(argv=None):
    ap = parser()
    a = ap.parse_args(argv)
    check_args(ap, a)
    device = torch.device(a.device)
    impls = implementations(device, a.impls)
    if a.list:
        print_list(implementations(device, list(REGISTRY)), device)
        return 0
    if a.dry_run:
        print_list(impls, device)
        dry_run(a, impls, device)
        return 0
    base = REGISTRY[a.baseline]()
    a.baseline_label = base.row_label(device)
    if a.baseline not in a.impls:
        print(f"note: --baseline {a.baseline} is not in --impls: no speedups are computed", file=sys.stderr)
    reference = Reference(a.lib)
    timer = Timer(a)
    described = [impl.describe(device) for impl, _, _ in impls]
    for d, (impl, _, _) in zip(described, impls):
        d["label"] = impl.row_label(device)
    doc = dict(schema="lina.bench/1", kind="run", tool=dict(name="lina python -m lina.bench", git_sha=a.git_sha),
               machine=machine(device),
               config=dict(seed=a.seed, l2_flush=a.timer != "wall", graphs=False, timer=a.timer,
                           primary_method=PRIMARY_METHODS[a.timer], min_samples=a.min_samples,
                           max_noise=a.max_noise, time_budget_s=a.budget_s, command=" ".join([invoked_as()] + sys.argv[1:]),
                           device=a.device, gate=a.gate, safe_gate=a.safe_gate, baseline_impl=a.baseline_label, implementations=described,
                           reference=Reference.name(device) + (f" via {reference.library}" if reference.library else
                                                               f" (unavailable: {reference.reason})")),
               results=[])
    fla = next((impl for impl, ok, _ in impls if impl.name == "fla"), None)
    if fla is not None:
        doc["config"]["fla_backend_env"] = fla.env
    if any(op in DECODE_OPS for op in a.ops) and a.device == "cuda":
        doc["config"]["decode_gpu_method"] = GRAPH_METHOD
    if a.gpu_time:
        doc["config"].update(gpu_time=True, gpu_time_method=GPU_METHOD, gpu_sleep_cycles_per_ms=timer.cycles_per_ms)
    prev = Path(a.out + ".json")
    if a.append and prev.exists():
        merge_previous(ap, a, doc, json.loads(prev.read_text()), prev)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)

    def save(new_rows):  # after every cell, so a run stopped by a time limit keeps what it measured
        doc["results"] += new_rows
        Path(a.out + ".json").write_text(json.dumps(doc, indent=1))
        Path(a.out + ".md").write_text(markdown(doc))

    def log(s):
        print(s, flush=True)
    for op, mode, shape, cu in cells(a):
        if op in DECODE_OPS:
            save(run_decode_cell(a, timer, impls, op, shape, log=log))
        else:
            save(run_cell(a, timer, reference, impls, op, mode, shape, cu, log=log))
    print(markdown(doc))
    return 0


def merge_previous(ap, a, doc, old, path):
    """--append: the earlier invocations' rows and commands; their timer must be this one's."""
    old_timer = old["config"].get("timer", "synced")  # files before --timer were all synced
    if old_timer != a.timer:
        ap.error(f"--append: {path} was timed with --timer {old_timer}, this run with --timer {a.timer}")
    old_base = old["config"].get("baseline_impl")
    if old_base and old_base != a.baseline_label:
        ap.error(f"--append: {path} has baseline {old_base}, this run --baseline {a.baseline}")
    doc["results"] = old["results"]
    doc["config"]["commands"] = old["config"].get("commands", [old["config"]["command"]]) + [doc["config"]["command"]]
    for k, v in old["config"].items():  # rows timed GPU only earlier in this file keep their description
        if k.startswith("gpu_") or k == "primary_method":
            doc["config"].setdefault(k, v)
    seen = {d["name"] for d in doc["config"]["implementations"]}
    doc["config"]["implementations"] += [d for d in old["config"].get("implementations", []) if d["name"] not in seen]
