"""Hydra launcher experiments (conf/experiment/): composed, instantiated, and a real joblib sweep."""

from __future__ import annotations

import subprocess
import sys
from importlib.resources import files

import pandas as pd
import pytest
from hydra import compose, initialize_config_module
from hydra.utils import instantiate
from omegaconf import OmegaConf

EXPERIMENTS = sorted(p.name.removesuffix(".yaml") for p in files("conf").joinpath("experiment").iterdir()
                     if p.name.endswith(".yaml"))


def _compose(name: str, command: str = "report", extra=()):
    with initialize_config_module(config_module="conf", version_base="1.3"):
        base = ["results=x"] if command == "report" else []
        return compose(command, overrides=[f"+experiment={name}", *base, *extra], return_hydra_config=True)


def test_every_experiment_composes_and_its_launcher_instantiates(monkeypatch):
    monkeypatch.delenv("TS2_SLURM_PARTITION", raising=False)
    monkeypatch.delenv("TS2_SLURM_ACCOUNT", raising=False)
    assert {"local_parallel", "slurm_sweep", "slurm_shards"} <= set(EXPERIMENTS)
    for name in EXPERIMENTS:
        cfg = _compose(name)
        launcher = instantiate(cfg.hydra.launcher)
        assert type(launcher).__name__ in {"JoblibLauncher", "SlurmLauncher"}, name


def test_slurm_sweep_settings(monkeypatch):
    monkeypatch.setenv("TS2_SLURM_PARTITION", "a100")
    monkeypatch.delenv("TS2_SLURM_ACCOUNT", raising=False)
    cfg = _compose("slurm_sweep", "reproduce", ["hydra.launcher.timeout_min=60"])
    lc = cfg.hydra.launcher
    assert lc._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert (lc.partition, lc.account, lc.gpus_per_node, lc.timeout_min) == ("a100", None, 1, 60)
    assert cfg.device == "cuda"
    # The settings become this sbatch header (submitit's own translation; no cluster needed).
    slurm = pytest.importorskip("submitit.slurm.slurm")
    text = slurm._make_sbatch_string(command="ts2 score", folder="/tmp/%j", job_name=lc.name.replace("${hydra.job.name}", "x"),
                                     partition=lc.partition, time=lc.timeout_min, nodes=lc.nodes,
                                     ntasks_per_node=lc.tasks_per_node, cpus_per_task=lc.cpus_per_task,
                                     gpus_per_node=lc.gpus_per_node, mem=f"{lc.mem_gb}GB", setup=list(lc.setup),
                                     array_parallelism=lc.array_parallelism, signal_delay_s=lc.signal_delay_s)
    for line in ("#SBATCH --partition=a100", "#SBATCH --gpus-per-node=1", "#SBATCH --time=60", "#SBATCH --mem=32GB",
                 "#SBATCH --cpus-per-task=8"):
        assert line in text


def test_slurm_shards_sweeps_four_disjoint_shards():
    from seg_data.shards import parse_shard

    cfg = _compose("slurm_shards", "report")
    shards = [parse_shard(s) for s in cfg.hydra.sweeper.params.shard.split(",")]
    assert [(s.index, s.count) for s in shards] == [(0, 4), (1, 4), (2, 4), (3, 4)]
    assert cfg.hydra.launcher.partition  # inherits slurm_sweep's cluster settings
    assert OmegaConf.select(cfg, "hydra.launcher.gpus_per_node") == 1


def test_local_parallel_settings():
    lc = _compose("local_parallel").hydra.launcher
    assert lc._target_ == "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
    assert (lc.n_jobs, lc.backend) == (2, "loky")


def test_joblib_two_job_sweep_then_merged_by_report(tmp_path):
    from test_report import make_scores, write_run

    a = write_run(tmp_path / "a", make_scores(n_segs=5, seed=1)[["seg_id", "node", "file_name", "good"]], analyse=False)
    b = write_run(tmp_path / "b", make_scores(n_segs=5, seed=2)[["seg_id", "node", "file_name", "good"]], analyse=False)
    sweep = tmp_path / "sweep"
    r = subprocess.run([sys.executable, "-m", "ts2", "report", "-m", "+experiment=local_parallel",
                        f"results=[{a}],[{b}]", f"output_dir={sweep}", "bootstrap=0", "protocols=[graph]",
                        "figures=[]"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Joblib" in r.stderr  # the sweep really went through the joblib launcher
    for job in ("0", "1"):
        assert (sweep / job / "report.html").is_file()
        assert (sweep / job / ".hydra" / "overrides.yaml").is_file()
    # each job analysed its own input
    v = [pd.read_csv(sweep / j / "metametrics.csv").query("meta_metric == 'rank' and subset == 'Avg'")["value"].item()
         for j in ("0", "1")]
    from analysis.pipeline import analyze

    for val, seed in zip(v, (1, 2), strict=True):
        ref = analyze(make_scores(n_segs=5, seed=seed)[["seg_id", "node", "file_name", "good"]], protocols=["graph"],
                      bootstrap=0)
        assert val == pytest.approx(ref.value("good", "rank"))
    # ts2 report collects the sweep folder into one table with both runs
    from analysis.report.result_dirs import build_report

    out = build_report([sweep], tmp_path / "all", bootstrap=0, protocols=["graph"], figures=[])
    table = out.tables[0].read_text()
    assert "good[sweep/0]" in table and "good[sweep/1]" in table


def test_experiments_compose_with_the_score_command_and_its_sweep_keys():
    # The experiments are meant for `ts2 score -m`: every key they sweep must exist in score.yaml
    # (Hydra refuses unknown keys), e.g. slurm_shards sweeps `shard`.
    swept = {}
    for name in EXPERIMENTS:
        cfg = _compose(name, "score")
        params = OmegaConf.select(cfg, "hydra.sweeper.params") or {}
        for key, values in params.items():
            first = str(values).split(",")[0]
            composed = _compose(name, "score", [f"{key}={first}"])
            assert str(OmegaConf.select(composed, key)) == first  # the swept key took the value
            swept.setdefault(name, []).append(key)
    # Not vacuous: the sharded sweep really sweeps `shard` (the loop above checked at least that).
    assert "shard" in swept.get("slurm_shards", []), swept
