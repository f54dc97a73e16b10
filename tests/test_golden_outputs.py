"""Issue 43: a refactor changes no result. The files ``ts2 analyze`` (mini, the release, the human view) and
``ts2 reproduce`` write are compared, byte for byte, with their SHA-256 recorded in ``tests/data/golden_outputs.json``
before the library layer was reorganised.

Files whose content is a time or a path by design (``manifest.json``, ``ts2.log``, ``analysis.json``, ``.hydra/``)
are left out. When a change *should* alter a result (a new statistic, a bug fix), regenerate the record on purpose
and say why in the commit::

    python tests/test_golden_outputs.py          # rewrites tests/data/golden_outputs.json (needs ../shared)
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "tests" / "data" / "golden_outputs.json"
SKIP = {"manifest.json", "ts2.log", "analysis.json"}


def cases(shared: Path) -> dict[str, tuple[list[str], bool]]:
    """Name -> (``ts2`` arguments, needs ``../shared``)."""
    rel, human = shared / "ts2", shared / "human"
    return {
        "analyze_mini": (["analyze", f"scores={REPO / 'tests/data/mini_run_scores.csv'}", "dataset=mini", "progress=false"], False),
        "analyze_release": (["analyze", f"scores={rel / 'released/scores_subset.csv'}", f"path={rel}", "progress=false"], True),
        "reproduce_release": (["reproduce", f"path={rel}", "figures=[]"], True),
        "human_tifa160": (["analyze", f"human={human / 'dsg_tifa160_anns.csv'}",
                           f"human_scores={human / 'tifa_v1_human_annotations_with_scores.json'}",
                           "bootstrap=50", "human_permutations=200", "progress=false"], True),
    }


def _placeless(data: bytes) -> bytes:
    """The file's bytes with where ``../shared`` lies replaced by one name: some files name their source file
    (``human_sets_overview.csv``), and the folder is elsewhere on each machine (or reached through a link)."""
    for place in sorted({str(SHARED), str(SHARED.resolve()), os.path.realpath(SHARED)}, key=len, reverse=True):
        data = data.replace(place.encode(), b"<shared>")
    return data


def digests(args: list[str], out: Path, cache: Path) -> dict[str, str]:
    env = {**os.environ, "TS2_CACHE_DIR": str(cache), "TS2_ANALYSIS_STORE_MAX_MB": "0"}
    r = subprocess.run([sys.executable, "-m", "ts2", *args, f"output_dir={out}"],
                       capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"ts2 {' '.join(args)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return {p.relative_to(out).as_posix(): hashlib.sha256(_placeless(p.read_bytes())).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file() and p.name not in SKIP
            and ".hydra" not in p.relative_to(out).parts}


@pytest.mark.parametrize("name", list(cases(Path("."))))
def test_outputs_are_byte_identical_to_the_record(name, tmp_path):
    args, needs_shared = cases(SHARED)[name]
    if needs_shared and not (SHARED / "ts2" / "metadata.csv").is_file():
        pytest.skip(f"needs the shared TS2 data at {SHARED} (absent)")
    expected = json.loads(RECORD.read_text())[name]
    got = digests(args, tmp_path / "out", tmp_path / "cache")
    assert sorted(got) == sorted(expected), "the set of files written changed"
    changed = [f for f in expected if got[f] != expected[f]]
    assert not changed, f"{name}: these files differ from the record: {changed}"


if __name__ == "__main__":
    import tempfile

    record = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (args, _) in cases(SHARED).items():
            record[name] = digests(args, Path(tmp) / name, Path(tmp) / "cache")
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORD} ({sum(len(v) for v in record.values())} files)")
