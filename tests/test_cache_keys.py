"""What keys a cached score (issue 42, "silent wrong results"): a function's own body, the contents of
arrays bound with functools.partial; a NaN stored in the cache is never served; score columns never
take a reserved name; figure file names never collide or overflow."""

from __future__ import annotations

import functools
import json
import sqlite3

import numpy as np
import pytest

pytest.importorskip("PIL")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from seg_data import load_seg_file
    from seg_data.synthetic import make_synthetic

    return load_seg_file(make_synthetic(tmp_path_factory.mktemp("syn") / "d", n_segs=2, seed=3))


def _score(fn, ds, tmp_path, name="m", version="1"):
    import ts2

    return ts2.score(fn, ds, name=name, version=version, cache_dir=str(tmp_path / "cache"), progress=False,
                     device="cpu")


def test_a_function_redefined_with_a_new_body_is_scored_again(tiny, tmp_path):
    def metric(images, prompts):
        return [1.0 for _ in images]

    first = _score(metric, tiny, tmp_path)

    def metric(images, prompts):  # noqa: F811 - redefined on purpose: same name and version, new body
        return [2.0 for _ in images]

    second = _score(metric, tiny, tmp_path)
    assert (first["m"] == 1.0).all() and (second["m"] == 2.0).all()
    assert second.attrs["run"]["cache_hits"] == 0


def test_the_same_function_again_hits_the_cache(tiny, tmp_path):
    def metric(images, prompts):
        return [float(len(p)) for p in prompts]

    _score(metric, tiny, tmp_path)
    again = _score(metric, tiny, tmp_path)
    assert again.attrs["run"]["cache_hits"] == len(again)


def test_partial_with_large_arrays_keys_on_their_contents(tiny, tmp_path):
    def weighted(images, prompts, w):
        return [float(w.sum()) for _ in images]

    a, b = np.zeros(5000), np.zeros(5000)
    b[2500] = 1.0
    assert repr(a) == repr(b)  # what the key used to hash
    ra = _score(functools.partial(weighted, w=a), tiny, tmp_path, name="w")
    rb = _score(functools.partial(weighted, w=b), tiny, tmp_path, name="w")
    assert (ra["w"] == 0.0).all() and (rb["w"] == 1.0).all()


@pytest.mark.parametrize("name", ["file_name", "seg_id", "node", "prompt", "image_path", "subset"])
def test_reserved_column_names_are_refused(tiny, tmp_path, name):
    with pytest.raises(ValueError, match=rf"expected score column names other than the reserved .*got '{name}'"):
        _score(lambda images, prompts: [0.0] * len(images), tiny, tmp_path, name=name)


def test_a_nan_in_the_cache_is_scored_again_not_served(tiny, tmp_path, caplog):
    def metric(images, prompts):
        return [3.0 for _ in images]

    _score(metric, tiny, tmp_path)
    db = next((tmp_path / "cache").rglob("*.sqlite"))
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE scores SET scores=?", (json.dumps([float("nan")]),))
    con.close()
    with caplog.at_level("WARNING"):
        again = _score(metric, tiny, tmp_path)
    assert (again["m"] == 3.0).all() and again.attrs["run"]["cache_hits"] == 0
    assert "not a finite number" in caplog.text


def test_figure_file_names_never_collide_nor_overflow():
    from analysis.report.figures import SAFE_NAME_MAX, _safe

    assert _safe("a/b") != _safe("a_b") and _safe("a b") != _safe("a_b")
    long = "x" * 300
    assert len(_safe(long)) <= SAFE_NAME_MAX + 9 and _safe(long) != _safe(long[:-1])
    assert _safe("clipscore") == "clipscore"


def test_rehash_reads_an_image_rewritten_in_place_with_the_same_size_and_mtime(tmp_path):
    import os

    from PIL import Image

    from metrics_adapters.cache import ScoreCache

    p = tmp_path / "a.png"
    Image.new("RGB", (8, 8), (10, 0, 0)).save(p)
    st = os.stat(p)
    cache = ScoreCache(tmp_path / "c.sqlite")
    first = cache.file_hash(p)
    Image.new("RGB", (8, 8), (20, 0, 0)).save(p)  # same size (PNG of one flat colour), new content
    assert os.stat(p).st_size == st.st_size
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the old modification time
    assert cache.file_hash(p) == first  # the documented (path, size, mtime) rule
    assert cache.file_hash(p, rehash=True) != first  # content mode sees the new image
