"""Issue 47: the analysis store. A column's SEG values and chance levels are the same bits whichever columns are
analysed beside it, so they are kept by content and reused; what a change affects is computed again, and the
results with the store equal those without it, byte for byte."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, shared_path

from analysis import column_store as CS
from analysis.chance import BLOCK_COLUMNS, chance_levels
from analysis.column_store import ColumnStore, column_keys
from analysis.pipeline import analyze, included_segs
from analysis.protocols import get_protocol
from analysis.scores_io import prepare_inputs, read_scores
from analysis.walks import build_walk_table

MINI = Path(__file__).parent / "data" / "mini_run_scores.csv"
KW = dict(protocols=["paper", "graph"], bootstrap=50, chance=6, subsets="none", progress=False)


@pytest.fixture()
def store(tmp_path, monkeypatch) -> ColumnStore:
    monkeypatch.setenv("TS2_ANALYSIS_STORE_MAX_MB", "64")
    return ColumnStore(tmp_path / "store")


def wide_table(n_columns: int, seed: int = 0) -> pd.DataFrame:
    """The mini run's structure with ``n_columns`` columns: continuous, rounded (tie-heavy), constant within a SEG,
    with holes, and exact copies (one permutation-null class)."""
    base = pd.read_csv(MINI, dtype={"seg_id": str, "node": str})
    rng = np.random.default_rng(seed)
    out = base[["seg_id", "node", "file_name"]].copy()
    level = base["node"].str[0].astype(int).to_numpy()
    for j in range(n_columns):
        x = -level + rng.normal(scale=1.0 + j % 3, size=len(base))
        kind = j % 5
        if kind == 1:
            x = np.round(x)  # heavy ties
        elif kind == 2:
            x = np.where(rng.random(len(x)) < 0.15, np.nan, x)
        elif kind == 3:
            x = base.groupby("seg_id")["node"].transform("size").to_numpy() * 1.0  # ties within every SEG
        elif kind == 4 and j >= 5:
            x = out[f"m{j - 5}"].to_numpy()  # a copy: same class as an earlier column
        out[f"m{j}"] = x
    return out


def arrays(result) -> dict:
    return {p: [pr.estimates, pr.ci_low, pr.ci_high, pr.seg_values.values, *pr.chance_arrays()]
            for p, pr in result.protocols.items()}


def assert_same_bits(a, b) -> None:
    for p in a:
        for x, y in zip(a[p], b[p], strict=True):
            assert x.shape == y.shape and np.array_equal(x, y, equal_nan=True)


@pytest.mark.parametrize("protocol", ["paper", "graph"])
def test_a_columns_chance_levels_do_not_depend_on_the_columns_beside_it(protocol):
    # more columns than one block holds, so columns sit in different blocks and positions
    df = wide_table(BLOCK_COLUMNS + 6)
    inputs = prepare_inputs(read_scores(df, lower_is_better=["m1", "m22"]), subsets="none")
    proto = get_protocol(protocol)
    inp = inputs.for_protocol(proto)
    seg_ids = included_segs(inp, proto)
    wt = build_walk_table(inp.structure, proto.walks, proto.root_duplication, seg_ids)
    from analysis.aggregate import score_std

    sigma = score_std(inp.scores, inp.structure, seg_ids, proto.delta_norm)
    mms = ["rank", "sep", "delta", "kendall", "pair_acc"]

    def levels(cols):
        return chance_levels(inp.scores[:, cols], inp.structure, wt, sigma[cols], proto,
                             [inp.metrics[j] for j in cols], mms, sorted(inp.lower_is_better), n_perm=7, seed=3)

    every = levels(list(range(len(inp.metrics))))
    for cols in ([22], [25, 1, 3], [9, 4, 22, 0]):
        part = levels(cols)
        for name in ("mean", "low", "high", "mc_error"):
            assert np.array_equal(getattr(every, name)[cols], getattr(part, name), equal_nan=True), (cols, name)
    # one tie pattern, one null: a copy and any other continuous complete column read the same bands of the
    # order-only meta-metrics (all but delta, which reads values); a tied column does not
    order = [k for k, m in enumerate(mms) if m != "delta"]
    assert np.array_equal(every.low[9], every.low[4], equal_nan=True)
    assert not np.array_equal(inp.scores[:, 0], inp.scores[:, 5])
    assert np.array_equal(every.low[0][order], every.low[5][order], equal_nan=True)
    assert not np.array_equal(every.low[0][order], every.low[1][order], equal_nan=True)


def test_with_the_store_the_results_are_the_same_bits_and_only_a_changed_column_is_computed(store, caplog):
    df = wide_table(8)
    plain = analyze(df, **KW)
    cold = analyze(df, store=store, **KW)
    assert_same_bits(arrays(plain), arrays(cold))
    # every column computed and kept: SEG values and chance levels, per protocol
    assert (store.hits, store.misses, store.info().n_entries) == (0, 2 * 2 * 8, 2 * 2 * 8)
    changed = df.copy()
    changed["m0"] = changed["m0"] + 0.25 * np.random.default_rng(9).normal(size=len(df))
    store.hits = store.misses = 0
    with caplog.at_level(logging.INFO, logger="analysis.column_store"):
        warm = analyze(changed, store=store, **KW)
    assert (store.hits, store.misses) == (2 * 2 * 7, 2 * 2)
    assert_same_bits(arrays(analyze(changed, **KW)), arrays(warm))
    assert "7 of 8 columns read from the analysis store" in caplog.text
    # a renamed column is found again: the name is not in the key
    store.hits = store.misses = 0
    analyze(changed.rename(columns={"m3": "renamed"}), store=store, **KW)
    assert store.misses == 0


@pytest.mark.parametrize("change, computed", [
    ({"chance": 9}, "chance"),             # permutations: the chance levels of every column, not the SEG values
    ({"seed": 5}, "chance"),                # the permutations' seed
    ({"bootstrap": 80}, "none"),            # the bootstrap is recomputed from the stored SEG values
    ({"confidence": 0.9}, "chance"),        # the chance band's level
    ({"protocols": ["graph"]}, "all"),      # another protocol (other walks, ties, weights): everything
    ({"lower_is_better": ["m2"]}, "two"),   # one column's orientation: its values and levels
    ({"code": True}, "all"),                # changed analysis code: everything
])
def test_a_change_recomputes_what_it_affects(store, monkeypatch, change, computed):
    df = wide_table(5)
    kw = {**KW, "protocols": ["paper"]}
    analyze(df, store=store, **kw)
    store.hits = store.misses = 0
    change = dict(change)
    if change.pop("code", False):
        CS.code_identity.cache_clear()
        monkeypatch.setattr(CS, "code_identity", lambda: "another version of the analysis code")
    kw2 = {**kw, **change}
    got = analyze(df, store=store, **kw2)
    n = {"chance": 5, "none": 0, "all": 10, "two": 2}[computed]
    assert store.misses == n
    if computed == "chance":
        assert store.hits == 5  # the SEG values of every column came from the store
    monkeypatch.setattr(CS, "code_identity", CS.code_identity)
    assert_same_bits(arrays(analyze(df, **kw2)), arrays(got))


def test_keys_hold_every_part_and_are_typed():
    x = np.array([[1.0, 1.0], [2.0, 2.0]])
    a = column_keys("k", ("p", 1), x)
    assert a[0] == a[1]
    assert column_keys("k", ("p", 1), x, [(0,), (1,)])[0] != column_keys("k", ("p", 1), x, [(1,), (1,)])[0]
    assert column_keys("k", ("p", "1"), x)[0] != a[0]  # 1 and "1" differ
    assert column_keys("k", ("p", 1), x[::-1])[0] != a[0]
    assert column_keys("k", ("p", 1), x.astype(np.float32))[0] == a[0]  # values, not their storage


def test_a_damaged_entry_is_computed_again_and_replaced(store, caplog):
    df = wide_table(3)
    kw = {**KW, "protocols": ["paper"]}
    first = analyze(df, store=store, **kw)
    victim = sorted(Path(store.folder).rglob("*.npz"))[0]
    victim.write_bytes(b"not a zip file")
    with caplog.at_level(logging.WARNING, logger="analysis.column_store"):
        again = analyze(df, store=store, **kw)
    assert "could not read" in caplog.text and str(victim) in caplog.text
    assert_same_bits(arrays(first), arrays(again))
    with np.load(victim) as z:  # written again
        assert z.files
    # a readable entry of the wrong shape (another layout under the same name) is not used either
    np.savez(victim, values=np.zeros((1, 1)), mean=np.zeros(3))
    assert_same_bits(arrays(first), arrays(analyze(df, store=store, **kw)))


def test_an_unwritable_store_warns_once_and_the_analysis_goes_on(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("TS2_ANALYSIS_STORE_MAX_MB", "64")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    store = ColumnStore(blocker / "store")  # below a file: every write fails
    df = wide_table(3)
    with caplog.at_level(logging.WARNING, logger="analysis.column_store"):
        got = analyze(df, store=store, **KW)
    assert caplog.text.count("could not write") == 1
    assert_same_bits(arrays(analyze(df, **KW)), arrays(got))


def test_the_store_stays_within_its_bound_dropping_the_least_recently_used(tmp_path):
    store = ColumnStore(tmp_path / "s", max_bytes=6_000)
    for i in range(20):
        store.put(f"{i:02d}" + "0" * 62, {"values": np.full((5, 20), float(i))})
        os.utime(store._path(f"{i:02d}" + "0" * 62), (1000 + i, 1000 + i))
    store.prune()
    info = store.info()
    assert info.size_bytes <= 0.8 * 6_000 and info.n_entries >= 1
    kept = sorted(p.name[:2] for p in Path(info.path).rglob("*.npz"))
    assert kept == [f"{i:02d}" for i in range(20 - len(kept), 20)]  # the newest stayed
    assert store.get("19" + "0" * 62)["values"][0, 0] == 19.0
    assert ColumnStore(tmp_path / "t", max_bytes=0).put("ab" * 32, {"v": np.zeros(2)}) is None
    assert not (tmp_path / "t").exists()


def test_concurrent_runs_share_the_store(store):
    df = wide_table(6)
    results, errors = [], []

    def run():
        try:
            results.append(arrays(analyze(df, store=ColumnStore(store.folder), **KW)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    plain = arrays(analyze(df, **KW))
    for r in results:
        assert_same_bits(plain, r)
    assert not list(Path(store.folder).rglob("*.tmp"))


def _ts2(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "ts2", *args], capture_output=True, text=True, cwd=cwd or REPO,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_ts2_analyze_reuses_the_store_writes_the_same_files_and_cache_clears_it(tmp_path):
    cache = tmp_path / "cache"
    env = {"TS2_CACHE_DIR": str(cache), "TS2_ANALYSIS_STORE_MAX_MB": "64"}
    df = wide_table(4)
    scores = tmp_path / "scores.csv"
    df.to_csv(scores, index=False)
    common = [f"scores={scores}", "bootstrap=40", "chance=4", "progress=false"]
    outs = {}
    for name, extra in (("off", ["store=false"]), ("cold", []), ("warm", [])):
        r = _ts2("analyze", *common, *extra, f"output_dir={tmp_path / name}", env=env)
        assert r.returncode == 0, r.stderr
        outs[name] = tmp_path / name
    for f in ("metametrics.csv", "per_seg.csv", "table.csv", "ranking.csv", "pairs.csv", "verdict.csv"):
        ref = (outs["off"] / f).read_bytes()
        assert (outs["cold"] / f).read_bytes() == ref and (outs["warm"] / f).read_bytes() == ref, f
    r = _ts2("cache", "info", "json=true", env=env)
    info = json.loads(r.stdout)["analysis_store"]
    assert info["n_entries"] == 2 * 2 * 4 and info["path"] == str(cache / "analysis")  # both protocols by default
    assert "analysis store:" in _ts2("cache", "info", env=env).stdout
    r = _ts2("cache", "clear", env=env)
    assert r.returncode == 0 and f"deleted {2 * 2 * 4} analysis store entries" in r.stdout
    assert json.loads(_ts2("cache", "info", "json=true", env=env).stdout)["analysis_store"]["n_entries"] == 0


def test_a_second_ts2_analyze_in_a_notebook_reuses_the_rest(tmp_path, monkeypatch, caplog):
    import ts2

    monkeypatch.setenv("TS2_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TS2_ANALYSIS_STORE_MAX_MB", "64")
    df = wide_table(5)
    first = ts2.analyze(df, bootstrap=20, chance=4, progress=False)
    df["m4"] = df["m4"] * 2 + 1  # another column: an affine change keeps rank and sep, not its chance key
    with caplog.at_level(logging.INFO, logger="analysis.column_store"):
        second = ts2.analyze(df, bootstrap=20, chance=4, progress=False)
    assert "4 of 5 columns read from the analysis store" in caplog.text
    off = ts2.analyze(df, bootstrap=20, chance=4, progress=False, store=False)
    pd.testing.assert_frame_equal(second.metametrics, off.metametrics)
    assert not first.metametrics.equals(second.metametrics)


@pytest.mark.shared
def test_on_the_release_a_warm_run_writes_the_same_files(tmp_path):
    ts2_dir = shared_path("ts2")
    cache = tmp_path / "cache"
    env = {"TS2_CACHE_DIR": str(cache), "TS2_ANALYSIS_STORE_MAX_MB": "64"}
    scores = ts2_dir / "released" / "scores_subset.csv"
    common = [f"scores={scores}", f"path={ts2_dir}", "subsets=ts2", "bootstrap=100", "progress=false",
              "reference=null"]
    for name, extra in (("off", ["store=false"]), ("cold", []), ("warm", [])):
        r = _ts2("analyze", *common, *extra, f"output_dir={tmp_path / name}", env=env)
        assert r.returncode == 0, r.stderr
    for f in ("metametrics.csv", "per_seg.csv", "ranking.csv", "verdict.csv"):
        ref = (tmp_path / "off" / f).read_bytes()
        assert (tmp_path / "cold" / f).read_bytes() == ref and (tmp_path / "warm" / f).read_bytes() == ref, f
