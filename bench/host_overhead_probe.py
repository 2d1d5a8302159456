#!/usr/bin/env python3
"""Where a side-by-side millisecond goes: GPU work vs host time that the CUDA-event timer also sees.

For each (impl, op, shape, mode) it reports, as medians over --n calls:
  event_ms      the side-by-side method (L2 flush, events around the call); host time leaks in when
                the GPU finishes the flush before the host has enqueued the op's kernels
  hidden_ms     the same events, but the GPU is kept busy (torch.cuda._sleep) until the host has
                enqueued everything: GPU time of the op alone
  host_ms       perf_counter around the call, no synchronisation: what the host spends enqueueing
  c_call_ms     (lina) the part of host_ms inside lina_c_call (C++ validation, tables, launches)
Run on the GPU machine, same environment as bench/fla_side_by_side.py (or through
bench/procedures/side_by_side.sh --host-probe):
    python3 bench/host_overhead_probe.py --ops chunk_gla --shapes B8_T1024_H8_D64 --impls lina fla --lib build/bindings/liblina_c.so
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fla_side_by_side as sbs  # noqa: E402
import lina_torch  # noqa: E402  (on sys.path through fla_side_by_side)


class TimedLibrary:
    """Wraps lina's ctypes library: accumulates host seconds spent inside lina_c_call."""

    def __init__(self, lib):
        self.lib, self.seconds = lib, 0.0

    def __getattr__(self, name):
        return getattr(self.lib, name)

    def lina_c_call(self, *a):
        t0 = time.perf_counter()
        rc = self.lib.lina_c_call(*a)
        self.seconds += time.perf_counter() - t0
        return rc


def probe(impl, op, shape, mode, n, timed_lib, profile=False):
    B, T, H, D = sbs.parse_shape(shape)
    fn = sbs.timed_fn(impl, op, mode, sbs.make_inputs(op, B, T, H, D, 42), None)  # as the side-by-side times it
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    ev, hidden, host, ccall = [], [], [], []
    for i in range(n):
        for busy in (False, True):
            flush.zero_()
            if busy:
                torch.cuda._sleep(20_000_000)  # ~10 ms of GPU spinning: the host enqueues everything meanwhile
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            timed_lib.seconds = 0.0
            h0 = time.perf_counter()
            fn()
            h1 = time.perf_counter()
            e.record()
            e.synchronize()
            if busy:
                hidden.append(s.elapsed_time(e))
            else:
                ev.append(s.elapsed_time(e))
                host.append((h1 - h0) * 1e3)
                ccall.append(timed_lib.seconds * 1e3)
    # hidden_ms still contains the sleep's tail (the events bracket it): subtract a sleep-only interval.
    sleep_only = []
    for _ in range(n):
        torch.cuda._sleep(20_000_000)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        e.record()
        e.synchronize()
        sleep_only.append(s.elapsed_time(e))
    med = statistics.median
    if profile:  # where the host time goes, by Python function (C calls appear as builtins)
        import cProfile
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(200):
            fn()
        pr.disable()
        torch.cuda.synchronize()
        print(f"--- cProfile {impl} {op} {mode} {shape}: 200 calls, top functions by own time")
        pstats.Stats(pr).sort_stats("tottime").print_stats(14)
    return dict(impl=impl, op=op, shape=shape, mode=mode, event_ms=med(ev), hidden_ms=med(hidden) - med(sleep_only),
                host_ms=med(host), c_call_ms=med(ccall) if impl == "lina" else None, n=n,
                host_samples_ms=[round(x, 4) for x in host], event_samples_ms=[round(x, 4) for x in ev])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="chunk_gla")
    ap.add_argument("--shapes", default="B8_T1024_H8_D64,B4_T2048_H16_D128")
    ap.add_argument("--impls", nargs="+", default=["lina", "fla"])
    ap.add_argument("--modes", default="fwd")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--json")
    ap.add_argument("--profile", action="store_true", help="also cProfile 200 calls of each cell")
    ap.add_argument("--lib", help="lina's liblina_c.so (default: $LINA_LIB, else build/bindings of this checkout)")
    a = ap.parse_args()
    if a.lib:
        if not Path(a.lib).is_file():
            ap.error(f"--lib: {a.lib} is not a file, expected lina's liblina_c.so")
        os.environ["LINA_LIB"] = a.lib  # read when lina_torch first loads the library
    timed = TimedLibrary(lina_torch.library())
    lina_torch._lib = timed
    rows = []
    for op in a.ops.split(","):
        for mode in a.modes.split(","):
            for shape in a.shapes.split(","):
                for impl in a.impls:
                    try:
                        r = probe(impl, op, shape, mode, a.n, timed, a.profile)
                    except Exception as e:  # noqa: BLE001 - recorded, never hidden
                        r = dict(impl=impl, op=op, shape=shape, mode=mode, error=f"{type(e).__name__}: {e}")
                    rows.append(r)
                    print(json.dumps(r), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
