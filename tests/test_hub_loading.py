"""The one model and file loader (metrics_adapters.hub, issue 32 item 5): dtype, revision, one
clear error for a local copy that is not there, one "local file or hub download", one place in
the tree that calls ``from_pretrained`` / ``hf_hub_download``, and the cache fingerprints of the
shipped metric configs kept across the move."""

from __future__ import annotations

import json
import re
from importlib.resources import files
from pathlib import Path

import pytest

from metrics_adapters.hub import ModelUnavailableError, hub_file, load_pretrained, require_model

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"


# -- one place -------------------------------------------------------------------------------------
LOADER_CALLS = re.compile(r"\.from_pretrained\(|hf_hub_download\(|snapshot_download\(|open_clip\.create_model"
                          r"|open_clip\.get_tokenizer\(")


def test_models_and_hub_files_are_loaded_only_in_hub_py():
    """A grep: every transformers ``from_pretrained``, hub download and open_clip build of the
    model packages is in metrics_adapters/hub.py (a second loader would read dtype, revision and
    offline errors its own way again). seg_data's one download is the TS2 *data set*
    (``seg_data.ts2_release.download_ts2``; seg_data imports no model code); analysis loads nothing."""
    hits = {}
    for pkg in ("metrics_adapters", "ts2", "analysis"):
        for f in sorted((REPO / pkg).rglob("*.py")):
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
                if LOADER_CALLS.search(line):
                    hits.setdefault(str(f.relative_to(REPO)), []).append(n)
    assert set(hits) == {"metrics_adapters/hub.py"}, hits
    assert len(hits["metrics_adapters/hub.py"]) >= 4  # processor, model, open_clip (2), download


# -- the transformers loader -------------------------------------------------------------------------
def test_load_pretrained_honours_dtype():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import tiny_models as tm

    path = str(tm.tiny("hf_clip"))
    for dtype, want in ((None, torch.float32), ("bf16", torch.bfloat16), ("float16", torch.float16)):
        net, proc = load_pretrained(transformers.CLIPModel, transformers.CLIPProcessor, path, dtype=dtype)
        assert {p.dtype for p in net.parameters()} == {want}, dtype
        assert not net.training and proc is not None
    with pytest.raises(ValueError, match="expected dtype one of"):
        load_pretrained(transformers.CLIPModel, None, path, dtype="fp8")


def test_embedding_metric_and_detector_load_in_the_run_dtype(tmp_path):
    """The families that used to ignore ``dtype`` (transformers dual encoders, GenEval's OWLv2)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("open_clip")
    import numpy as np
    import tiny_models as tm
    from PIL import Image

    from metrics_adapters import get_metric
    from metrics_adapters.base import ScoreItem
    from metrics_adapters.geneval import OwlDetector

    img = Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 40, 3), dtype=np.uint8))
    items = [ScoreItem("s", "0", "a.png", "a red square")]
    ref = get_metric("clipscore_hf", model=str(tm.tiny("hf_clip")))
    ref.load("cpu")
    m = get_metric("clipscore_hf", model=str(tm.tiny("hf_clip")))
    m.load("cpu", "bf16")
    assert next(m._model.parameters()).dtype == torch.bfloat16
    assert next(ref._model.parameters()).dtype == torch.float32
    # bf16 keeps ~3 significant digits of the cosine (score = 100 * cos, tiny random model)
    np.testing.assert_allclose(m.score_batch(items, [img]), ref.score_batch(items, [img]), atol=1.5)

    det = OwlDetector(model=str(tm.tiny("hf_owlv2")), threshold=0.0)
    det.load("cpu", "bf16")
    assert next(det.model.parameters()).dtype == torch.bfloat16
    out = det.detect([img], [["square"]])  # pixels are cast to the weights' dtype
    assert len(out) == 1 and all(d.label == "square" for d in out[0])


def _spy(monkeypatch, owner, calls: list):
    """Record the keyword arguments of ``owner.from_pretrained`` and call the real one."""
    real = owner.from_pretrained

    def spy(name, *a, **kw):
        calls.append((owner.__name__, str(name), kw.get("revision"), kw.get("dtype")))
        return real(name, *a, **kw)

    monkeypatch.setattr(owner, "from_pretrained", spy)


def test_revision_reaches_every_from_pretrained(monkeypatch):
    """The revision goes to the model and to every tokenizer/processor read from the same
    repository (a local folder ignores it, so the tiny models load); no revision: not passed."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("open_clip")
    import tiny_models as tm

    from metrics_adapters import get_metric
    from metrics_adapters.geneval import OwlDetector

    calls: list = []
    for cls in (transformers.CLIPModel, transformers.AutoTokenizer, transformers.AutoImageProcessor,
                transformers.AutoModelForZeroShotObjectDetection, transformers.AutoProcessor):
        _spy(monkeypatch, cls, calls)
    clip, owl = str(tm.tiny("hf_clip")), str(tm.tiny("hf_owlv2"))
    get_metric("clipscore_hf", model=clip, revision="abc123").load("cpu")
    OwlDetector(model=owl, revision="def456").load("cpu")
    # (AutoProcessor reads its tokenizer and image processor through the Auto classes: same revision)
    assert {(c[0], c[1]) for c in calls} == {(k, clip) for k in ("CLIPModel", "AutoTokenizer", "AutoImageProcessor")} \
        | {(k, owl) for k in ("AutoProcessor", "AutoTokenizer", "AutoImageProcessor",
                              "AutoModelForZeroShotObjectDetection")}
    assert all(c[2] == {clip: "abc123", owl: "def456"}[c[1]] for c in calls), calls
    calls.clear()
    get_metric("clipscore_hf", model=clip).load("cpu")
    assert [c[2] for c in calls] == [None, None, None]


