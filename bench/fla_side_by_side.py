#!/usr/bin/env python3
"""The side by side is `python -m lina.bench` (python/lina/bench, bench/README.md): this file runs it with the
same flags, for the commands recorded in benchmarks/RECORDS.md. It needs lina's PyTorch extension
(LINA_TORCH_LIB=BUILD/bindings/torch/_C.so when lina is not installed).

    LINA_TORCH_LIB=build/bindings/torch/_C.so python3 bench/fla_side_by_side.py --ops chunk_gla --modes fwd --out /tmp/side
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

if __name__ == "__main__":
    from lina.bench.cli import main
    sys.exit(main())
