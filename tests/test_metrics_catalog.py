"""``ts2 score list_metrics=true``: every registered metric with family, role, direction, range, paper."""

from __future__ import annotations

import re

import pytest

from metrics_adapters import METRICS
from metrics_adapters.catalog import describe_metrics, format_catalog
from ts2.cli import main


def test_catalog_reads_the_class_metadata():
    infos = {i.name: i for i in describe_metrics()}
    assert sorted(infos) == METRICS.names()
    assert all(i.error is None for i in infos.values())
    v, p, b = infos["vqascore"], infos["pickscore"], infos["blur"]
    assert (v.family, v.role, v.direction, v.score_range) == ("vqascore", "metric", "higher", (0.0, 1.0))
    assert "arXiv:2404.01291" in v.paper
    assert (p.family, p.score_range) == ("reward", None) and "Pick-a-Pic" in p.paper
    assert (infos["hpsv2"].family, infos["hpsv2"].score_range) == ("reward", (-1.0, 1.0))
    assert b.direction == "lower" and b.family == "quality"
    # family from the sub-package when the class names none; no paper for ts2's own controls
    assert infos["tifa"].family == "qa" and infos["clipscore"].family == "embedding"
    assert infos["random"].family == "controls" and infos["random"].paper is None
    assert (infos["random"].role, infos["blur"].role, infos["shuffled_text"].role) == ("control",) * 3
    assert "Hessel" in infos["clipscore"].paper and "TIFA" in infos["tifa"].paper


def test_role_comes_from_the_class(monkeypatch):
    from metrics_adapters.controls.random import RandomScore

    monkeypatch.setattr(RandomScore, "role", "control", raising=False)
    infos = {i.name: i for i in describe_metrics()}
    assert infos["random"].role == "control" and infos["tifa"].role == "metric"


def test_unimportable_entry_is_listed_as_unavailable(monkeypatch):
    monkeypatch.setitem(METRICS._targets, "zz_broken", "no_such_module_ts2:Nothing")
    infos = {i.name: i for i in describe_metrics()}
    assert "no_such_module_ts2" in infos["zz_broken"].error
    assert re.search(r"^  zz_broken +- +- +- +- +unavailable: ", format_catalog(list(infos.values())), re.MULTILINE)


def test_list_metrics_cli_prints_every_metric(tmp_path, capsys):
    pytest.importorskip("torch")
    assert main(["score", "list_metrics=true", f"output_dir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    for name in METRICS.names():
        assert re.search(rf"^  {name} ", out, re.MULTILINE), name
    assert re.search(r"^  vqascore +vqascore +metric +higher +\[0, 1\] +Lin et al\. 2024", out, re.MULTILINE)
    assert re.search(r"^  pickscore +reward +metric +higher +unbounded +Kirstain", out, re.MULTILINE)
    assert re.search(r"^  blur +quality +control +lower ", out, re.MULTILINE)
    assert "pickscore, random" in out  # the config list follows


@pytest.mark.parametrize("name", ["pickscore", "hpsv2", "imagereward", "vqascore"])
def test_new_metric_class_defaults_match_their_configs(name):
    """get_metric(name) in Python is the metric `metric=name` builds (same fingerprint, same column)."""
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    from metrics_adapters import get_metric

    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("score", overrides=[f"metric={name}"])
    built = instantiate(cfg.metric, _convert_="all")
    assert built.name == name
    assert get_metric(name).fingerprint() == built.fingerprint()
