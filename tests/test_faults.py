"""Fault injection on ``ts2 score``: real SIGKILLs, two processes on one cache, unwritable or full disks.

Issue 4's tests cover one kill between batches (test_engine_cli) and two threads of raw cache
writes (test_engine); these add what they leave out:

* ``kill -9`` at three points of a two-metric run (just after start, in the middle, near the
  end), each followed by a restart into the same output folder: the final ``scores.csv`` is
  byte-identical to an uninterrupted run's, with no duplicate or missing row, and SQLite's own
  ``PRAGMA integrity_check`` passes on the cache right after the kill;
* three ``ts2 score`` processes on one cache at the same time: the two shards of a
  data-parallel run (``shard=0/2``, ``shard=1/2``) and a full run writing the same scores;
* an output folder that cannot be written (below a file, a read-only mount, a full disk, a disk
  that fills while the scores are written): a clear error naming the folder, exit code 2, and
  no model loaded -- or, when the disk fills at the very end, nothing lost.

The metrics are cheap: the ``random`` control and ``tiny_models.PixelMeanMetric`` (pixel mean,
with a per-batch ``delay`` that is not part of its fingerprint, so slowed and fast runs share
cache entries).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

pytest.importorskip("torch")

import tiny_models as tm  # noqa: E402

from metrics_adapters import Metric  # noqa: E402
from ts2.cli import main  # noqa: E402

TESTS_DIR = Path(__file__).parent
FAKE = "+metrics.fake={_target_:tiny_models.PixelMeanMetric,name:fake,delay:%s}"
N_IMAGES = 24


class LoadMarkerMetric(Metric):
    """Writes ``marker`` when its model would be loaded: proves a run stopped before that."""

    needs_images = False

    def __init__(self, name: str = "marker", marker: str = "") -> None:
        super().__init__(name)
        self.marker = marker

    def load(self, device="cpu", dtype=None):
        Path(self.marker).write_text("loaded")

    def score_batch(self, items, images):
        return [0.5] * len(items)


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")])}


def _score_args(ds: Path, cache_dir: Path, out: Path, delay: float = 0.0, batch_size: int = 2) -> list[str]:
    return [f"path={ds}", "metric=random", FAKE % delay, f"batch_size={batch_size}", "num_workers=0", "device=cpu",
            "progress=false", f"cache_dir={cache_dir}", f"output_dir={out}"]


def _score(*args: str) -> int:
    return main(["score", *args])


def _rows_by_name(db: Path) -> dict[str, int]:
    """Cached scores per metric name (0 while the file or its tables do not exist yet)."""
    if not db.exists():
        return {}
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            rows = con.execute("SELECT f.name, COUNT(s.key) FROM fingerprints f LEFT JOIN scores s ON s.key = f.key "
                               "GROUP BY f.key").fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError:  # tables not created yet, or the file is being created
        return {}
    return dict(rows)


def _integrity(db: Path) -> str:
    con = sqlite3.connect(db, timeout=10)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def _run_json(out: Path) -> dict:
    return {m["name"]: m for m in json.loads((out / "run.json").read_text())["metrics"]}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """4 SEGs x 3 nodes x 2 random 40-px PNGs = 24 images."""
    return tm.make_dataset(tmp_path_factory.mktemp("faults") / "d", n_segs=4, nodes=("0", "1", "2"), per_node=2)


@pytest.fixture(scope="module")
def clean_csv(dataset, tmp_path_factory) -> str:
    """``scores.csv`` of an uninterrupted run with a fresh cache."""
    root = tmp_path_factory.mktemp("clean")
    assert _score(*_score_args(dataset, root / "cache", root / "out")) == 0
    text = (root / "out" / "scores.csv").read_text()
    df = pd.read_csv(root / "out" / "scores.csv")
    assert len(df) == N_IMAGES and df[["random", "fake"]].notna().all().all()
    return text


# -- SIGKILL at three points -----------------------------------------------------------------------
# (point, predicate on the cached-rows-per-metric dict that triggers the kill)
KILL_POINTS = {
    # as soon as the cache file exists: possibly mid schema creation, before any score
    "start": lambda rows, db: db.exists(),
    # random (the first metric) done, fake half way
    "middle": lambda rows, db: rows.get("fake", 0) >= N_IMAGES // 2,
    # three batches before the end of the last metric, shortly before the outputs are written
    "end": lambda rows, db: rows.get("fake", 0) >= N_IMAGES - 6,
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_sigkill_then_restart_gives_the_uninterrupted_result(point, dataset, clean_csv, tmp_path):
    cache_dir, out = tmp_path / "cache", tmp_path / "out"
    db = cache_dir / "scores.sqlite"
    # 12 batches of 2 at 0.12 s: ~1.5 s of scoring in which to land the kill (polled every 10 ms)
    cmd = [sys.executable, "-m", "ts2", "score", *_score_args(dataset, cache_dir, out, delay=0.12)]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    trigger = KILL_POINTS[point]
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline and not trigger(_rows_by_name(db), db):
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL, f"the run ended ({proc.returncode}) before the kill: {err.decode()[-2000:]}"
    assert not (out / "scores.csv").exists(), "outputs are written only at the end"
    at_kill = _rows_by_name(db)
    if db.exists():
        assert _integrity(db) == "ok"
    if point != "start":
        assert at_kill["random"] == N_IMAGES and N_IMAGES // 2 <= at_kill["fake"] < N_IMAGES

    # the same command again (without the delay, which is not a setting), into the same folder
    assert _score(*_score_args(dataset, cache_dir, out)) == 0
    runs = _run_json(out)
    for name in ("random", "fake"):
        done = at_kill.get(name, 0)
        assert (runs[name]["cache_hits"], runs[name]["n_scored"]) == (done, N_IMAGES - done), name
    assert (out / "scores.csv").read_text() == clean_csv
    df = pd.read_csv(out / "scores.csv")
    assert len(df) == N_IMAGES and not df["file_name"].duplicated().any() and df.notna().all().all()
    assert _rows_by_name(db) == {"random": N_IMAGES, "fake": N_IMAGES}
    assert _integrity(db) == "ok"
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")], "no half-written file left behind"


# -- two processes, one cache ------------------------------------------------------------------------
def _expected_random(file_name: str, seed: int = 0) -> float:
    # the control's documented rule, written out again: first 53 bits of sha256("seed\0file_name")
    h = hashlib.sha256(f"{seed}\0{file_name}".encode()).digest()
    return (int.from_bytes(h[:8], "big") >> 11) / 2.0 ** 53


def _expected_pixmean(path: str, prompt: str) -> float:
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.float64).mean() / 255.0 + len(prompt) / 1000


def test_shards_and_an_overlapping_run_share_one_cache(dataset, tmp_path):
    """Three ``ts2 score`` processes at once on one cache, one commit per image each: the two
    shards of a data-parallel run (``shard=0/2``, ``shard=1/2``) and a full run overlapping both.
    All finish, every score is right and stored exactly once, SQLite never reports a lock."""
    n = N_IMAGES
    cache_dir = tmp_path / "cache"
    runs = {"shard0": ["shard=0/2"], "shard1": ["shard=1/2"], "full": []}
    procs = {}
    for name, extra in runs.items():
        cmd = [sys.executable, "-m", "ts2", "score", *_score_args(dataset, cache_dir, tmp_path / name, delay=0.05,
                                                                     batch_size=1), *extra]
        procs[name] = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for name, p in procs.items():
        _, err = p.communicate(timeout=240)
        err = err.decode()
        assert p.returncode == 0, (name, err[-3000:])
        assert "database is locked" not in err and "OperationalError" not in err, (name, err[-3000:])

    full = pd.read_csv(tmp_path / "full" / "scores.csv")
    assert len(full) == n and not full["file_name"].duplicated().any()
    np.testing.assert_allclose(full["random"], [_expected_random(f) for f in full["file_name"]], rtol=0, atol=1e-15)
    np.testing.assert_allclose(full["fake"], [_expected_pixmean(p, q) for p, q in zip(full["image_path"], full["prompt"], strict=True)],
                               rtol=1e-12)
    # the shards split the images (disjoint, complete) and agree with the full run on each one
    parts = [pd.read_csv(tmp_path / f"shard{k}" / "scores.csv") for k in range(2)]
    assert all(len(part) > 0 for part in parts)
    merged = pd.concat(parts).set_index("file_name")
    assert not merged.index.duplicated().any() and set(merged.index) == set(full["file_name"])
    pd.testing.assert_frame_equal(merged.loc[full["file_name"]].reset_index()[list(full.columns)], full)

    db = cache_dir / "scores.sqlite"
    assert _rows_by_name(db) == {"random": n, "fake": n}
    assert _integrity(db) == "ok"
    recs = {name: _run_json(tmp_path / name) for name in runs}
    for name, r in recs.items():
        for m in ("random", "fake"):
            assert r[m]["cache_hits"] + r[m]["n_scored"] == r[m]["n_items"] and r[m]["n_failed"] == 0, (name, m)
    # They really ran at the same time: some images of the slow metric were computed by the full
    # run AND a shard, each before the other's commit was there to find (one after the other, the
    # three runs would compute each image exactly once).
    assert sum(r["fake"]["n_scored"] for r in recs.values()) > n, {k: r["fake"]["n_scored"] for k, r in recs.items()}


# -- unwritable and full output folders -------------------------------------------------------------
def _marker_args(ds: Path, tmp_path: Path, out: Path) -> list[str]:
    marker = tmp_path / "model-was-loaded"
    return [f"path={ds}", "~metric", "+metrics.m={_target_:test_faults.LoadMarkerMetric,name:m,marker:" + str(marker) + "}",
            f"cache_dir={tmp_path / 'cache'}", f"output_dir={out}", "device=cpu", "progress=false"]


def _assert_refused(rc: int, err: str, out: Path, tmp_path: Path, why: str) -> None:
    assert rc == 2, err[-2000:]
    assert "output_dir" in err and str(out) in err and why in err, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert not (tmp_path / "model-was-loaded").exists(), "the model was loaded before the output folder was checked"
    assert not (tmp_path / "cache" / "scores.sqlite").exists(), "nothing should have been scored"


def test_output_dir_below_a_file_is_refused_before_loading(dataset, tmp_path, capfd):
    (tmp_path / "a-file").write_text("x")
    out = tmp_path / "a-file" / "run"
    rc = _score(*_marker_args(dataset, tmp_path, out))
    _assert_refused(rc, capfd.readouterr().err, out, tmp_path, "Not a directory")


@pytest.fixture
def tmpfs(tmp_path):
    """A 256 KiB tmpfs (needs root and mount rights: skipped elsewhere)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}); "
                    "the monkeypatched full-disk tests still run")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt: Path, leave: int) -> None:
    """Fill the tmpfs until fewer than ``leave`` bytes are free."""
    with open(mnt / "ballast", "wb") as f:
        block = b"\0" * 4096
        try:
            while os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize > leave:
                f.write(block)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC


