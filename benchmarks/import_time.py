"""Cost of ``import ts2`` against ``import pandas``, each in a fresh interpreter, run by hand.

    python benchmarks/import_time.py [--repeats 7]

Target (issue 27): ``import ts2`` costs no more than ``import pandas`` + 0.2 s, and loads neither
torch, transformers, open_clip, matplotlib nor Hydra (``tests/test_python_api.py`` asserts the
latter). Prints the median wall time of each over ``--repeats`` fresh processes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def time_import(stmt: str, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", stmt], check=True, cwd=REPO)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    bare = time_import("pass", args.repeats)
    pd_ = time_import("import pandas", args.repeats)
    ts = time_import("import ts2", args.repeats)
    heavy = subprocess.run([sys.executable, "-c", "import sys, ts2; print(sorted(m for m in ('torch', 'transformers', "
                            "'open_clip', 'matplotlib', 'hydra', 'pandas') if m in sys.modules))"],
                           capture_output=True, text=True, check=True, cwd=REPO).stdout.strip()
    print(f"python start-up      {bare:.3f} s")
    print(f"import pandas        {pd_:.3f} s (+{pd_ - bare:.3f} s)")
    print(f"import ts2           {ts:.3f} s (+{ts - bare:.3f} s); heavy packages loaded: {heavy}")
    print(f"target: import ts2 <= import pandas + 0.2 s: {'met' if ts <= pd_ + 0.2 else 'NOT met'}")


if __name__ == "__main__":
    main()
