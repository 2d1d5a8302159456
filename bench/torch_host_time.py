#!/usr/bin/env python3
"""Host time per call of lina's PyTorch operators, beside FLA's Python entry points, on the GPU machine.

Host time is what the calling thread spends to enqueue one call: N calls are enqueued while the GPU is held
busy by a sleep kernel queued first, so the host never waits for the GPU, and the wall time of the loop is
divided by N. Reported per entry point (median over rounds, with min and max):

  op        torch.ops.lina.<op>_fwd directly (the dispatcher and lina's front door; no autograd)
  fla_api   lina.<op>(...) with FLA's keywords, under torch.no_grad
  autograd  lina.<op>(...) with inputs that require grad (forward only; the graph is recorded)
  fla       FLA 0.6.0's own entry point, under torch.no_grad (its Python and Triton launches)
  floor     one PyTorch op that launches one kernel (x.add_(1) on one element): the dispatcher plus one launch on
            this machine, the unit the others are counted in (lina's forwards launch two or three kernels)

Small shapes keep the GPU work negligible; the figure does not depend on the shape. Writes JSON with
--json. Not a test: no assertion on time.
    python3 bench/torch_host_time.py --json /tmp/host_time.json
"""
import argparse
import json
import platform
import statistics
import time

import torch

import lina

CALLS = 40          # calls per round; each lina call launches a few kernels, far below the launch queue depth
SLEEP_CYCLES = int(5e7)  # ~25 ms at 1.98 GHz: longer than any round's host time


def inputs(op, B=1, T=256, H=4, D=64, requires_grad=False):
    torch.manual_seed(0)
    dev = "cuda"
    q = torch.nn.functional.normalize(torch.randn(B, T, H, D, device=dev), dim=-1).to(torch.bfloat16)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, D, device=dev), dim=-1).to(torch.bfloat16)
    v = torch.randn(B, T, H, D, device=dev, dtype=torch.bfloat16)
    gshape = (B, T, H) if op == "chunk_gdn" else (B, T, H, D)
    # lina's CUDA chunk_gla takes g in q's dtype; the delta rules take an f32 gate
    g = (-0.1 * torch.rand(*gshape, device=dev)).to(torch.bfloat16 if op == "chunk_gla" else torch.float32)
    beta = torch.rand(B, T, H, device=dev, dtype=torch.bfloat16)
    args = [q, k, v, g] if op == "chunk_gla" else [q, k, v, g, beta]
    if requires_grad:
        args = [a.requires_grad_() for a in args]
    return args


def lina_op_call(op, args):
    ops = torch.ops.lina
    if op == "chunk_gla":
        return lambda: ops.chunk_gla_fwd(*args, None, None, False, None, None, False, "")
    if op == "chunk_kda":
        return lambda: ops.chunk_kda_fwd(*args, None, None, False, False, False, False, False, False, None, None,
                                         None, None, None, False, "")
    return lambda: ops.chunk_gdn_fwd(*args, None, None, False, False, False, False, False, None, None, None, None,
                                     False, "")


def lina_api_call(op, args):
    fn = {"chunk_gla": lina.chunk_gla, "chunk_kda": lina.chunk_kda, "chunk_gdn": lina.chunk_gated_delta_rule}[op]
    return lambda: fn(*args)


def fla_call(op, args):
    if op == "chunk_gla":
        from fla.ops.gla import chunk_gla as fn
    elif op == "chunk_kda":
        from fla.ops.kda import chunk_kda as fn
    else:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fn
    return lambda: fn(*args)


def host_us(call, rounds):
    for _ in range(3):  # warm: first calls build caches (FLA autotunes here)
        call()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(rounds):
        torch.cuda._sleep(SLEEP_CYCLES)
        t0 = time.perf_counter()
        for _ in range(CALLS):
            call()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        per_call.append((t1 - t0) / CALLS * 1e6)
    return {"median_us": statistics.median(per_call), "min_us": min(per_call), "max_us": max(per_call),
            "rounds": rounds, "calls_per_round": CALLS}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", default="chunk_gla,chunk_kda,chunk_gdn")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--no-fla", action="store_true", help="skip FLA's entry points")
    p.add_argument("--json", help="write the results here")
    a = p.parse_args()
    rows = []
    one = torch.zeros(1, device="cuda")
    r = host_us(lambda: one.add_(1.0), a.rounds)
    r.update(op="torch", entry="floor")
    rows.append(r)
    print(f"{'torch':10s} {'floor':9s} {r['median_us']:8.2f} us/call", flush=True)
    for op in a.ops.split(","):
        entries = [("op", lambda: lina_op_call(op, inputs(op)), torch.no_grad),
                   ("fla_api", lambda: lina_api_call(op, inputs(op)), torch.no_grad),
                   ("autograd", lambda: lina_api_call(op, inputs(op, requires_grad=True)), torch.enable_grad)]
        if not a.no_fla:
            entries.append(("fla", lambda: fla_call(op, inputs(op)), torch.no_grad))
        for name, make, mode in entries:
            with mode():
                r = host_us(make(), a.rounds)
            r.update(op=op, entry=name)
            rows.append(r)
            print(f"{op:10s} {name:9s} {r['median_us']:8.2f} us/call (min {r['min_us']:.2f}, max {r['max_us']:.2f})",
                  flush=True)
    machine = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "lina": lina.version(),
               "python": platform.python_version(), "cpu": platform.processor() or platform.machine()}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tool": "bench/torch_host_time.py", "machine": machine, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
