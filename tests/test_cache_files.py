"""Caches fail closed (issue 42): a score cache that is not SQLite, damaged, or of a newer schema
stops ts2 score in one line naming the file and the fix; ``ts2 cache clear`` always works (it sets
such a file aside, deleting nothing); an older layout is migrated; a cache folder that is a file
gets the same message from every command."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from ts2.cli import main

pytestmark = pytest.mark.light


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from seg_data.synthetic import make_synthetic

    root = tmp_path_factory.mktemp("cachefiles")
    ds = make_synthetic(root / "d", n_segs=1, seed=2)
    good = root / "good"
    assert main(["score", f"path={ds}", "metric=random", "progress=false", f"cache_dir={good}",
                 f"output_dir={root / 'o'}"]) == 0
    return ds, good


def _newer(p):
    con = sqlite3.connect(p)
    with con:
        con.execute("UPDATE meta SET v='99' WHERE k='schema'")
    con.close()


def _damaged(p):
    b = bytearray(p.read_bytes())
    b[4096:8192] = b"\xff" * 4096
    p.write_bytes(bytes(b))


def _not_sqlite(p):
    p.write_text("garbage, not a database")


@pytest.mark.parametrize("spoil, why", [(_newer, "got 99 (written by a newer ts2)"), (_damaged, "could not read it"),
                                        (_not_sqlite, "could not read it: file is not a database")])
def test_an_unreadable_cache_stops_in_one_line_and_clear_sets_it_aside(data, tmp_path, capsys, spoil, why):
    ds, good = data
    cache = tmp_path / "cache"
    shutil.copytree(good, cache)
    spoil(cache / "scores.sqlite")
    before = (cache / "scores.sqlite").read_bytes()
    args = ["score", f"path={ds}", "metric=random", "progress=false", f"cache_dir={cache}"]
    assert main([*args, f"output_dir={tmp_path / 'o1'}"]) == 2
    err = capsys.readouterr().err
    assert why in err and "ts2 cache clear` sets it aside" in err and str(cache / "scores.sqlite") in err
    assert "Traceback" not in err and not (tmp_path / "o1" / "scores.csv").exists()
    assert main(["cache", "clear", f"cache_dir={cache}"]) == 0
    out = capsys.readouterr().out
    assert "set aside the unreadable score cache" in out
    aside = [p for p in cache.iterdir() if ".unreadable-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and aside[0].read_bytes() == before  # nothing deleted
    assert main([*args, f"output_dir={tmp_path / 'o2'}"]) == 0  # a new cache


def test_an_older_layout_is_migrated_and_served(data, tmp_path, capsys):
    ds, good = data
    cache = tmp_path / "cache"
    shutil.copytree(good, cache)
    con = sqlite3.connect(cache / "scores.sqlite")
    with con:
        con.execute("ALTER TABLE scores DROP COLUMN truncated")  # the layout before truncation was recorded
    con.close()
    capsys.readouterr()
    assert main(["score", f"path={ds}", "metric=random", "progress=false", f"cache_dir={cache}",
                 f"output_dir={tmp_path / 'o'}"]) == 0
    out = capsys.readouterr().out
    assert "0 scored" in out  # every score served from the migrated cache


def test_a_cache_folder_that_is_a_file_gets_one_message_everywhere(data, tmp_path, capsys, monkeypatch):
    ds, _ = data
    f = tmp_path / "a_file"
    f.write_text("x")
    monkeypatch.setenv("TS2_CACHE_DIR", str(f))
    msg = f"expected a folder for ts2's caches at {f}"
    assert main(["data", "info"]) == 2  # the mini set lives in the cache folder
    assert msg in capsys.readouterr().err
    assert main(["score", f"path={ds}", "metric=random", "progress=false", f"output_dir={tmp_path / 'o'}"]) == 0
    assert msg in capsys.readouterr().err  # the score cache: warned, the run goes on uncached
    assert main(["cache", "info"]) == 2
    assert msg in capsys.readouterr().err
