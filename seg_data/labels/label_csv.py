"""A plain CSV of element labels, one row per rating: the format any labelled set converts into.

Columns (header required, any order; extra columns are refused so a typo never drops data)::

    prompt,image,element,rater,label[,category][,generator]

``label`` is 1 (the element is depicted) or 0; ``rater`` names who gave it (one rating per image,
element and rater); ``category`` is the element's kind (``counting``, ``spatial``, ...; empty
for none); ``generator`` the model that made the image. RichHF-18K's misaligned tokens convert as
one element per prompt token (label 0 where the token is marked misaligned), Rapidata's word
scores as one element per word with ``label = score >= threshold`` (state the threshold you used).
"""

from __future__ import annotations

import csv
from pathlib import Path

from .records import LabelFormatError, LabelRecord, check_labels, check_relative_image

__all__ = ["read_label_csv", "COLUMNS", "OPTIONAL_COLUMNS"]

COLUMNS = ("prompt", "image", "element", "rater", "label")
OPTIONAL_COLUMNS = ("category", "generator")


def _label(text: str, where: str, element: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise LabelFormatError(f"{where}: element {element!r}: expected labels 0 or 1, got {text!r}") from None
    return check_labels(value, where, element)[0]


def _same(kind: str, new: str | None, old: str | None, where: str, first: int) -> None:
    if new != old:
        raise LabelFormatError(f"{where}: expected the same {kind} as line {first}, got {new!r} (line {first}: {old!r})")


def read_label_csv(path: str | Path) -> list[LabelRecord]:
    """Read and validate a label CSV into one record per image (images in file order).

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    LabelFormatError
        A missing or unknown column, a label other than 0/1, an image whose rows disagree on its
        prompt or generator, an element whose rows disagree on its category, or one rating given
        twice (image, element, rater); the line is named.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"expected a label CSV at {p}, found none")
    images: dict[str, dict] = {}
    with p.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames or []
        missing = [c for c in COLUMNS if c not in cols]
        unknown = [c for c in cols if c not in COLUMNS + OPTIONAL_COLUMNS]
        if missing or unknown:
            raise LabelFormatError(f"{p}: expected columns {list(COLUMNS)} (+ optional {list(OPTIONAL_COLUMNS)}), "
                                   f"got {cols}" + (f"; missing {missing}" if missing else "")
                                   + (f"; unknown {unknown}" if unknown else ""))
        for row in reader:
            line = reader.line_num
            where = f"{p}: line {line}"
            if None in row or any(v is None for v in row.values()):
                raise LabelFormatError(f"{where}: expected {len(cols)} fields, got a row of another length")
            image = check_relative_image(row["image"], where)
            prompt, element = row["prompt"], row["element"].strip()
            if not prompt.strip() or not element:
                raise LabelFormatError(f"{where}: expected a prompt and an element, got {prompt!r} and {element!r}")
            category = (row.get("category") or "").strip() or None
            generator = (row.get("generator") or "").strip() or None
            entry = images.get(image)
            if entry is None:
                entry = images[image] = {"line": line, "prompt": prompt, "generator": generator, "labels": {},
                                         "categories": {}, "cat_line": {}, "raters": set()}
            _same("prompt", prompt, entry["prompt"], where, entry["line"])
            _same("generator", generator, entry["generator"], where, entry["line"])
            if element in entry["categories"]:
                _same(f"category for element {element!r}", category, entry["categories"][element], where,
                      entry["cat_line"][element])
            else:
                entry["categories"][element], entry["cat_line"][element] = category, line
            key = (element, row["rater"])
            if key in entry["raters"]:
                raise LabelFormatError(f"{where}: expected one rating per image, element and rater, got rater "
                                       f"{row['rater']!r} on element {element!r} of {image!r} again")
            entry["raters"].add(key)
            entry["labels"].setdefault(element, []).append(_label(row["label"], where, element))
    return [LabelRecord(prompt=e["prompt"], image=img, elements={k: tuple(v) for k, v in e["labels"].items()},
                        categories=dict(e["categories"]), generator=e["generator"], where=f"{p}: line {e['line']}")
            for img, e in images.items()]
