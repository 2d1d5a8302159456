#!/usr/bin/env python3
"""Where one kernel's warp samples sit, by source line: an Nsight Compute source page exported as CSV
(`ncu --import REP --page source --csv --print-source sass > sass.csv`, one kernel per file) plus the line info
of the binary that ran (a -lineinfo build; `cuobjdump -xelf all` + `nvdisasm --print-line-info`).

  ncu_hot_lines.py sass.csv BINARY FUNC_REGEX [--top N]
      the stall mix of the kernel and its N hottest source lines (innermost frame: inlined helpers count as
      their own lines), with executed instructions and the three largest stall reasons of each
  ncu_hot_lines.py sass.csv BINARY FUNC_REGEX --ranges FILE A-B:NAME ...
      samples and instructions per line range of FILE (the innermost frame inside FILE, so inlined helpers
      count where FILE called them). nvdisasm often gives an inlined helper's code (cvt, ld / st, mma, atomics)
      only its own frame: such code counts for the FILE line before it in address order (the caller that
      issued it, as a rule); 'other' = code before any line of FILE
"""
import argparse, collections, csv, os, re, subprocess, tempfile


def line_map(binary, func_regex):
    """SASS offset -> [(file, line), ...] (innermost first) for the first function matching func_regex."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(['cuobjdump', '-xelf', 'all', os.path.abspath(binary)], cwd=d, capture_output=True, check=False)
        for f in sorted(os.listdir(d)):
            out = subprocess.run(['nvdisasm', '--print-line-info', os.path.join(d, f)], capture_output=True, text=True).stdout
            lines, inside, frames = {}, False, None
            for text in out.splitlines():
                m = re.match(r'\s*\.text\.(\S+):', text)
                if m:
                    inside = re.search(func_regex, m.group(1)) is not None
                    continue
                if not inside:
                    continue
                m = re.search(r'//## File "([^"]+)", line (\d+)', text)
                if m:
                    frames = [(os.path.basename(m.group(1)), int(m.group(2)))]
                    frames += [(os.path.basename(a), int(b)) for a, b in re.findall(r'inlined at "([^"]+)", line (\d+)', text)]
                    continue
                m = re.match(r'\s*/\*([0-9a-f]{4,})\*/', text)
                if m and frames:
                    lines[int(m.group(1), 16)] = frames
            if lines:
                return lines
    raise SystemExit(f'no function matching {func_regex} with line info in {binary}')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('csv'), ap.add_argument('binary'), ap.add_argument('func_regex')
    ap.add_argument('--top', type=int, default=30)
    ap.add_argument('--ranges', nargs='+', metavar='FILE A-B:NAME')
    a = ap.parse_args()
    rows = list(csv.reader(open(a.csv)))
    head = rows[1]
    data = [r for r in rows[2:] if len(r) == len(head)]
    col = {c: i for i, c in enumerate(head)}
    stalls = [c for c in head if c.startswith('stall_') and '(Not Issued)' not in c]
    base = int(data[0][col['Address']], 16)
    lines = line_map(a.binary, a.func_regex)
    samples, insts = collections.Counter(), collections.Counter()
    per, mix = collections.defaultdict(collections.Counter), collections.Counter()
    spans = []
    if a.ranges:
        fname = a.ranges[0]
        for spec in a.ranges[1:]:
            lo, rest = spec.split('-', 1)
            hi, name = rest.split(':', 1)
            spans.append((int(lo), int(hi), name))
    last_ln = None
    for r in sorted(data, key=lambda r: int(r[col['Address']], 16)):
        frames = lines.get(int(r[col['Address']], 16) - base, [('?', 0)])
        if a.ranges:
            ln = next((l for f, l in frames if f == fname), last_ln)
            last_ln = ln
            key = 'other' if ln is None else next((n for lo, hi, n in spans if lo <= ln <= hi), f'{fname}:other')
        else:
            key = f'{frames[0][0]}:{frames[0][1]}'
        s = int(r[col['Warp Stall Sampling (All Samples)']] or 0)
        samples[key] += s
        insts[key] += int(r[col['Instructions Executed']] or 0)
        for c in stalls:
            v = int(r[col[c]] or 0)
            per[key][c[6:]] += v
            mix[c[6:]] += v
    total, total_i = sum(samples.values()) or 1, sum(insts.values()) or 1
    print(f'{rows[0][1][:110]}: {total} samples')
    print('stall mix: ' + ', '.join(f'{k} {100 * v / total:.1f}%' for k, v in mix.most_common(10)))
    for key, s in samples.most_common(None if a.ranges else a.top):
        top3 = ', '.join(f'{k} {v}' for k, v in per[key].most_common(3))
        print(f'{100 * s / total:5.1f}% samples  {100 * insts[key] / total_i:5.1f}% inst  {key}  [{top3}]')


if __name__ == '__main__':
    main()
