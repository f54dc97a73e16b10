"""Issue 47: one config compose per command. precheck composes the config before Hydra makes any folder; Hydra then
runs with that config instead of composing it twice more (once for ``hydra.mode``, once to run). The config it runs
with must be the one Hydra would have composed."""

from __future__ import annotations

import pytest
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from omegaconf import OmegaConf

from ts2.cli import _compose_once, main
from ts2.config_check import precheck, split_args

MINI = "tests/data/mini_run_scores.csv"


@pytest.mark.parametrize("config, args", [
    ("analyze", ["scores=x.csv", "bootstrap=0", "protocol=graph", "protocol.tie_method=min", "seed=3"]),
    ("analyze", ["scores=x.csv", "dataset=mini", "ranking.alpha=0.1", "output_dir=out/a"]),
    ("run", ["metric=random", "bootstrap=0"]),
    ("report", ["results=[a,b]", "chance=0"]),
    ("data", ["action=info", "dataset=mini", "json=true"]),
    ("cache", ["action=info"]),
])
def test_the_config_handed_over_is_the_one_hydra_composes(config, args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    checked = precheck("ts2", config, args)
    hydra = Hydra.create_main_hydra2(task_name="cli", config_search_path=create_config_search_path("pkg://conf"))
    try:
        _compare(hydra, config, args, checked)
    finally:
        GlobalHydra.instance().clear()


def _compare(hydra, config, args, checked) -> None:
    plain = split_args(args)[1]
    # what Hydra composes without ts2 (Hydra.run's call: the overrides with hydra.mode=RUN appended)
    theirs = hydra.compose_config(config, plain + ["hydra.mode=RUN"], run_mode=RunMode.RUN)
    with _compose_once(checked, config, plain, multirun=False):
        assert hydra.get_mode(config, plain) is None
        ours = hydra.compose_config(config, plain + ["hydra.mode=RUN"], run_mode=RunMode.RUN)
        assert ours is checked
        again = hydra.compose_config(config, plain + ["hydra.mode=RUN"], run_mode=RunMode.RUN)  # only once
        assert again is not checked
    assert OmegaConf.to_container(ours, resolve=False) == OmegaConf.to_container(theirs, resolve=False)
    assert Hydra.compose_config is not None and "compose_once" not in Hydra.compose_config.__qualname__


def test_a_command_composes_its_config_once(tmp_path, monkeypatch):
    calls = []
    original = ConfigLoaderImpl.load_configuration

    def counting(self, *a, **kw):
        calls.append(kw.get("config_name", a[0] if a else None))
        return original(self, *a, **kw)

    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counting)
    out = tmp_path / "out"
    rc = main(["analyze", f"scores={MINI}", "bootstrap=0", "chance=0", "progress=false", f"output_dir={out}"])
    assert rc == 0 and (out / "metametrics.csv").is_file()
    assert calls == ["analyze"]
    saved = OmegaConf.load(out / ".hydra" / "hydra.yaml")
    assert saved.hydra.mode == "RUN" and "hydra.mode=RUN" in saved.hydra.overrides.hydra
    assert saved.hydra.job.name == "cli"
    assert list(OmegaConf.load(out / ".hydra" / "overrides.yaml")) == [
        f"scores={MINI}", "bootstrap=0", "chance=0", "progress=false", f"output_dir={out}"]


def test_a_sweep_still_composes_each_job(tmp_path, monkeypatch):
    calls = []
    original = ConfigLoaderImpl.load_configuration

    def counting(self, *a, **kw):
        calls.append(kw.get("run_mode", None))
        return original(self, *a, **kw)

    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counting)
    rc = main(["analyze", f"scores={MINI}", "bootstrap=0", "chance=0", "progress=false", "seed=0,1",
               f"output_dir={tmp_path / 'sweep'}", "-m"])
    assert rc == 0 and (tmp_path / "sweep" / "1" / "metametrics.csv").is_file()
    assert calls.count(RunMode.MULTIRUN) >= 1 and len(calls) >= 3  # precheck, the sweep, one per job