def test_read_only_output_dir_is_refused_before_loading(dataset, tmp_path, tmpfs, capfd):
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    out = tmpfs / "run"
    rc = _score(*_marker_args(dataset, tmp_path, out))
    _assert_refused(rc, capfd.readouterr().err, out, tmp_path, "Read-only file system")


@pytest.mark.parametrize("leave", [0, 64 * 1024], ids=["full", "nearly-full"])
def test_full_disk_is_refused_before_loading(dataset, tmp_path, tmpfs, capfd, leave):
    """A full disk fails the write probe; a nearly full one (room for Hydra's few files and the log,
    not for the outputs) fails the free-space check: both before the model is loaded."""
    _fill(tmpfs, leave)
    out = tmpfs / "run"
    rc = _score(*_marker_args(dataset, tmp_path, out))
    err = capfd.readouterr().err
    _assert_refused(rc, err, out, tmp_path, "No space left on device" if leave == 0 else "free")


def test_little_free_space_is_refused_before_loading(dataset, tmp_path, capfd, monkeypatch):
    """The same check without a tmpfs: the disk reports 10 KiB free."""
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    real = shutil.disk_usage
    out = tmp_path / "run"
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10 << 30, (10 << 30) - 10240, 10240)
                        if str(p).startswith(str(out)) else real(p))
    rc = _score(*_marker_args(dataset, tmp_path, out))
    _assert_refused(rc, capfd.readouterr().err, out, tmp_path, "free")


