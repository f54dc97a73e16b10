"""`ts2 analyze`: configs, outputs, summary, errors, human hand-over, no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_module
from hydra.utils import instantiate
from omegaconf import OmegaConf

from analysis.pipeline import analyze
from analysis.protocols import PROTOCOLS, Protocol

REPO = Path(__file__).resolve().parents[1]


def _run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ts2", "analyze", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


@pytest.fixture(scope="module")
def scores(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    rows = []
    for s in range(12):
        for lev in range(3):
            for v in "ab"[: 1 + (lev == 1)]:
                for k in range(2):
                    good = 1 - 0.3 * lev + rng.normal(0, 0.1)
                    rows.append({"seg_id": s, "node": f"{lev}{v}" if lev == 1 else str(lev), "file_name": f"{s}_{lev}{v}_{k}",
                                 "good": round(good, 3), "noise": round(rng.random(), 3), "errors": lev + int(rng.random() < 0.2)})
    p = tmp_path_factory.mktemp("scores") / "my_scores.csv"
    pd.DataFrame(rows).to_csv(p, index=False)
    return p


def test_configs_compose_and_instantiate():
    with initialize_config_module(config_module="conf", version_base="1.3"):
        for name in ("paper", "graph"):
            cfg = compose("analyze", overrides=[f"protocol={name}", "scores=x.csv"])
            proto = instantiate(cfg.protocol)
            assert isinstance(proto, Protocol) and proto == PROTOCOLS[name]
        cfg = compose("analyze", overrides=["protocol.ks_pairs=adjacent", "dataset=ts2", "scores=x.csv"])
        assert instantiate(cfg.protocol) == PROTOCOLS["paper"].replace(ks_pairs="adjacent")
        assert cfg.dataset._target_ == "seg_data.ts2_release.load_ts2"
        assert cfg.human is None and cfg.bootstrap == 1000 and cfg.get("dataset") is not None
        assert compose("analyze").get("dataset") is None


def test_analyze_writes_every_output(scores, tmp_path):
    out = tmp_path / "out"
    r = _run(f"scores={scores}", f"output_dir={out}", "bootstrap=200", "lower_is_better=[errors]",
             "compare=[good,noise]", "permutations=500", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for name in ("metametrics.csv", "per_seg.csv", "table.md", "table.tex", "table.csv", "analysis.json",
                 "compare.csv", "ranking.csv", "pairs.csv", "ts2.log"):
        assert (out / name).is_file(), name
    mm = pd.read_csv(out / "metametrics.csv")
    assert list(mm.columns) == ["metric", "protocol", "meta_metric", "subset", "value", "ci_low", "ci_high", "n_segs",
                                "chance", "chance_low", "chance_high", "chance_mc_error", "adjusted"]
    assert mm["chance"].notna().all() and mm[mm.meta_metric != "delta"]["adjusted"].notna().all()  # chance=10 default
    assert set(mm.meta_metric) == {"rank", "sep", "delta", "kendall", "pair_acc"} and set(mm.subset) == {"Avg"}
    ps = pd.read_csv(out / "per_seg.csv", dtype={"seg_id": str})
    assert list(ps.columns) == ["metric", "protocol", "meta_metric", "seg_id", "subset", "value"]
    # the CLI's numbers are the library's
    ref = analyze(scores, protocols=["paper"], bootstrap=0, lower_is_better=["errors"])
    cell = mm[(mm.metric == "errors") & (mm.meta_metric == "rank")].iloc[0]
    assert cell.value == pytest.approx(ref.value("errors", "rank")) and cell.value > 0.5  # direction honoured
    assert cell.ci_low < cell.value < cell.ci_high
    # friendly summary on stdout: one line per metric, the comparison, where the files went
    assert "protocol=paper: Avg over 12 SEGs" in r.stdout and "chance level" in r.stdout
    assert all(m in r.stdout for m in ("good", "noise", "errors"))
    assert "good - noise" in r.stdout and f"wrote {out}" in r.stdout
    assert "| rank | Avg |" in (out / "table.md").read_text()
    assert not list(tmp_path.glob("outputs"))  # nothing written outside output_dir


def test_analyze_protocols_and_bootstrap_off(scores, tmp_path):
    out = tmp_path / "both"
    r = _run(f"scores={scores}", f"output_dir={out}", "bootstrap=0", "chance=0", "protocols=[paper,graph]",
             "ranking.enabled=false")
    assert r.returncode == 0, r.stderr
    mm = pd.read_csv(out / "metametrics.csv")
    assert set(mm.protocol) == {"paper", "graph"} and mm["ci_low"].isna().all()
    assert not (out / "ranking.csv").exists()
    text = (out / "metametrics.csv").read_text().splitlines()[1]
    assert text.endswith(",,12,,,,,")  # empty CI and chance cells, not "nan"


def test_bad_input_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("seg_id,node,clip\n0,0,0.9\n0,1,high\n")
    r = _run(f"scores={bad}", f"output_dir={tmp_path / 'o'}")
    assert r.returncode == 2
    assert "row 3, column 'clip': expected a number, got 'high'" in r.stderr
    r = _run(f"output_dir={tmp_path / 'o2'}")
    assert r.returncode == 2 and "expected scores=FILE" in r.stderr
    r = _run(f"scores={tmp_path / 'none.csv'}", f"output_dir={tmp_path / 'o3'}")
    assert r.returncode == 2 and "expected a score table at" in r.stderr


def test_human_is_handed_over(monkeypatch):
    import ts2.commands.analyze as cmd
    import ts2.commands.analyze_human as hm

    seen = {}
    monkeypatch.setattr(hm, "human_main", lambda cfg: seen.setdefault("human", cfg.human) and 7)
    assert cmd.main(OmegaConf.create({"human": "h.json", "scores": None})) == 7
    assert seen == {"human": "h.json"}


def test_analyze_does_not_import_torch(scores, tmp_path):
    code = ("import sys, ts2.cli; rc = ts2.cli.main(['analyze', 'scores=%s', 'output_dir=%s', 'bootstrap=10', "
            "'permutations=50']); bad = [m for m in ('torch', 'metrics_adapters') if m in sys.modules]; "
            "print(bad); sys.exit(3 if bad else rc)" % (scores, tmp_path / "o"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
