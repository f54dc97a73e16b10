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
from dataclasses import dataclass
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
    images: dict[str, _ImageLabels] = {}
    with p.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames or []
        _check_columns(p, cols)
        for row in reader:
            line = reader.line_num
            where = f"{p}: line {line}"
            r = _LabelRow.parse(row, where, len(cols))
            if r.image not in images:
                images[r.image] = _ImageLabels(line, r.prompt, r.generator)
            images[r.image].add(r, where, line)
    return [e.record(img, p) for img, e in images.items()]


def _check_columns(p: Path, cols: list[str]) -> None:
    """Refuse a header that lacks a required column or has one of no known meaning (a typo would drop data)."""
    missing = [c for c in COLUMNS if c not in cols]
    unknown = [c for c in cols if c not in COLUMNS + OPTIONAL_COLUMNS]
    if missing or unknown:
        raise LabelFormatError(f"{p}: expected columns {list(COLUMNS)} (+ optional {list(OPTIONAL_COLUMNS)}), "
                               f"got {cols}" + (f"; missing {missing}" if missing else "")
                               + (f"; unknown {unknown}" if unknown else ""))


@dataclass(frozen=True)
class _LabelRow:
    """One rating row: an element of an image's prompt labelled by a rater (the label is read when entered)."""

    image: str
    prompt: str
    element: str
    rater: str
    label: str
    category: str | None
    generator: str | None

    @classmethod
    def parse(cls, row: dict, where: str, n_cols: int) -> _LabelRow:
        """The row's fields checked: all present, a relative image path, a prompt and an element."""
        if None in row or any(v is None for v in row.values()):
            raise LabelFormatError(f"{where}: expected {n_cols} fields, got a row of another length")
        image = check_relative_image(row["image"], where)
        prompt, element = row["prompt"], row["element"].strip()
        if not prompt.strip() or not element:
            raise LabelFormatError(f"{where}: expected a prompt and an element, got {prompt!r} and {element!r}")
        return cls(image, prompt, element, row["rater"], row["label"],
                   category=(row.get("category") or "").strip() or None,
                   generator=(row.get("generator") or "").strip() or None)


class _ImageLabels:
    """What the rows of one image say, checked to agree: its prompt and generator (as on its first line), each
    element's category (as on the element's first line) and labels, one per rater."""

    def __init__(self, line: int, prompt: str, generator: str | None) -> None:
        self.line, self.prompt, self.generator = line, prompt, generator
        self.labels: dict[str, list[float]] = {}
        self.categories: dict[str, str | None] = {}
        self.cat_line: dict[str, int] = {}
        self.raters: set[tuple[str, str]] = set()

    def add(self, r: _LabelRow, where: str, line: int) -> None:
        """Enter a row of this image (``where``: its file and line, for errors)."""
        _same("prompt", r.prompt, self.prompt, where, self.line)
        _same("generator", r.generator, self.generator, where, self.line)
        if r.element in self.categories:
            _same(f"category for element {r.element!r}", r.category, self.categories[r.element], where,
                  self.cat_line[r.element])
        else:
            self.categories[r.element], self.cat_line[r.element] = r.category, line
        key = (r.element, r.rater)
        if key in self.raters:
            raise LabelFormatError(f"{where}: expected one rating per image, element and rater, got rater "
                                   f"{r.rater!r} on element {r.element!r} of {r.image!r} again")
        self.raters.add(key)
        self.labels.setdefault(r.element, []).append(_label(r.label, where, r.element))

    def record(self, image: str, p: Path) -> LabelRecord:
        return LabelRecord(prompt=self.prompt, image=image, elements={k: tuple(v) for k, v in self.labels.items()},
                           categories=dict(self.categories), generator=self.generator,
                           where=f"{p}: line {self.line}")
