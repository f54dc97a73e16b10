"""The light install (`pip install -e .`, no torch) and the one-line answers of a missing extra or
an offline model.

Marked ``light``: .ci/run also runs these in a fresh venv with only the base install, where
``import torch`` fails; here, torch and the model stack are blocked in a subprocess instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.light

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "torchvision", "open_clip", "transformers", "sentence_transformers", "skimage", "timm")

# Run ts2's CLI with the model stack unimportable, as on the light install.
_BLOCKED_RUN = '''
import json, sys
BLOCKED = set(json.loads(sys.argv[1]))
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
import ts2.cli
rc = ts2.cli.main(json.loads(sys.argv[2]))
print("IMPORTED", sorted(BLOCKED & set(sys.modules)))
sys.exit(rc)
'''


def _run_blocked(args: list[str], blocked=HEAVY, env=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _BLOCKED_RUN, json.dumps(list(blocked)), json.dumps(args)],
                          capture_output=True, text=True, timeout=600, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def _error_lines(stderr: str) -> list[str]:
    """stderr without the logging lines ([time][logger][LEVEL]) and progress bars."""
    return [ln for ln in stderr.splitlines() if ln.strip() and not re.match(r"^\[\d{4}-", ln) and "img/s" not in ln
            and "%|" not in ln]


def _dist(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower().replace("_", "-")


def test_the_extras_table_matches_pyproject_and_no_extra_repackages_weights():
    from metrics_adapters.extras import MODULE_EXTRAS

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = {k: {_dist(r) for r in v} for k, v in project["optional-dependencies"].items()}
    for module, (dist, extra) in MODULE_EXTRAS.items():
        assert dist.lower().replace("_", "-") in extras[extra], (module, dist, extra)
    base = {_dist(r) for r in project["dependencies"]}
    assert not base & {"torch", "torchvision", "open-clip-torch", "transformers", "scikit-image", "sentence-transformers"}
    for name, reqs in extras.items():
        assert not [r for r in reqs if "pypi-part" in r or r == "aait"], name


def test_blur_and_shapes_score_without_torch_and_a_model_metric_names_its_extra(tmp_path):
    out = tmp_path / "light"
    r = _run_blocked(["score", "dataset=mini", "limit=8", "metric=blur", "+metric@metrics.shapes=geneval_shapes",
                      "progress=false", f"output_dir={out}"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "IMPORTED []" in r.stdout
    scores = pd.read_csv(out / "scores.csv")
    assert len(scores) == 8 and scores["blur"].between(0, 1).all() and scores["blur"].nunique() > 1
    assert scores["geneval_shapes"].notna().all()

    r = _run_blocked(["score", "dataset=mini", "limit=5", "metric=clipscore", f"output_dir={tmp_path / 'clip'}"])
    assert r.returncode == 2
    assert _error_lines(r.stderr) == ['ts2 score: metric clipscore needs open_clip, which is not installed: '
                                      'pip install "ts2[models]"'], r.stderr[-3000:]
    r = _run_blocked(["score", "dataset=mini", "limit=5", "metric=siglip", f"output_dir={tmp_path / 'sig'}"])
    # A metric with hub weights names the extra before it looks for the weights (offline here).
    assert _error_lines(r.stderr) == ['ts2 score: metric siglip needs torch, which is not installed: '
                                      'pip install "ts2[models]"'], r.stderr[-3000:]


def test_missing_extra_is_only_for_modules_of_an_extra():
    from metrics_adapters.extras import MissingExtraError, missing_extra

    e = missing_extra(ModuleNotFoundError("No module named 'torch.nn'", name="torch.nn"), "metric x")
    assert isinstance(e, MissingExtraError) and e.name == "torch"
    assert str(e) == 'metric x needs torch, which is not installed: pip install "ts2[models]"'
    assert str(missing_extra(ModuleNotFoundError("x", name="pyiqa"), "metric iqa")).endswith('"ts2[iqa]"')
    assert missing_extra(ModuleNotFoundError("No module named 'mypkg'", name="mypkg"), "metric x") is None
    assert missing_extra(ImportError("cannot import name 'x'", name="torch"), "metric x") is None
    assert missing_extra(ValueError("torch"), "metric x") is None


# -- offline: one line naming the model and the key, before the model stack is imported ---------------
def _metric(overrides: list[str]):
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    with initialize_config_module("conf", version_base="1.3"):
        cfg = compose("score", overrides=overrides)
    return instantiate(cfg.metric, _convert_="all")


@pytest.mark.parametrize(("overrides", "expected"), [
    (["metric=clipscore_hf"], [("openai/clip-vit-large-patch14", "model")]),
    (["metric=siglip"], [("google/siglip-base-patch16-224", "model")]),
    (["metric=pickscore"], [("yuvalkirstain/PickScore_v1", "model"), ("laion/CLIP-ViT-H-14-laion2B-s32B-b79K", "processor")]),
    (["metric=hpsv2"], [("xswu/HPSv2", "model")]),
    (["metric=imagereward"], [("THUDM/ImageReward", "model"), ("google-bert/bert-base-uncased", "tokenizer")]),
    (["metric=tifa"], [("Salesforce/blip-vqa-base", "vqa.model")]),
    (["metric=vqascore"], [("Salesforce/instructblip-flan-t5-xl", "vqa.model")]),
    (["metric=vlm_judge"], [("llava-hf/llava-1.5-7b-hf", "backend.model")]),
    (["metric=geneval"], [("google/owlv2-base-patch16-ensemble", "detector")]),
    (["metric=blur"], []),
    (["metric=geneval_shapes"], []),
    (["metric=random"], []),
])
def test_every_model_family_declares_its_hub_models(overrides, expected):
    assert [(m.repo, m.key) for m in _metric(overrides).hub_models()] == expected


def test_open_clip_weights_are_found_without_importing_open_clip():
    import importlib.util

    if importlib.util.find_spec("open_clip") is None:
        pytest.skip("open_clip is not installed (the models extra)")
    code = ("import sys\nfrom metrics_adapters.embedding.clipscore import open_clip_hub_file\n"
            "print(open_clip_hub_file('ViT-L-14', 'openai'), open_clip_hub_file('ViT-B-32', 'laion2b_s34b_b79k'),"
            " open_clip_hub_file('ViT-L-14', 'no-such-tag'), 'open_clip' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.stdout.strip() == ("('timm/vit_large_patch14_clip_224.openai', None) "
                                "('laion/CLIP-ViT-B-32-laion2B-s34B-b79K', None) None False"), r.stderr
    m = _metric(["metric=shuffled_text"])
    assert [(h.repo, h.key, h.local) for h in m.hub_models()] == [
        ("timm/vit_large_patch14_clip_224.openai", "inner.pretrained", "DIR/open_clip_model.safetensors")]


def test_open_clip_table_agrees_with_open_clip_itself():
    open_clip = pytest.importorskip("open_clip")
    from open_clip.pretrained import get_pretrained_cfg

    from metrics_adapters.embedding.clipscore import open_clip_hub_file

    pairs = open_clip.list_pretrained()
    assert len(pairs) > 50
    for arch, tag in pairs:
        hub = get_pretrained_cfg(arch, tag).get("hf_hub") or None
        expected = None if hub is None else (os.path.split(hub)[0], os.path.split(hub)[1] or None)
        assert open_clip_hub_file(arch, tag) == expected, (arch, tag)


def test_the_message_names_the_key_where_the_metric_sits():
    from metrics_adapters.hub import ModelUnavailableError, require_models

    with pytest.raises(ModelUnavailableError, match=r"'google/siglip-base-patch16-224'.*HF_HUB_OFFLINE is set.*"
                                                    r"point ts2 at it: metrics\.sig\.model=DIR$"):
        require_models(_metric(["metric=siglip"]).hub_models(), "metrics.sig")
    m = _metric(["metric=geneval"])
    with pytest.raises(ModelUnavailableError, match=r"metric\.detector=\{_target_:metrics_adapters\.geneval\."
                                                    r"detectors\.OwlDetector,model:DIR\}$"):
        require_models(m.hub_models())


@pytest.mark.parametrize(("offline", "why"), [("1", "HF_HUB_OFFLINE is set"), ("0", "the hub cannot be reached")])
def test_offline_default_score_is_one_line_before_the_model_stack(tmp_path, offline, why):
    import importlib.util

    if importlib.util.find_spec("open_clip") is None:
        pytest.skip("open_clip is not installed (the models extra): clipscore answers with the extra instead")
    # The hub blocked: a closed local port as the endpoint. Nothing of the model stack is blocked,
    # yet none of it may be imported before the answer (open_clip alone takes seconds).
    r = _run_blocked(["score", "dataset=mini", "limit=5", f"output_dir={tmp_path / 'o'}"], blocked=(),
                     env={"HF_HUB_OFFLINE": offline, "HF_ENDPOINT": "http://127.0.0.1:9",
                          "HF_HOME": str(tmp_path / "hf")})
    assert r.returncode == 2
    lines = _error_lines(r.stderr)
    assert len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith("ts2 score: model 'timm/vit_large_patch14_clip_224.openai' is not in the local "
                               "Hugging Face cache") and why in lines[0]
    assert lines[0].endswith("point ts2 at it: metric.pretrained=DIR/open_clip_model.safetensors")
    code = ("import sys, ts2.cli\nrc = ts2.cli.main(['score', 'dataset=mini', 'limit=5', 'output_dir=%s'])\n"
            "print(sorted({'torch', 'open_clip', 'transformers'} & set(sys.modules)))\nsys.exit(rc)" % (tmp_path / "p"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": offline,
                            "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")})
    assert r.returncode == 2 and r.stdout.strip().splitlines()[-1] == "[]", (r.stdout, r.stderr[-2000:])
