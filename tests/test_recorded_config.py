"""A results folder is data (issue 42): nothing recorded in a ``run.json`` is instantiated or
imported by ``ts2 explore``; only the datasets of the ``dataset`` config group, with plain
arguments, are rebuilt from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ts2.cli import main

pytestmark = pytest.mark.light

META = ("id,target_prompt,file_name,image_source,rank\n"
        "0,a red cube,images/000-00.jpg,SD,0\n0,a red cube,images/000-01.jpg,SD,1\n"
        "1,two cats,images/001-00.jpg,SD,0\n1,two cats,images/001-01.jpg,SD,1\n")
SCORES = ("seg_id,node,file_name,clip\n0,0,images/000-00.jpg,0.9\n0,1,images/000-01.jpg,0.2\n"
          "1,0,images/001-00.jpg,0.8\n1,1,images/001-01.jpg,0.4\n")


def _results(tmp_path: Path, dataset) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "scores.csv").write_text(SCORES)
    (run / "run.json").write_text(json.dumps({"format": "ts2-score-run/1", "config": {"dataset": dataset}}))
    return run


def _payloads(victim: Path, release: Path) -> dict[str, object]:
    opener = {"_target_": "builtins.open", "file": str(victim), "mode": "w"}
    return {
        "nested in a known loader's argument": {"_target_": "seg_data.ts2_release.load_ts2", "path": opener},
        "an unknown loader": opener,
        "a seg_data function that is no loader": {"_target_": "seg_data.result_sets.atomic_write_text",
                                                  "path": str(victim), "text": ""},
        "an unknown argument": {"_target_": "seg_data.ts2_release.load_ts2", "path": str(release),
                                "_recursive_": True, "revision": None},
        "an interpolation": {"_target_": "seg_data.ts2_release.load_ts2", "path": "${oc.env:HOME}"},
        "a list argument": {"_target_": "seg_data.loaders.load_path", "path": [opener]},
    }


@pytest.mark.parametrize("case", list(_payloads(Path("v"), Path("r"))))
def test_explore_runs_nothing_a_results_folder_names(tmp_path, capsys, case):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    release = tmp_path / "release"
    release.mkdir()
    (release / "metadata.csv").write_text(META)
    run = _results(tmp_path, _payloads(victim, release)[case])
    rc = main(["explore", f"results={run}", f"out={tmp_path / 'e.html'}", "images=false"])
    err = capsys.readouterr().err
    assert rc == 2 and victim.read_text() == "precious"
    assert "a results folder is data" in err or "expected plain values" in err
    assert "Traceback" not in err and not (tmp_path / "e.html").exists()


def test_a_known_recorded_dataset_is_rebuilt(tmp_path, capsys):
    release = tmp_path / "release"
    release.mkdir()
    (release / "metadata.csv").write_text(META)
    run = _results(tmp_path, {"_target_": "seg_data.ts2_release.load_ts2", "path": str(release), "revision": None})
    rc = main(["explore", f"results={run}", f"out={tmp_path / 'e.html'}", "images=false"])
    assert rc == 0, capsys.readouterr().err
    assert "two cats" in (tmp_path / "e.html").read_text()  # the prompts came from the rebuilt dataset


def test_recorded_image_roots_are_not_honoured(tmp_path, capsys):
    release = tmp_path / "release"
    release.mkdir()
    (release / "metadata.csv").write_text(META)
    run = tmp_path / "run"
    run.mkdir()
    (run / "scores.csv").write_text(SCORES)
    (run / "run.json").write_text(json.dumps({"config": {"path": str(release), "image_roots": ["/"]}}))
    assert main(["explore", f"results={run}", f"out={tmp_path / 'e.html'}", "images=false"]) == 0
    assert "recorded image_roots are not used" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["scores.csv", "explorer.html", "new.html"])
def test_explore_out_never_writes_into_a_result_set(tmp_path, capsys, name):
    """Issue 42 (losses): out= into a folder of a complete run is refused, nothing there changes."""
    release = tmp_path / "release"
    release.mkdir()
    (release / "metadata.csv").write_text(META)
    (tmp_path / "s.csv").write_text(SCORES)
    run = tmp_path / "run"  # a complete result set, as ts2 analyze writes it
    assert main(["analyze", f"scores={tmp_path / 's.csv'}", f"path={release}", f"output_dir={run}", "bootstrap=0",
                 "chance=0"]) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    rc = main(["explore", f"results={run}", f"out={run / name}", "images=false"])
    err = capsys.readouterr().err
    assert rc == 2 and "output clashes with an input" in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
