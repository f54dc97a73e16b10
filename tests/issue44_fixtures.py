"""Small files in the real formats of the hub-only human-judgment sets (issue 44), written for the tests.

Each writer follows the format its loader documents (read from the set's card, loader script or
evaluation code): GenAI-Bench's ``genai_image.json`` + ``genai_skills.json``, T2I-Eval-Bench's
``scores.json`` + ``t2i-eval-bench.json``, HPDv2's ``test.json``, ImageRewardDB's
``metadata-test.parquet`` (and the same records as JSON). Ratings follow a latent quality ``q`` so
that a score CSV ``q + noise`` (``write_scores``) is a metric that agrees with people.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

GENAI_MODELS = ("DALLE_3", "SDXL_Turbo", "DeepFloyd_I_XL_v1", "Midjourney_6", "SDXL_2_1", "SDXL_Base")


def _likert(q: float, rng) -> int:
    return int(np.clip(round(3 + 1.2 * q + rng.normal(scale=0.6)), 1, 5))


def write_genai_bench(folder: Path, n_prompts: int = 8, seed: int = 0) -> dict[str, float]:
    """``genai_image.json`` (prompt index -> {id, prompt, models: {model: [3 ratings]}}) and
    ``genai_skills.json`` (tag -> [int prompt indices]); returns item id -> latent quality."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    data, latent = {}, {}
    for p in range(1, n_prompts + 1):
        key = f"{p:05d}"
        models = {}
        for m in GENAI_MODELS:
            q = float(rng.normal())
            latent[f"{m}/{key}"] = q
            models[m] = [_likert(q, rng) for _ in range(3)]
        data[key] = {"id": key, "prompt": f"prompt number {p} with {p % 3 + 1} red cubes", "models": models}
    (folder / "genai_image.json").write_text(json.dumps(data, indent=1))
    skills = {"attribute": [1, 2, 3, 5], "counting": [2, 4, 6], "basic": [1, 2, 3, 5, 7],
              "advanced": [2, 4, 6, 8], "negation": [8]}
    (folder / "genai_skills.json").write_text(json.dumps(skills))
    return latent


def write_t2i_eval_bench(folder: Path, n: int = 30, seed: int = 1) -> dict[str, float]:
    """``scores.json`` ([{id, overall: {<aspect>: {score, manual_score: [a1, a2, a3, mean]}}}]) and
    ``t2i-eval-bench.json`` ([{id, gt_image, ref_image, image_caption}]), 3 images per caption."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    scores, samples, latent = [], [], {}
    for i in range(n):
        q = float(rng.normal())
        latent[str(i)] = q
        aspects = {}
        for a in ("appearance", "intrinsic", "relationship", "overall"):
            man = [float(np.clip(round(2 + q + rng.normal(scale=0.7)), 0, 4)) for _ in range(3)]
            aspects[a] = {"score": round(2 + q + float(rng.normal(scale=0.8)), 2),
                          "manual_score": [*man, round(float(np.mean(man)), 4)]}
        scores.append({"id": str(i), "overall": aspects})
        samples.append({"id": str(i), "gt_image": f"images/{i}.png", "ref_image": None,
                        "image_caption": f"caption {i // 3}", "structured_info_str": ""})
    (folder / "scores.json").write_text(json.dumps(scores))
    (folder / "t2i-eval-bench.json").write_text(json.dumps(samples))
    return latent


def write_hpdv2(folder: Path, n_prompts: int = 10, per_prompt: int = 4, users: int = 3, seed: int = 2) -> dict:
    """``test.json``: [{prompt, image_path, rank (averaged, 1 = best), raw_annotations: [{rank, user_hash}]}]."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    recs, latent = [], {}
    for p in range(n_prompts):
        paths = [f"{p:03d}_{k}.jpg" for k in range(per_prompt)]
        q = rng.normal(size=per_prompt)
        for path, v in zip(paths, q, strict=True):
            latent[path] = float(v)
        raw = []
        for u in rng.choice(users + 2, size=users, replace=False):
            noisy = q + rng.normal(scale=0.5, size=per_prompt)
            raw.append({"rank": [int(r) for r in (np.argsort(np.argsort(-noisy)) + 1)], "user_hash": f"u{u:02d}"})
        mean_rank = np.mean([r["rank"] for r in raw], axis=0)
        avg = [int(r) for r in (np.argsort(np.argsort(mean_rank, kind="stable")) + 1)]
        recs.append({"prompt": f"hpd prompt {p}", "image_path": paths, "rank": avg, "raw_annotations": raw})
    (folder / "test.json").write_text(json.dumps(recs))
    return latent


