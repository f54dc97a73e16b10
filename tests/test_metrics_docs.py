"""The worked example of docs/metrics.md (one class + one YAML) really runs, through `ts2 score`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import tiny_models as tm  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def _build_tiny_blip(out: Path) -> Path:
    from transformers import BlipConfig, BlipForImageTextRetrieval, BlipImageProcessor

    tok = tm._bert_tokenizer(64)
    cfg = BlipConfig(
        text_config=dict(vocab_size=tok.vocab_size, hidden_size=32, encoder_hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=64,
                         pad_token_id=tok.pad_token_id, bos_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        projection_dim=16, image_text_hidden_size=16)
    torch.manual_seed(0)
    BlipForImageTextRetrieval(cfg).eval().save_pretrained(out)
    tok.save_pretrained(out)
    BlipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(out)
    return out


@pytest.fixture
def example(tmp_path, monkeypatch):
    """The doc's class as package my_metrics, its YAML in a config folder of its own."""
    code = next(b for b in _blocks("python") if "class BLIPITMScore" in b)
    conf = next(b for b in _blocks("yaml") if "my_metrics.blip_itm.BLIPITMScore" in b)
    pkg = tmp_path / "src" / "my_metrics"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "blip_itm.py").write_text(code)
    (tmp_path / "my_conf" / "metric").mkdir(parents=True)
    (tmp_path / "my_conf" / "metric" / "blip_itm.yaml").write_text(conf)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    yield tmp_path
    sys.modules.pop("my_metrics.blip_itm", None)
    sys.modules.pop("my_metrics", None)


def test_worked_example_scores_through_ts2_score(example, tmp_path):
    from transformers import AutoImageProcessor, AutoTokenizer, BlipForImageTextRetrieval

    from ts2.cli import main

    model = _build_tiny_blip(tmp_path / "blip")
    ds = tm.make_dataset(tmp_path / "d", n_segs=2, nodes=("0", "1"), per_node=2)
    out = tmp_path / "out"
    rc = main(["score", f"path={ds}", "metric=blip_itm", f"metric.model={model}", "device=cpu", "progress=false",
               "batch_size=3", f"hydra.searchpath=[file://{example / 'my_conf'}]", f"output_dir={out}",
               f"cache_dir={tmp_path / 'c'}"])
    assert rc == 0
    df = pd.read_csv(out / "scores.csv")
    assert list(df.columns)[-1] == "blip_itm" and len(df) == 8 and df.blip_itm.between(0, 1).all()

    # independent: the model's ITM head on the whole set at once
    from PIL import Image

    net = BlipForImageTextRetrieval.from_pretrained(model).eval()
    tok, proc = AutoTokenizer.from_pretrained(model), AutoImageProcessor.from_pretrained(model)
    text = tok(list(df.prompt), padding=True, truncation=True, max_length=35, return_tensors="pt")
    with torch.no_grad():
        logits = net(input_ids=text["input_ids"], attention_mask=text["attention_mask"],
                     pixel_values=proc(images=[Image.open(p).convert("RGB") for p in df.image_path],
                                       return_tensors="pt")["pixel_values"]).itm_score
    np.testing.assert_allclose(df.blip_itm, logits.softmax(-1)[:, 1].numpy(), atol=1e-6)


def test_worked_example_registers_for_python(example):
    import metrics_adapters
    from metrics_adapters.registry import METRICS

    try:
        metrics_adapters.register_metric("blip_itm", "my_metrics.blip_itm:BLIPITMScore")
        m = metrics_adapters.get_metric("blip_itm", model="some/model")
        assert type(m).__name__ == "BLIPITMScore" and m.name == "blip_itm"
        assert m.fingerprint()["model"] == "some/model"
    finally:
        METRICS._targets.pop("blip_itm", None)  # leave the process-wide registry as it was
