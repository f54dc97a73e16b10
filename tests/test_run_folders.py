"""Where a command reads and writes (issue 42): relative inputs are read from the folder the
command ran from, also under ``hydra.job.chdir=true``; a 300-character SEG id gives bounded
figure file names, not ENAMETOOLONG."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from ts2.cli import main

pytestmark = pytest.mark.light


def _scores(path, seg_ids=("a", "b", "c")):
    rng = random.Random(0)
    rows = [{"seg_id": sid, "node": n, "file_name": f"{sid[:8]}_{n}_{k}.png", "clip": rng.random()}
            for sid in seg_ids for n in ("0", "1", "2") for k in range(2)]
    pd.DataFrame(rows).to_csv(path, index=False)


def test_relative_inputs_under_hydra_job_chdir(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _scores(tmp_path / "s.csv")
    out = tmp_path / "out"
    rc = main(["analyze", "scores=s.csv", f"output_dir={out}", "hydra.job.chdir=true", "bootstrap=0", "chance=0"])
    assert rc == 0, capsys.readouterr().err
    assert (out / "metametrics.csv").is_file()


def test_a_300_character_seg_id_reports(tmp_path, capsys):
    long = "s" * 300
    _scores(tmp_path / "s.csv", (long, "b", "c"))
    assert main(["analyze", f"scores={tmp_path / 's.csv'}", f"output_dir={tmp_path / 'a'}", "bootstrap=0",
                 "chance=0"]) == 0
    assert main(["report", f"results={tmp_path / 'a'}", f"output_dir={tmp_path / 'r'}"]) == 0, capsys.readouterr().err
    names = [p.name for p in (tmp_path / "r" / "figures").iterdir()]
    assert names and max(len(n) for n in names) < 120
