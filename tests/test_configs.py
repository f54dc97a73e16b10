"""Every file of every config group composes, under every primary config it can appear in, and
every ``_target_`` in the result resolves and accepts the keys it is given (no weights loaded).

Nothing is listed by hand: the primary configs are the YAML files at the top of ``conf/``, the
groups its folders; where a group can appear is found by composing (a group another file pulls
in, e.g. ``judge_backend`` under ``metric=vlm_judge``, is explored from there). A group that no
defaults list selects (``experiment``, ``geneval_parser``) is added with ``+GROUP=OPTION`` and
must compose under at least one primary config. So a new ``conf/qa_lm/x.yaml`` is tested at once.
"""

from __future__ import annotations

import inspect
from importlib.resources import files

import pytest
from omegaconf import DictConfig, ListConfig, OmegaConf

CONF = files("conf")
PRIMARY = sorted(p.name[:-5] for p in CONF.iterdir() if p.name.endswith(".yaml"))


def _groups(root=CONF, prefix="") -> dict[str, list[str]]:
    out = {}
    for p in root.iterdir():
        if p.is_dir() and not p.name.startswith(("_", ".")):
            name = prefix + p.name
            opts = sorted(q.name[:-5] for q in p.iterdir() if q.name.endswith(".yaml"))
            if opts:
                out[name] = opts
            out.update(_groups(p, name + "/"))
    return out


GROUPS = _groups()


@pytest.fixture(scope="module", autouse=True)
def _hydra():
    from hydra import initialize_config_module

    with initialize_config_module("conf", version_base="1.3"):
        yield


def _compose(primary: str, overrides: list[str]):
    from hydra import compose

    return compose(primary, overrides=overrides, return_hydra_config=True)


def _check_targets(node, where: str) -> int:
    """Resolve every ``_target_`` under ``node`` and bind its keys to the signature; returns the count."""
    from hydra._internal.utils import _locate

    n = 0
    if isinstance(node, DictConfig):
        if "_target_" in node:
            target = _locate(str(node._target_))
            kwargs = {k: None for k in node.keys() if not str(k).startswith("_")}
            sig = inspect.signature(target)
            try:
                sig.bind_partial(**kwargs)
            except TypeError as e:
                raise AssertionError(f"{where}: {node._target_} does not take {sorted(kwargs)}: {e}") from e
            n += 1
        for k in node.keys():
            if k != "hydra":
                n += _check_targets(node._get_node(k), f"{where}.{k}")
    elif isinstance(node, ListConfig):
        for i, item in enumerate(node):
            n += _check_targets(item, f"{where}[{i}]")
    return n


def _explore(primary: str) -> set[tuple[str, str]]:
    """Compose ``primary`` with every option of every group it (or a chosen option) pulls in."""
    seen: set[tuple[str, str]] = set()
    queue: list[list[str]] = [["results=x"] if primary == "report" else []]
    while queue:
        base = queue.pop()
        cfg = _compose(primary, base)
        _check_targets(cfg, f"{primary} {base}")
        # One key per group: the group's own (metric=...) when the config has it, else the first
        # package it is placed at (judge_backend@metric.backend=...).
        keys: dict[str, str] = {}
        for key in sorted(cfg.hydra.runtime.choices.keys(), key=lambda k: "@" in k):
            keys.setdefault(key.split("@")[0], key)
        for group, key in keys.items():
            if group.startswith("hydra/") or group not in GROUPS:
                continue
            for option in GROUPS[group]:
                if (group, option) in seen:
                    continue
                seen.add((group, option))
                queue.append([*base, f"{key}={option}"])
    return seen


@pytest.fixture(scope="module")
def explored() -> dict[str, set[tuple[str, str]]]:
    return {p: _explore(p) for p in PRIMARY}


@pytest.mark.slow
def test_every_group_file_composes_and_its_targets_resolve(explored):
    reached = set().union(*explored.values())
    assert ("metric", "tifa") in explored["score"] and ("metric", "tifa") in explored["run"]
    assert ("judge_backend", "openai") in explored["score"]  # found through metric=vlm_judge
    assert ("analysis", "default") in explored["analyze"] and ("report", "default") in explored["run"]
    unreached = {(g, o) for g, opts in GROUPS.items() if not g.startswith("hydra") for o in opts} - reached
    for group, option in sorted(unreached):
        composed = []
        for primary in PRIMARY:
            try:
                cfg = _compose(primary, (["results=x"] if primary == "report" else []) + [f"+{group}={option}"])
            except Exception:  # noqa: BLE001 - not every group fits every command
                continue
            _check_targets(cfg, f"{primary} +{group}={option}")
            composed.append(primary)
            break
        assert composed, f"conf/{group}/{option}.yaml composes under no primary config"


def test_a_broken_target_is_caught():
    bad = OmegaConf.create({"m": {"_target_": "metrics_adapters.controls.random.RandomScore", "nmae": "x"}})
    with pytest.raises(AssertionError, match="nmae"):
        _check_targets(bad, "test")


def test_dsg_inherits_tifa_and_overrides_only_what_differs():
    tifa = OmegaConf.to_container(_compose("score", ["metric=tifa"]).metric, resolve=False)
    dsg = OmegaConf.to_container(_compose("score", ["metric=dsg"]).metric, resolve=False)
    differ = {k for k in tifa if tifa[k] != dsg.get(k)}
    assert differ == {"_target_", "name"}  # the rest (vqa, matcher, generation, ...) is TIFA's
    assert dsg["_target_"] == "metrics_adapters.qa.dsg.DSGScore"
    assert dsg["matcher"]["model"] == "sentence-transformers/all-mpnet-base-v2"


@pytest.mark.parametrize("primary", ["analyze", "report", "run", "reproduce"])
def test_shared_analysis_settings_come_from_one_file(primary):
    import yaml

    shared = yaml.safe_load(CONF.joinpath("analysis", "default.yaml").read_text())
    own = CONF.joinpath(f"{primary}.yaml").read_text()
    cfg = _compose(primary, ["results=x"] if primary == "report" else [])
    report_own = CONF.joinpath("report", "default.yaml").read_text()
    for key in shared:  # every analysis key: stated once, in conf/analysis/default.yaml
        assert f"\n{key}:" not in own, f"{primary}.yaml restates {key}"
        assert f"\n{key}:" not in report_own, f"report/default.yaml restates {key}"
        assert cfg[key] == shared[key]


def test_run_takes_the_report_keys():
    cfg = _compose("run", ["figures=[pareto]", "labels={random: Random}", "pareto=[rank]", "human=h.csv"])
    assert list(cfg.figures) == ["pareto"] and cfg.labels.random == "Random" and cfg.human == "h.csv"
    assert list(cfg.protocols) == ["paper", "graph"] and cfg.figure_protocol == "graph"  # run shows the graph one
