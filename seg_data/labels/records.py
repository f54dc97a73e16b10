"""One image's fine-grained human labels: the common form every label format is read into.

A :class:`LabelRecord` holds, for one generated image, the prompt it was made for and, for each
*element* of that prompt (an object, an attribute, a count, a spatial relation, ...), the labels
its raters gave: 1 = depicted, 0 = not depicted. Readers of each format (:mod:`.evalmuse`,
:mod:`.label_csv`) return validated records; :mod:`.build` turns them into SEGs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["LabelRecord", "LabelFormatError", "element_category", "check_labels", "check_relative_image"]


class LabelFormatError(ValueError):
    """A label file or record that does not follow its format (the file and record are named)."""


@dataclass(frozen=True)
class LabelRecord:
    """The labels of one image.

    Attributes
    ----------
    prompt : str
        The prompt text; images with the same text belong to one prompt (one SEG).
    image : str
        The image's path as the label file gives it, relative to the images folder; also its id.
    elements : dict
        Element -> its raters' labels (a tuple of 0/1 floats, one per rater), in file order.
    categories : dict
        Element -> its category (``"counting"``, ``"attribute"``, ...) or None where the format has none.
    overall : tuple of float
        The raters' overall alignment scores where the format has them (EvalMuse: 1-5), else empty.
    generator : str or None
        The model that made the image, where the format records it.
    where : str
        File and record, for messages (``train_list.json: record 17``).
    """

    prompt: str
    image: str
    elements: Mapping[str, tuple[float, ...]]
    categories: Mapping[str, str | None] = field(default_factory=dict)
    overall: tuple[float, ...] = ()
    generator: str | None = None
    where: str = ""


def element_category(key: str) -> tuple[str, str | None]:
    """Split an element key written ``"text (category)"`` into text and category.

    EvalMuse writes each element as its prompt words followed by the category in parentheses
    (``"red (color)"``, ``"two (counting)"``); its own scripts split at the last ``(``. A key
    without a trailing parenthesis has no category.

    Examples
    --------
    >>> element_category("red apple (attribute)")
    ('red apple', 'attribute')
    >>> element_category("cat")
    ('cat', None)
    """
    text = key.strip()
    if text.endswith(")") and "(" in text:
        head, _, tail = text.rpartition("(")
        cat = tail[:-1].strip()
        if head.strip() and cat:
            return head.strip(), cat
    return text, None


def check_labels(values: object, where: str, element: str) -> tuple[float, ...]:
    """An element's rater labels as a tuple of 0.0/1.0.

    A single number counts as one rater. Booleans, NaN and anything but 0 and 1 are refused.

    Raises
    ------
    LabelFormatError
        Naming ``where`` and the element, with the value found.
    """
    seq = values if isinstance(values, (list, tuple)) else [values]
    if not seq:
        raise LabelFormatError(f"{where}: element {element!r}: expected at least one rater label (0 or 1), got none")
    out = []
    for v in seq:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and not (isinstance(v, float) and math.isnan(v))
        if not ok or v not in (0, 1):
            raise LabelFormatError(f"{where}: element {element!r}: expected labels 0 or 1, got {v!r}")
        out.append(float(v))
    return tuple(out)


def check_relative_image(image: object, where: str) -> str:
    """An image path as a label file gives it: non-empty text, relative, without ``..``.

    The built dataset joins it below its ``images/`` folder; an absolute path or a ``..`` would
    point out of it (ts2's loaders refuse such paths, :mod:`seg_data.paths`).
    """
    if not isinstance(image, str) or not image.strip():
        raise LabelFormatError(f"{where}: expected an image path (text), got {image!r:.80}")
    parts = image.replace("\\", "/").split("/")
    if image.startswith(("/", "\\")) or ".." in parts or "\x00" in image:
        raise LabelFormatError(f"{where}: expected a relative image path without '..', got {image!r:.120}")
    return image
