"""A metric's cache key knows its code: editing a user's metric re-scores (issue: stale scores).

The end-to-end test follows the path ``docs/metrics.md`` teaches: a metric class in the user's own
module, a YAML config in the user's own config folder on Hydra's search path, ``ts2 score`` run in
a new process each time (as a user runs it), one shared score cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from metrics_adapters.base import Metric
from metrics_adapters.identity import code_identity, fingerprint_hash

MODULE = '''
from metrics_adapters import Metric


class EditedMetric(Metric):
    needs_images = False

    def score_batch(self, items, images):
        return [VALUE for _ in items]
'''


def _write_metric(root: Path, value: str) -> None:
    pkg = root / "user_pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "edited.py").write_text(MODULE.replace("VALUE", value))


def _score(root: Path, out: Path, cache: Path) -> tuple[pd.DataFrame, dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run(
        [sys.executable, "-m", "ts2", "score", "dataset=mini", "metric=edited", "limit=6", "progress=false",
         f"hydra.searchpath=[file://{root / 'my_conf'}]", f"cache_dir={cache}", f"output_dir={out}"],
        capture_output=True, text=True, timeout=300, cwd=root, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return pd.read_csv(out / "scores.csv"), json.loads((out / "run.json").read_text())


def test_editing_a_user_metric_rescores_with_the_same_cache(tmp_path):
    (tmp_path / "my_conf" / "metric").mkdir(parents=True)
    (tmp_path / "my_conf" / "metric" / "edited.yaml").write_text(textwrap.dedent("""\
        _target_: user_pkg.edited.EditedMetric
        name: edited
    """))
    cache = tmp_path / "cache"
    _write_metric(tmp_path, "0.25")
    first, run1 = _score(tmp_path, tmp_path / "r1", cache)
    assert first["edited"].tolist() == [0.25] * 6

    again, run2 = _score(tmp_path, tmp_path / "r2", cache)  # unchanged code: all from the cache
    hits = [m["cache_hits"] for m in run2["metrics"] if m["name"] == "edited"]
    assert hits == [6] and again["edited"].tolist() == [0.25] * 6

    _write_metric(tmp_path, "0.75")  # the user edits score_batch
    edited, run3 = _score(tmp_path, tmp_path / "r3", cache)
    assert edited["edited"].tolist() == [0.75] * 6
    assert [m["cache_hits"] for m in run3["metrics"] if m["name"] == "edited"] == [0]


class _Own(Metric):
    def score_batch(self, items, images):
        return [0.0 for _ in items]


def test_code_identity_of_own_and_outside_classes(monkeypatch):
    # Classes of the ts2 packages are keyed by `version` alone (edits elsewhere in their module
    # must not invalidate every cache); a class outside them also by its source.
    from metrics_adapters.controls.random import RandomScore

    assert code_identity(RandomScore) == {"version": "1"}
    here = code_identity(_Own)  # this test module lies outside the ts2 packages
    assert here["version"] == "1" and list(here["source"]) == [f"{__name__}:_Own"]
    before = _Own("x").fingerprint_hash()
    monkeypatch.setattr(_Own, "version", "2", raising=False)
    assert _Own("x").fingerprint_hash() != before  # bumping the version changes the key


def test_fingerprint_hash_ignores_key_order():
    assert fingerprint_hash({"a": 1, "b": [1, 2]}) == fingerprint_hash({"b": [1, 2], "a": 1})
    assert fingerprint_hash({"a": 1}) != fingerprint_hash({"a": 2})
    assert len(fingerprint_hash({})) == 32


@pytest.mark.parametrize("edit", ["x = 1\n", "# a comment\n"])
def test_source_hash_follows_the_module_file(tmp_path, monkeypatch, edit):
    import importlib

    _write_metric(tmp_path, "0.5")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("user_pkg.edited")
    try:
        before = code_identity(mod.EditedMetric)["source"]
        path = Path(mod.__file__)
        path.write_text(path.read_text() + edit)
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
        assert code_identity(mod.EditedMetric)["source"] != before
    finally:
        for name in ("user_pkg.edited", "user_pkg"):
            sys.modules.pop(name, None)
