"""Engine hooks: run_info() reaches run.json, finalize() adds run-level columns to scores.csv,
and a cost known only after scoring is still recorded."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

import tiny_models as tm  # noqa: E402

from metrics_adapters.cache import ScoreCache  # noqa: E402
from metrics_adapters.engine import EngineSettings, items_from_table, score_metric, write_outputs  # noqa: E402
from seg_data import load_path  # noqa: E402

FAST = EngineSettings(device="cpu", num_workers=0, progress=False)


class CountingMetric(tm.PixelMeanMetric):
    """Reports how many items it scored; its cost is known only once it has scored something."""

    def __init__(self, name="counting"):
        super().__init__(name)
        self.n_seen = 0

    def score_batch(self, items, images):
        self.n_seen += len(items)
        return super().score_batch(items, images)

    def run_info(self):
        return {"n_seen": self.n_seen}

    def flops_per_image(self):
        return None if self.n_seen == 0 else 7.0

    def finalize(self, frame):
        col = frame[self.name]
        frame = frame.copy()
        frame[f"{self.name}_rank"] = col.rank(method="average")  # needs the whole run
        return frame

    def finalize_directions(self):
        return {f"{self.name}_rank": True}


def test_hooks_reach_outputs(tmp_path):
    path = tm.make_dataset(tmp_path / "data", n_segs=2, nodes=("0", "1"), per_node=2)
    items = items_from_table(load_path(path).image_table())
    m = CountingMetric()
    cache = ScoreCache(tmp_path / "c.sqlite")
    run = score_metric(m, items, cache, FAST)
    assert run.info == {"n_seen": 8}
    assert run.flops_per_image_estimate == 7.0
    csv, js = write_outputs(tmp_path / "out", items, [run], metrics=[m])
    import pandas as pd

    df = pd.read_csv(csv)
    expect = df["counting"].rank(method="average").to_numpy()
    np.testing.assert_allclose(df["counting_rank"].to_numpy(), expect)
    rec = json.loads(js.read_text())
    assert rec["metrics"][0]["info"] == {"n_seen": 8}
    assert rec["derived_columns"] == {"counting_rank": True}
    # a rerun is served from the cache; the cost stays recorded
    run2 = score_metric(CountingMetric(), items, cache, FAST)
    assert (run2.cache_hits, run2.flops_per_image_estimate) == (8, 7.0)
