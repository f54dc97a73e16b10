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


def test_question_file_found_beside_the_dataset_keys_the_cache(tmp_path):
    """TIFA with released questions found next to metadata.csv (no questions_file, no path=: the
    dataset group names the folder, as with the hub copy): editing
    that file must not reuse stale cached scores (prepare() puts its hash in the fingerprint)."""
    import pandas as pd

    from ts2.cli import main

    d = tmp_path / "ts2like"
    d.mkdir()
    (d / "metadata.csv").write_text("id,target_prompt,file_name,image_source,rank\n"
                                    "0,a cat,images/000-00.jpg,SD,0\n0,a cat,images/000-01.jpg,SD,1\n")
    answers = tmp_path / "answers.csv"
    answers.write_text("0,images/000-00.jpg,0,yes\n0,images/000-01.jpg,0,no\n")

    def run(expected_answer: str, out: str) -> list[float]:
        (d / "tifa_questions.csv").write_text("id,prompt,question_id,question,choices,answer\n"
                                              f"0,a cat,0,is there a cat?,yes|no,{expected_answer}\n")
        assert main(["score", "dataset=ts2", f"dataset.path={d}", "metric=tifa", "metric.vqa=replay", f"metric.vqa.answers={answers}",
                     "device=cpu", "progress=false", f"output_dir={tmp_path / out}",
                     f"cache_dir={tmp_path / 'cache'}"]) == 0
        return pd.read_csv(tmp_path / out / "scores.csv")["tifa"].tolist()

    assert run("yes", "a") == [1.0, 0.0]
    assert run("no", "b") == [0.0, 1.0]  # the edited question file misses the cache