def test_pickscore_processor_revision_is_its_own(monkeypatch):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import tiny_models as tm

    from metrics_adapters import get_metric

    calls: list = []
    for cls in (transformers.CLIPModel, transformers.AutoTokenizer, transformers.AutoImageProcessor):
        _spy(monkeypatch, cls, calls)
    clip = str(tm.tiny("hf_clip"))
    get_metric("pickscore", model=clip, revision="m1", processor=clip, processor_revision="p2").load("cpu")
    assert [(c[0], c[2]) for c in calls] == [("CLIPModel", "m1"), ("AutoTokenizer", "p2"), ("AutoImageProcessor", "p2")]


# -- one clear error for a local copy that is not there ------------------------------------------------
def test_missing_local_folder_is_one_error_naming_the_model_and_the_option(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")

    missing = tmp_path / "not-here"
    with pytest.raises(ModelUnavailableError) as e:
        load_pretrained(transformers.CLIPModel, transformers.CLIPProcessor, str(missing), option="metric.model")
    assert str(e.value) == (f"expected the model '{missing}' to be a local folder or file, found none: point "
                            f"metric.model=DIR at a local copy (or give a hub id, org/name)")
    # relative, home and deeper-than-org/name paths are paths too; an org/name id is a hub id
    for p in ("./not-here", "~/not-here-ts2", "a/b/c"):
        with pytest.raises(ModelUnavailableError, match=f"'{re.escape(p)}' to be a local folder.*key=DIR"):
            require_model(p, option="key")
    assert require_model(str(tmp_path)) == str(tmp_path)


@pytest.mark.parametrize("family", ["detector", "vqa", "chat", "hpsv2", "imagereward"])
def test_every_family_names_its_option_for_a_missing_folder(family, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    missing = str(tmp_path / "gone")
    if family == "detector":
        from metrics_adapters.geneval import OwlDetector

        load, option = OwlDetector(model=missing).load, "metric.detector.model"
    elif family == "vqa":
        from metrics_adapters.qa.vqa import BlipVQA

        load, option = BlipVQA(missing).load, "metric.vqa.model"
    elif family == "chat":
        from metrics_adapters.chat import TransformersChatModel

        m = TransformersChatModel(missing, kind="lm")
        load, option = m.load, m.option
    elif family == "hpsv2":
        pytest.importorskip("open_clip")
        from metrics_adapters import get_metric

        load, option = get_metric("hpsv2", model=missing).load, "metric.model"
    else:
        from metrics_adapters import get_metric

        load, option = get_metric("imagereward", model=missing).load, "metric.model"
    with pytest.raises(ModelUnavailableError, match=f"'{re.escape(missing)}' to be a local folder.*"
                                                    f"point {re.escape(option)}=DIR at a local copy"):
        load("cpu")


# -- one "local file or hub download" ----------------------------------------------------------------
def test_hub_file_local_cases(tmp_path):
    ckpt = tmp_path / "w.pt"
    ckpt.write_bytes(b"x")
    assert hub_file(str(ckpt), "other.pt") == ckpt  # the file itself
    assert hub_file(str(tmp_path), "w.pt") == ckpt  # a file in a folder
    with pytest.raises(FileNotFoundError, match=rf"expected 'm.json' in {re.escape(str(tmp_path))} \(metric.model\)"):
        hub_file(str(tmp_path), "m.json", owner="ir", option="metric.model")
    with pytest.raises(FileNotFoundError, match="ir: expected metric.model to be a folder holding 'w.pt' or a hub id"):
        hub_file(str(ckpt), "w.pt", owner="ir", option="metric.model", file_ok=False)
    with pytest.raises(ModelUnavailableError, match="'/nonexistent/ts2/x' to be a local folder.*metric.model=DIR"):
        hub_file("/nonexistent/ts2/x", "w.pt", option="metric.model")


def test_hub_file_downloads_a_hub_id_with_revision_and_cache(monkeypatch, tmp_path):
    import huggingface_hub

    import metrics_adapters.hub as hub

    checked, asked = [], []
    monkeypatch.setattr(hub, "require_model", lambda *a, **kw: checked.append((a, kw)))

    def download(repo, filename, revision=None, cache_dir=None):
        asked.append((repo, filename, revision, cache_dir))
        return str(tmp_path / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    got = hub_file("org/ckpt", "w.pt", revision="r1", cache_dir="/c", option="metric.model")
    assert got == tmp_path / "w.pt" and asked == [("org/ckpt", "w.pt", "r1", "/c")]
    assert checked == [(("org/ckpt", "r1"), {"option": "metric.model", "local": "DIR", "files": ("w.pt",),
                                             "cache_dir": "/c"})]

    def fail(*a, **kw):
        raise ConnectionError("no route")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fail)
    with pytest.raises(RuntimeError, match=r"hps: could not download 'w.pt' from 'org/ckpt' @ r1: ConnectionError"):
        hub_file("org/ckpt", "w.pt", revision="r1", owner="hps")


def test_uncached_hub_file_offline_is_the_one_line(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelUnavailableError, match="'someorg/no-ckpt' is not in the local Hugging Face cache.*"
                                                    "HF_HUB_OFFLINE is set.*metric.model=DIR"):
        hub_file("someorg/no-ckpt", "w.pt", option="metric.model")


# -- cache fingerprints kept across the move -----------------------------------------------------------
# tests/data/metric_fingerprints.json: the fingerprint hash of every shipped metric config, recorded
# before the loaders moved into hub.py. Changed on purpose since (each named with the key that moved):
# the transformers dual encoders and GenEval's OWLv2 now load their weights in the run's dtype
# (fp16/bf16 on CUDA) instead of fp32 under autocast, which changes scores at those precisions.
BUMPED = {"metric=alignscore": ("version", "2"), "metric=clipscore_hf": ("version", "2"),
          "metric=pickscore": ("version", "2"), "metric=siglip": ("version", "2"),
          "metric=geneval": ("detector.version", 2)}


def _combos() -> list[str]:
    return sorted(json.loads((DATA / "metric_fingerprints.json").read_text()))


def test_fingerprints_of_the_shipped_configs_are_kept():
    """Every config recorded composes to the recorded fingerprint, except the ones in BUMPED, whose
    fingerprint differs by exactly the named key (undo it: the recorded hash again)."""
    pytest.importorskip("hydra")
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    from metrics_adapters.identity import fingerprint_hash

    recorded = json.loads((DATA / "metric_fingerprints.json").read_text())
    metrics = {p.name[:-5] for p in files("conf").joinpath("metric").iterdir() if p.name.endswith(".yaml")}
    assert {k.split()[0].removeprefix("metric=") for k in recorded} <= metrics
    changed = {}
    with initialize_config_module("conf", version_base="1.3"):
        for combo in _combos():
            fp = instantiate(compose("score", overrides=combo.split()).metric).fingerprint()
            if combo in BUMPED:
                key, value = BUMPED[combo]
                node = fp
                *parents, leaf = key.split(".")
                for k in parents:
                    node = node[k]
                assert node[leaf] == value, (combo, key)
                if leaf == "version" and not parents:
                    node[leaf] = "1"
                else:
                    del node[leaf]
            if fingerprint_hash(fp) != recorded[combo]:
                changed[combo] = fingerprint_hash(fp)
    assert not changed, f"cache keys changed (stale caches would be dropped or, worse, reused): {changed}"
