"""Metric registry and metric configs: one catalogue, lazy, consistent with conf/metric/*.yaml."""

from __future__ import annotations

import sys
from importlib.resources import files

import pytest
import yaml
from hydra import compose, initialize_config_module
from hydra.utils import get_class, instantiate

import metrics_adapters
from metrics_adapters import METRICS, Metric, UnknownMetricError, get_metric, list_metrics
from metrics_adapters.registry import Registry

METRIC_CONFIGS = sorted(p.name.removesuffix(".yaml") for p in files("conf").joinpath("metric").iterdir()
                        if p.name.endswith(".yaml"))
# The embedding metrics' configs (this module's adapters); other adapters test their own settings.
EMBEDDING = ["clipscore", "clipscore_b32", "clipscore_hf", "alignscore", "siglip"]


def test_registry_rejects_duplicates_and_bad_targets():
    r = Registry("metric")
    r.register("a", "pkg.mod:A")
    with pytest.raises(ValueError, match="already registered"):
        r.register("a", "pkg.other:B")
    with pytest.raises(ValueError, match="metric 'b': expected 'module:attr', got 'no_colon_here'"):
        r.register("b", "no_colon_here")
    with pytest.raises(ValueError, match="already registered"):
        metrics_adapters.register_metric("clipscore", "x.y:Z")


def test_unknown_name_lists_valid_ones():
    with pytest.raises(UnknownMetricError) as e:
        get_metric("clipscroe")
    msg = str(e.value)
    assert "unknown metric 'clipscroe'" in msg
    for name in list_metrics():
        assert name in msg


def test_registry_import_is_lazy():
    # Importing the package (and listing) must not pull torch or the model libraries in.
    import subprocess

    code = ("import sys, metrics_adapters as m; m.list_metrics(); "
            "print(sorted(x for x in ('torch', 'open_clip', 'transformers') if x in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_registry_entry_has_a_config_with_the_same_class():
    for name in METRICS.names():
        assert name in METRIC_CONFIGS, f"registry entry {name!r} has no conf/metric/{name}.yaml"
        with initialize_config_module(config_module="conf", version_base="1.3"):
            cfg = compose("score", overrides=[f"metric={name}"])
        assert get_class(cfg.metric._target_) is metrics_adapters.get_metric_class(name)
        assert cfg.metric.name == name


@pytest.mark.parametrize("config", METRIC_CONFIGS)
def test_every_metric_config_composes_to_a_registered_class(config):
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("score", overrides=[f"metric={config}"])
    cls = get_class(cfg.metric._target_)
    assert cls in {metrics_adapters.get_metric_class(n) for n in list_metrics()}, \
        f"conf/metric/{config}.yaml: {cfg.metric._target_} is not in metrics_adapters.registry"
    assert cfg.metric.name == config  # the column is named after the config


@pytest.mark.parametrize("config", EMBEDDING)
def test_embedding_configs_instantiate_without_loading(config):
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("score", overrides=[f"metric={config}"])
    m = instantiate(cfg.metric)
    assert isinstance(m, Metric)
    assert m.name == config  # the column is named after the config
    assert get_class(cfg.metric._target_) in {metrics_adapters.get_metric_class(n) for n in list_metrics()}
    # Instantiating never loads a model: the fingerprint is available at once.
    assert len(m.fingerprint_hash()) == 32


@pytest.mark.parametrize("name", [n for n in EMBEDDING if n in METRICS])
def test_class_defaults_match_the_config(name):
    """get_metric(name) in Python gives the same metric (same fingerprint) as `metric=name` on the CLI."""
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("score", overrides=[f"metric={name}"])
    assert get_metric(name).fingerprint() == instantiate(cfg.metric).fingerprint()


def test_variant_config_overrides_only_what_changes():
    raw = yaml.safe_load(files("conf").joinpath("metric/clipscore_b32.yaml").read_text())
    assert raw["defaults"][0] == "clipscore" and set(raw) == {"defaults", "name", "arch"}
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("score", overrides=["metric=clipscore_b32"])
    assert (cfg.metric.arch, cfg.metric.pretrained, cfg.metric.name) == ("ViT-B-32", "openai", "clipscore_b32")


def test_extra_metrics_compose_as_a_dict():
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("score", overrides=["metric=clipscore_hf", "+metric@metrics.sig=siglip",
                                          "metrics.sig.name=sig2"])
    from ts2.metric_configs import metrics_from_config as build_metrics

    ms = build_metrics(cfg)
    assert [type(m).__name__ for m in ms] == ["HFCLIPScore", "SigLIPScore"]
    assert [m.name for m in ms] == ["clipscore_hf", "sig2"]


def test_fingerprints_track_settings_not_names():
    a = get_metric("clipscore_hf", model="m1")
    assert a.fingerprint() == get_metric("clipscore_hf", model="m1", name="other").fingerprint()
    for kw in [dict(model="m2"), dict(model="m1", revision="abc"), dict(model="m1", w=2.5),
               dict(model="m1", template="A photo depicts {prompt}")]:
        assert get_metric("clipscore_hf", **kw).fingerprint_hash() != a.fingerprint_hash(), kw
    # same settings, different class: different fingerprint
    assert get_metric("alignscore", model="m1").fingerprint_hash() != a.fingerprint_hash()


def test_bad_settings_fail_at_construction():
    with pytest.raises(ValueError, match=r"expected a template containing '\{prompt\}'"):
        get_metric("clipscore_hf", template="a photo")
    with pytest.raises(ValueError, match="fields other than"):
        get_metric("clipscore_hf", template="{prompt} {other}")
    with pytest.raises(ValueError, match="positive weight"):
        get_metric("clipscore", w=0)


def test_metadata_on_classes():
    for name in [n for n in EMBEDDING if n in METRICS]:
        cls = metrics_adapters.get_metric_class(name)
        assert cls.higher_is_better is True and cls.needs_images is True
    assert get_metric("clipscore", w=2.5).score_range == (0.0, 2.5)
    assert get_metric("siglip").score_range == (0.0, 1.0)
    assert "w" not in get_metric("siglip").settings()
