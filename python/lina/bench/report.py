"""The markdown summary of a side-by-side file: one line per cell with each implementation's median, its
speedup over the baseline, its check and peak extra memory, then the geomean speedup per op and mode."""
import math

from lina.bench.timers import PRIMARY_METHODS
from lina.bench.workload import DEFAULT_SHAPES, HBM_GBPS


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


def check_text(r):
    chk = r.get("check") or {}
    s = "pass" if chk.get("pass") else ("FAIL" if chk.get("pass") is False else "unverified")
    if chk.get("err_ratio") is not None:
        s += f" ({chk['err_ratio']:.1e})"
    return s


def why_not(r, key="median_ms"):
    """A cell of an implementation without the value: why (skipped, error), cut to 40 characters."""
    if r is None:
        return "-"
    first = r.get("gpu_error") if key.startswith("gpu_") else None
    return (first or r.get("error") or r.get("skipped") or "-")[:40]


def value(r, key, fmt):
    return fmt % r[key] if r is not None and r.get(key) is not None else why_not(r, key)


def labels_in(doc):
    seen = []
    for r in doc["results"]:
        if r.get("impl") and r["impl"] not in seen:
            seen.append(r["impl"])
    return seen


def markdown(doc):
    m, cfg = doc["machine"], doc["config"]
    base = cfg.get("baseline_impl")
    lines = [f"Machine: {m['gpu']} ({m['sm_count']} SMs, CC {m['compute_capability']}), {m.get('nvidia_smi', '')}, "
             f"torch {m['torch']}, CUDA {m['cuda_runtime']}"]
    lines += [f"Command: `{c}`" for c in cfg.get("commands", [cfg["command"]])]
    lines.append(f"Primary timer: {cfg.get('primary_method', PRIMARY_METHODS['synced'])}")
    lines.append(f"Reference: {cfg.get('reference', '-')}; baseline of the speedups: {base or '-'}")
    for d in cfg.get("implementations", []):
        state = f"available{', ' + d['version'] if d.get('version') else ''}" if d["available"] else f"not run: {d['reason']}"
        lines.append(f"- {d['name']} ({d['label']}): {state}")
    labels = labels_in(doc)
    if base not in labels:  # the baseline did not run (or was not asked for): no speedup columns
        base = None
    others = [x for x in labels if x != base]
    gpu = cfg.get("gpu_time") or any(k.startswith("gpu_") for r in doc["results"] for k in r)
    head = ["op", "mode", "shape"] + [f"{x} ms" for x in labels] + [f"{x} vs {base}" for x in others if base]
    head += [f"{x} check" for x in labels] + ["peak extra MB " + " / ".join(labels)]
    if gpu:  # appended, so the default columns keep their places
        head += [f"{x} GPU ms" for x in labels] + [f"{x} GPU vs {base}" for x in others if base]
    lines += ["", "| " + " | ".join(head) + " |",
              "|" + "|".join("---" if i < 3 or h.endswith("check") else "---:" for i, h in enumerate(head)) + "|"]
    cells = {}
    for r in doc["results"]:
        cells.setdefault((r["op"], r["mode"], r["shape"]), {})[r.get("impl")] = r
    speedups, gpu_speedups = {}, {}
    for (op, mode, shape), c in cells.items():
        b = c.get(base)
        row = [op, mode, shape] + [value(c.get(x), "median_ms", "%.3f") for x in labels]
        if base:
            for x in others:
                r = c.get(x)
                sp = b["median_ms"] / r["median_ms"] if b and r and b.get("median_ms") and r.get("median_ms") else None
                if sp:
                    speedups.setdefault((x, op, mode), []).append(sp)
                row.append("%.2fx" % sp if sp else "-")
        row += [check_text(c[x]) if x in c and "median_ms" in c[x] else "-" for x in labels]
        row.append(" / ".join("%.0f" % ((c[x].get("peak_extra_mem_bytes") or 0) / 1e6) if x in c else "-" for x in labels))
        if gpu:
            row += [value(c.get(x), "gpu_median_ms", "%.3f") for x in labels]
            if base:
                for x in others:
                    r = c.get(x)
                    sp = (b["gpu_median_ms"] / r["gpu_median_ms"]
                          if b and r and b.get("gpu_median_ms") and r.get("gpu_median_ms") else None)
                    if sp:
                        gpu_speedups.setdefault((x, op, mode), []).append(sp)
                    row.append("%.2fx" % sp if sp else "-")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    for kind, sp in (("", speedups), ("GPU-only ", gpu_speedups)):
        for (x, op, mode), v in sp.items():
            lines.append(f"Geomean {kind}speedup of {x} over {base}, {op} {mode}, over {len(v)} shapes: {geomean(v):.2f}x "
                         f"(slowest cell {min(v):.2f}x)")
    floors = {}
    for r in doc["results"]:  # how far from the roofline floor, fwd at FLA's default shapes (as the anchors state it)
        if r.get("x_floor") and r["mode"] == "fwd" and r["shape"] in DEFAULT_SHAPES:
            floors.setdefault((r["impl"], r["op"]), []).append(r["x_floor"])
    for (x, op), v in floors.items():
        lines.append(f"Geomean x floor of {x}, {op} fwd, over {len(v)} default shapes: {geomean(v):.2f}")
    for r in doc["results"]:  # decode: how close to reading and writing the fp32 state once
        if r.get("mode") == "decode" and r.get("floor_us"):
            gpu_part = f", GPU (graph) {r['gpu_median_ms'] * 1e3:.1f} us = {r['gpu_frac_floor']:.0%}" if r.get(
                "gpu_median_ms") else ""
            lines.append(f"Decode floor {r['floor_us']:.1f} us (fp32 state read + written once at {HBM_GBPS / 1e3:.1f} "
                         f"TB/s), {r['impl']} {r['op']} {r['shape']}: primary {r['median_ms'] * 1e3:.1f} us = "
                         f"{r['frac_floor']:.0%} of it{gpu_part}")
    if gpu:
        if cfg.get("gpu_time"):
            lines.append("GPU columns of chunk rows (--gpu-time): host time hidden behind a sleep kernel, see "
                         "config.gpu_time_method; the other columns are the primary timer's.")
        if cfg.get("decode_gpu_method"):
            lines.append("GPU columns of decode rows: CUDA-graph replay, see config.decode_gpu_method.")
    return "\n".join(lines) + "\n"
