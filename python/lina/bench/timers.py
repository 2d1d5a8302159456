"""The side by side's timers, the same for every implementation.

dobench (default): triton.testing.do_bench's method (FLA's runner): a 256 MB buffer cleared with zero_() before
every sample, CUDA events around each call, no synchronisation between the samples of a batch (the host
enqueues ahead, as do_bench does), warm-up of max(1, 25 ms / estimate) calls after an estimate from 5 flushed
calls; then batches of max(--min-samples, 100 ms / estimate) samples (at most --max-samples) until relative
noise (std/mean) is under --max-noise or --budget-s per cell is spent.
synced: the method of the early records (a 2 x L2 flush and a synchronize after every sample): it also counts
the host time of a call whenever the GPU finishes the flush before the host has enqueued the call's kernels.
wall (CPU tensors only): time.perf_counter around each call under the same stopping rule; for the CPU smoke,
not a figure.

--gpu-time times every cell a second time, GPU only: each sample is flush, torch.cuda._sleep(N), start event,
call, end event. N covers the host time of one call (max(0.2 ms, 3 x the median host ms of 5 calls after a
synchronize); cycles per ms measured once per process), so every kernel is queued before the GPU reaches the
start event. A sample whose start event has already fired when the call and end event are enqueued (host not
hidden) is dropped and N doubled, at most 4 times; the row gets gpu_error if it still happens 3 times at that
length (a call that waits for the GPU, e.g. a device-to-host copy). Each sample is then reduced by the median
interval of 11 empty start/end pairs measured the same way (flush, sleep N) after each row's samples.
"""
import math
import statistics
import time

import torch

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
    "wall": "CPU tensors: time.perf_counter around each call, 3 warm-up calls (a smoke of the tool, not a figure)",
}
GPU_METHOD = ("L2 flush, torch.cuda._sleep(N), start event, call, end event, minus the median of "
              f"{GPU_CORRECTION_N} empty start/end pairs after the same flush and sleep (per row); "
              f"N = max({GPU_SLEEP_FLOOR_MS} ms, {GPU_SLEEP_HOST_MULT:g} x median host ms of {GPU_SIZING_CALLS} calls), "
              f"doubled (at most {GPU_SLEEP_DOUBLINGS} times) after a sample whose start event fired before "
              "the call was enqueued; such samples are dropped")


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
    """args: min_samples, max_samples, max_noise, budget_s, timer (a PRIMARY_METHODS key), gpu_time."""

    def __init__(self, args):
        self.args = args
        if args.timer == "wall":
            return
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        flush_bytes = DOBENCH_FLUSH_BYTES if args.timer == "dobench" else max(2 * l2, 64 << 20)
        self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
        if getattr(args, "gpu_time", False):
            self.cycles_per_ms = self.sleep_cycles_per_ms()

    def time(self, fn):
        method = {"dobench": self.time_dobench, "synced": self.time_synced, "wall": self.time_wall}[self.args.timer]
        return method(fn)

    def time_wall(self, fn):
        a = self.args
        for _ in range(3):
            fn()
        samples, t0 = [], time.perf_counter()
        while True:
            s = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - s) * 1e3)
            why = stop_reason(a, samples, t0)
            if why:
                return samples, why

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