def imagereward_records(n_prompts: int = 9, seed: int = 3) -> tuple[list[dict], dict]:
    """ImageRewardDB rows (the card's columns): rank 1 = best within the prompt."""
    rng = np.random.default_rng(seed)
    rows, latent = [], {}
    classes = ("People", "Outdoor Scenes", "Arts")
    for p in range(n_prompts):
        k = int(rng.integers(3, 7))
        q = rng.normal(size=k)
        ranks = np.argsort(np.argsort(-q)) + 1
        for j in range(k):
            path = f"images/test/test_1/{p:04d}-{j}.webp"
            latent[path] = float(q[j])
            rows.append({"image_path": path, "prompt_id": f"{p:06d}-0001", "prompt": f"ir prompt {p}",
                         "classification": classes[p % 3], "image_amount_in_total": k, "rank": int(ranks[j]),
                         "overall_rating": int(np.clip(4 + 2 * q[j], 1, 7)),
                         "image_text_alignment_rating": int(np.clip(4 + 2 * q[j], 1, 7)),
                         "fidelity_rating": int(np.clip(4 + q[j], 1, 7))})
    return rows, latent


def write_imagereward(folder: Path, seed: int = 3) -> dict:
    """``metadata-test.parquet`` (pyarrow) of :func:`imagereward_records`."""
    folder.mkdir(parents=True, exist_ok=True)
    rows, latent = imagereward_records(seed=seed)
    pd.DataFrame(rows).to_parquet(folder / "metadata-test.parquet", index=False)
    return latent


def write_scores(path: Path, latent: dict[str, float], key: str = "item_id", seed: int = 9) -> Path:
    """A score CSV: ``good`` = latent + small noise, ``weak`` = latent + large noise, ``random``."""
    rng = np.random.default_rng(seed)
    ids = list(latent)
    q = np.array([latent[i] for i in ids])
    pd.DataFrame({key: ids, "good": q + rng.normal(scale=0.3, size=len(q)),
                  "weak": q + rng.normal(scale=1.5, size=len(q)), "random": rng.random(len(q))}).to_csv(path, index=False)
    return path


EVALMUSE_CATEGORIES = ("object", "counting", "color", "spatial")


def write_evalmuse(folder: Path, n_prompts: int = 6, per_prompt: int = 5, seed: int = 4) -> dict[str, float]:
    """``train_list.json`` as EvalMuse-40K releases it: a list of image records with ``total_score`` (one 1-5 score per
    rater, 2-3 raters), ``element_score`` a dict literal *in a string*, ``model``, and fields the loader ignores."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    recs, latent = [], {}
    for p in range(n_prompts):
        cats = EVALMUSE_CATEGORIES[: 2 + p % 3]
        elements = [f"thing{p}_{c} ({c})" for c in cats]
        for k in range(per_prompt):
            q = float(rng.normal())
            path = f"images/{p:04d}/gen{k % 3}_{k}.png"
            latent[path] = q
            n_raters = 3 if (p + k) % 4 else 2
            labels = {e: [int(rng.random() < 0.5 + 0.4 * np.tanh(q)) for _ in range(n_raters)] for e in elements}
            recs.append({"prompt": f"evalmuse prompt {p}", "img_path": path, "model": f"gen{k % 3}",
                         "total_score": [_likert(q, rng) for _ in range(n_raters)], "element_score": str(labels),
                         "promt_meaningless": [0] * n_raters, "split_confidence": [1] * n_raters,
                         "attribute_confidence": [1] * n_raters})
    (folder / "train_list.json").write_text(json.dumps(recs, indent=1))
    return latent
