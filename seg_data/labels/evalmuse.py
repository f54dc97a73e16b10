"""EvalMuse-40K's label file (``train_list.json``), read into :class:`~.records.LabelRecord`.

The format, as the dataset's own scripts read it (``process/process_train.py`` of the EvalMuse
repository; dataset ``DY-Evalab/EvalMuse`` on the Hugging Face hub): a JSON list with one object
per image::

    {"prompt": "two cats on a red sofa",
     "img_path": "images/0001/sdxl_0.png",
     "total_score": [4, 5, 3],                      # one overall 1-5 score per rater
     "element_score": "{'cats (animal)': [1, 1, 0], 'two (counting)': [0, 0, 1], ...}",
     "promt_meaningless": [0, 0, 0], "split_confidence": [...], "attribute_confidence": [...], ...}

``element_score`` is a Python-literal dict *in a string* (the scripts ``ast.literal_eval`` it);
an already-parsed dict is taken too. Each element key is ``"words (category)"``; each value is
the raters' 0/1 labels. Other fields are kept out of the record. The same records feed the SEG
builder (:mod:`.build`, element labels) and the human-judgment view (``total_score``).
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

from .records import LabelFormatError, LabelRecord, check_labels, check_relative_image, element_category

__all__ = ["read_evalmuse", "download_evalmuse", "HF_REPO_ID", "LABEL_FILE"]

HF_REPO_ID = "DY-Evalab/EvalMuse"
LABEL_FILE = "train_list.json"
REQUIRED = ("prompt", "img_path", "element_score")


def _element_dict(raw: object, where: str) -> dict:
    if isinstance(raw, str):
        try:
            raw = ast.literal_eval(raw)  # literals only: never evaluates code
        except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError) as e:
            raise LabelFormatError(f"{where}: expected 'element_score' to be a dict literal, got {raw!r:.80} "
                                   f"({type(e).__name__})") from e
    if not isinstance(raw, dict):
        raise LabelFormatError(f"{where}: expected 'element_score' to be a dict of element -> labels, "
                               f"got {type(raw).__name__}")
    if not raw:
        raise LabelFormatError(f"{where}: expected at least one element in 'element_score', got an empty dict")
    return raw


def _overall(raw: object, where: str) -> tuple[float, ...]:
    if raw is None:
        return ()
    seq = raw if isinstance(raw, list) else [raw]
    out = []
    for v in seq:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise LabelFormatError(f"{where}: expected 'total_score' to be numbers (one per rater), got {v!r}")
        out.append(float(v))
    return tuple(out)


def _record(i: int, rec: object, source: str) -> LabelRecord:
    where = f"{source}: record {i}"
    if not isinstance(rec, dict):
        raise LabelFormatError(f"{where}: expected an object, got {type(rec).__name__}")
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        raise LabelFormatError(f"{where}: expected field {missing[0]!r}, got fields {sorted(map(str, rec))}")
    image = check_relative_image(rec["img_path"], where)
    where = f"{where} (img_path {image!r})"
    prompt = rec["prompt"]
    if not isinstance(prompt, str) or not prompt.strip():
        raise LabelFormatError(f"{where}: expected a prompt (text), got {prompt!r:.80}")
    elements, categories = {}, {}
    for key, values in _element_dict(rec["element_score"], where).items():
        if not isinstance(key, str) or not key.strip():
            raise LabelFormatError(f"{where}: expected element names as text, got {key!r:.60}")
        elements[key] = check_labels(values, where, key)
        categories[key] = element_category(key)[1]
    gen = rec.get("model", rec.get("gen_model"))
    return LabelRecord(prompt=prompt, image=image, elements=elements, categories=categories,
                       overall=_overall(rec.get("total_score"), where),
                       generator=gen if isinstance(gen, str) and gen else None, where=where)


def read_evalmuse(path: str | Path) -> list[LabelRecord]:
    """Read and validate an EvalMuse ``train_list.json``.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    LabelFormatError
        Not JSON, not a list, or a record without ``prompt``/``img_path``/``element_score``, with
        an empty element dict, labels other than 0/1, or an ``img_path`` seen before; the record
        (its index and image) is named.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"expected an EvalMuse label file ({LABEL_FILE}) at {p}, found none")
    try:
        with p.open(encoding="utf-8") as f:
            data = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise LabelFormatError(f"{p}: expected EvalMuse's JSON list of image records, got unreadable JSON ({e})") from e
    if not isinstance(data, list):
        raise LabelFormatError(f"{p}: expected a JSON list of image records, got {type(data).__name__}")
    out: list[LabelRecord] = []
    seen: dict[str, int] = {}
    for i, rec in enumerate(data):
        r = _record(i, rec, str(p))
        if r.image in seen:
            raise LabelFormatError(f"{r.where}: expected each image once, got it again (first at record {seen[r.image]})")
        seen[r.image] = i
        out.append(r)
    return out


def download_evalmuse(revision: str | None = None, cache_dir: str | Path | None = None) -> Path:
    """Fetch ``train_list.json`` of ``DY-Evalab/EvalMuse`` from the Hugging Face hub (once, cached).

    The images are separate archives on the hub; unpack them and pass their folder as ``images``.

    Raises
    ------
    RuntimeError
        When the hub cannot be reached (offline): says to pass ``labels=FILE`` with a local copy.
    """
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo_id=HF_REPO_ID, filename=LABEL_FILE, repo_type="dataset", revision=revision,
                                    cache_dir=None if cache_dir is None else str(cache_dir)))
    except Exception as e:  # network errors come in many classes; say what to do instead
        raise RuntimeError(f"could not download {LABEL_FILE} of {HF_REPO_ID} from the Hugging Face hub "
                           f"({type(e).__name__}: {e}); pass labels=FILE with a local copy of it") from e