def test_room_for_a_big_scores_csv_is_checked_before_loading(tmp_path, capfd, monkeypatch):
    """1.1 MiB free passes the command-line check (1 MiB) but not the room a 2000-image
    scores.csv needs, which is known once the dataset is read -- still before the model."""
    import shutil
    from collections import namedtuple

    from seg_data.synthetic import make_synthetic

    ds = make_synthetic(tmp_path / "syn", n_segs=160, seed=0, images=False)
    usage = namedtuple("usage", "total used free")
    real = shutil.disk_usage
    out = tmp_path / "run"
    free = (1 << 20) + 100 * 1024
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10 << 30, (10 << 30) - free, free)
                        if str(p).startswith(str(out)) else real(p))
    rc = _score(*_marker_args(ds, tmp_path, out))
    err = capfd.readouterr().err
    _assert_refused(rc, err, out, tmp_path, "1124 KiB free")
    assert "scoring" not in err  # refused by the handler after reading the dataset, before the cache/model
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10 << 30, 0, 2 << 20) if str(p).startswith(str(out))
                        else real(p))
    assert _score(*_marker_args(ds, tmp_path, out)) == 0  # 2 MiB is enough
    assert len(pd.read_csv(out / "scores.csv")) > 2000


def test_disk_full_while_writing_outputs_loses_nothing(dataset, tmp_path, capfd, monkeypatch):
    """ENOSPC on the final write: a clear error, no half-written file, and the rerun (after space
    was freed) takes every score from the cache."""
    import metrics_adapters.engine as engine

    real_replace = os.replace

    def no_space(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))

    monkeypatch.setattr(engine.os, "replace", no_space)
    cache_dir, out = tmp_path / "cache", tmp_path / "out"
    rc = _score(*_score_args(dataset, cache_dir, out))
    err = capfd.readouterr().err
    assert rc == 2, err[-2000:]
    assert "No space left on device" in err and "scores.csv" in err and "cache" in err, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert not (out / "scores.csv").exists()
    # A failed run's folder holding only Hydra's own files is removed (ts2/cli.py); where it stays,
    # no temporary file may be left in it.
    left = [p.name for p in out.iterdir()] if out.exists() else []
    assert not [n for n in left if n.endswith(".tmp")], f"the temporary file must be removed, found {left}"
    assert _rows_by_name(cache_dir / "scores.sqlite") == {"random": N_IMAGES, "fake": N_IMAGES}

    monkeypatch.setattr(engine.os, "replace", real_replace)
    assert _score(*_score_args(dataset, cache_dir, out)) == 0
    runs = _run_json(out)
    assert [(runs[m]["cache_hits"], runs[m]["n_scored"]) for m in ("random", "fake")] == [(N_IMAGES, 0)] * 2
