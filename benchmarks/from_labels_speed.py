"""Building SEGs from fine-grained labels at EvalMuse-40K's size: ``ts2 data from-labels``.

    python benchmarks/from_labels_speed.py [--prompts 4000] [--per-prompt 10] [--elements 6] [--json FILE]

Writes a synthetic ``train_list.json`` in EvalMuse's format (``--prompts`` x ``--per-prompt``
images, ``--elements`` elements per prompt, 3 raters, ``element_score`` as a dict literal in a
string as the real file has it), then times, each in its own process (peak RSS from ``os.wait4``):

- floor: ``json.load`` of the file and ``ast.literal_eval`` of every ``element_score`` (reading
  the file the way EvalMuse's own ``process_train.py`` does, nothing else);
- build: ``ts2 data from-labels format=evalmuse labels=FILE images=false out=DIR`` (read and
  validate, group, covering edges, write ``dataset.yaml`` and ``build.json``);
- load: ``ts2 data info path=DIR json=true`` on the result (load and validate the written SEGs).

Target (issue 45): the build of 40,000 images under 30 s and 1 GB on the 2-core machine; reported
as a ratio to the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CATEGORIES = ("object", "attribute", "counting", "spatial", "activity", "color", "material", "location")


def write_labels(path: Path, prompts: int, per_prompt: int, elements: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    recs = []
    for p in range(prompts):
        keys = [f"word{p}_{e} ({CATEGORIES[(p + e) % len(CATEGORIES)]})" for e in range(elements)]
        for i in range(per_prompt):
            es = {}
            for k in keys:
                ok = i == 0 or rng.random() > 0.2
                votes = [int(ok)] * 3
                if rng.random() < 0.15:
                    votes[rng.randrange(3)] ^= 1
                es[k] = votes
            recs.append({"prompt": f"prompt number {p}", "img_path": f"{p:05d}/{i}.png",
                         "total_score": [rng.randint(1, 5) for _ in range(3)], "element_score": str(es),
                         "promt_meaningless": [0, 0, 0], "split_confidence": [1, 1, 1],
                         "attribute_confidence": [1, 1, 1]})
    path.write_text(json.dumps(recs))
    return len(recs)


FLOOR = ("import ast, json, sys\n"
         "data = json.load(open(sys.argv[1], encoding='utf-8'))\n"
         "n = sum(len(ast.literal_eval(r['element_score'])) for r in data)\n")


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one child process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=4000)
    ap.add_argument("--per-prompt", type=int, default=10)
    ap.add_argument("--elements", type=int, default=6)
    ap.add_argument("--json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        labels = Path(tmp) / "train_list.json"
        n = write_labels(labels, args.prompts, args.per_prompt, args.elements)
        mb = labels.stat().st_size / 2**20
        floor = timed([sys.executable, "-c", FLOOR, str(labels)])
        out = Path(tmp) / "segs"
        build = timed([sys.executable, "-m", "ts2", "data", "from-labels", "format=evalmuse", f"labels={labels}",
                       "images=false", f"out={out}"])
        load = timed([sys.executable, "-m", "ts2", "data", "info", f"path={out}", "json=true"])
        summary = json.loads((out / "build.json").read_text())
    rows = {"images": n, "label_file_mb": round(mb, 1), "segs": summary["n_segs"],
            "floor_s": round(floor[0], 2), "floor_mb": round(floor[1]),
            "build_s": round(build[0], 2), "build_mb": round(build[1]), "build_vs_floor": round(build[0] / floor[0], 2),
            "load_s": round(load[0], 2), "load_mb": round(load[1])}
    print(f"{n} images ({mb:.1f} MB of labels) -> {summary['n_segs']} SEGs")
    print(f"floor (json + literal_eval): {floor[0]:.2f} s, {floor[1]:.0f} MB")
    print(f"ts2 data from-labels:        {build[0]:.2f} s, {build[1]:.0f} MB = {build[0] / floor[0]:.1f}x the floor "
          f"(target < 30 s and 1 GB: {'met' if build[0] < 30 and build[1] < 1024 else 'MISSED'})")
    print(f"ts2 data info on the result: {load[0]:.2f} s, {load[1]:.0f} MB")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
