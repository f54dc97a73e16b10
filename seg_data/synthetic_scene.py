"""Scenes of the synthetic SEG set: shapes, colours, ablations, and their aliased rendering.

The data model (:class:`Scene`, :class:`Group`, :class:`Ablation`) and the pixel side (layout and
drawing) of :mod:`seg_data.synthetic`, which builds SEGs and datasets from them. The public names
here are re-exported by :mod:`seg_data.synthetic`; import them from there.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

__all__ = [
    "PALETTE", "SHAPES", "IMAGE_SIZE", "BACKGROUND", "ABLATION_TYPES", "Group", "Scene", "Ablation",
    "expected_objects", "apply_ablations", "render_scene",
]

IMAGE_SIZE = 128
BACKGROUND = (245, 245, 240)
# Saturated, well separated colours; rendering is aliased, so pixels take exactly these values.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "orange": (245, 130, 0),
    "yellow": (230, 190, 0),
    "green": (30, 160, 60),
    "cyan": (0, 185, 200),
    "blue": (30, 60, 220),
    "purple": (140, 40, 190),
}
SHAPES = ("circle", "square", "triangle", "star")
_PLURAL = {"circle": "circles", "square": "squares", "triangle": "triangles", "star": "stars"}
_NUMBER = {1: "one", 2: "two", 3: "three"}
_OPPOSITE = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}
ABLATION_TYPES = ("wrong_colour", "wrong_count", "wrong_shape", "missing_object", "swapped_position")

_MARGIN = 4          # free border of the canvas, px
_REGION_GAP = 3      # half the free band between the two regions of a spatial prompt, px
_CELL = 30           # target cell side: one object per cell keeps objects apart
_SIZE = (16, 26)     # object side range, px



# --------------------------------------------------------------------------------------------
# Scenes and ablations
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Group:
    """``count`` objects of one shape and colour (count 0: the group is missing)."""

    shape: str
    colour: str
    count: int

    def phrase(self, numbers: bool = False) -> str:
        if self.count == 1 and not numbers:
            return f"{_article(self.colour)} {self.colour} {self.shape}"
        noun = self.shape if self.count == 1 else _PLURAL[self.shape]
        return f"{_NUMBER[self.count]} {self.colour} {noun}"

    def noun(self) -> str:
        """``"the red circle"`` / ``"the red circles"`` (as the prompt names the group)."""
        return f"the {self.colour} {self.shape if self.count == 1 else _PLURAL[self.shape]}"


@dataclass(frozen=True)
class Scene:
    """Groups of objects; ``relation`` (if any) says where group 0 is relative to group 1."""

    groups: tuple[Group, ...]
    relation: str | None = None

    def to_dict(self) -> dict:
        return {"groups": [{"shape": g.shape, "colour": g.colour, "count": g.count} for g in self.groups],
                "relation": self.relation}

    @classmethod
    def from_dict(cls, d: dict) -> "Scene":
        try:
            groups = tuple(Group(str(g["shape"]), str(g["colour"]), int(g["count"])) for g in d["groups"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"expected a scene {{groups: [{{shape, colour, count}}], relation}}, got {d!r:.120}") from e
        for g in groups:
            if g.shape not in SHAPES or g.colour not in PALETTE or not 0 <= g.count <= 3:
                raise ValueError(f"expected shape in {SHAPES}, colour in {tuple(PALETTE)} and count 0-3, got {g}")
        relation = d.get("relation")
        if relation is not None and (relation not in _OPPOSITE or len(groups) != 2):
            raise ValueError(f"expected relation in {tuple(_OPPOSITE)} between exactly 2 groups, got "
                             f"{relation!r} with {len(groups)} groups")
        return cls(groups, relation)


@dataclass(frozen=True)
class Ablation:
    """One error against the prompt: ``kind`` on ``group`` (``None`` for a swap) -> ``value``."""

    kind: str  # wrong_colour | wrong_count | wrong_shape | missing_object | swapped_position
    group: int | None = None
    value: Any = None

    def apply(self, scene: Scene) -> Scene:
        if self.kind == "swapped_position":
            return replace(scene, relation=_OPPOSITE[scene.relation])
        field = {"wrong_colour": "colour", "wrong_count": "count", "wrong_shape": "shape",
                 "missing_object": "count"}[self.kind]
        value = 0 if self.kind == "missing_object" else self.value
        groups = list(scene.groups)
        groups[self.group] = replace(groups[self.group], **{field: value})
        return replace(scene, groups=tuple(groups))

    def describe(self, prompt_scene: Scene) -> str:
        """Free-text error, phrased against the prompt so it reads the same in every node."""
        if self.kind == "swapped_position":
            a, b = prompt_scene.groups[0], prompt_scene.groups[1]
            return (f"swapped position: {a.noun()} {'is' if a.count == 1 else 'are'} "
                    f"{_OPPOSITE[prompt_scene.relation]} {b.noun()}, not {prompt_scene.relation} "
                    f"{'it' if b.count == 1 else 'them'}")
        g = prompt_scene.groups[self.group]
        be = "is" if g.count == 1 else "are"
        if self.kind == "wrong_colour":
            return f"wrong colour: {g.noun()} {be} {self.value}, not {g.colour}"
        if self.kind == "wrong_count":
            return f"wrong count: {self.value} {g.colour} {_PLURAL[g.shape] if self.value > 1 else g.shape}, not {g.count}"
        if self.kind == "wrong_shape":
            shown = f"{_article(self.value)} {self.value}" if g.count == 1 else _PLURAL[self.value]
            return f"wrong shape: {g.noun()} {be} {shown}"
        return f"missing object: no {g.colour} {_PLURAL[g.shape] if g.count > 1 else g.shape}"

    def to_dict(self) -> dict:
        return {"type": self.kind, "group": self.group, "value": self.value}

    @classmethod
    def from_dict(cls, d: dict) -> "Ablation":
        kind = d.get("type")
        if kind not in ABLATION_TYPES:
            raise ValueError(f"expected an ablation type in {ABLATION_TYPES}, got {kind!r}")
        return cls(kind, d.get("group"), d.get("value"))


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------
def _regions(scene: Scene, rng: random.Random) -> list[tuple[list[int], tuple[int, int, int, int]]]:
    """(group indices, region box) pairs; a spatial scene splits the canvas between its groups."""
    lo, hi = _MARGIN, IMAGE_SIZE - _MARGIN
    if scene.relation is None:
        return [(list(range(len(scene.groups))), (lo, lo, hi, hi))]
    cut = rng.randint(int(IMAGE_SIZE * 0.42), int(IMAGE_SIZE * 0.58))
    first = (lo, lo, cut - _REGION_GAP, hi)       # left part
    second = (cut + _REGION_GAP, lo, hi, hi)      # right part
    if scene.relation in ("above", "below"):
        first, second = (lo, lo, hi, cut - _REGION_GAP), (lo, cut + _REGION_GAP, hi, hi)
    subject_first = scene.relation in ("left of", "above")
    a, b = (first, second) if subject_first else (second, first)
    return [([0], a), ([1], b)]


def _layout(scene: Scene, rng: random.Random) -> list[tuple[str, str, int, int, int, int]]:
    """Objects as ``(shape, colour, x0, y0, x1, y1)``: one object per grid cell of its region."""
    out = []
    for groups, (x0, y0, x1, y1) in _regions(scene, rng):
        items = [(scene.groups[g].shape, scene.groups[g].colour) for g in groups for _ in range(scene.groups[g].count)]
        if not items:
            continue
        ncols, nrows = max(1, (x1 - x0) // _CELL), max(1, (y1 - y0) // _CELL)
        if ncols * nrows < len(items):
            raise RuntimeError(f"layout: expected room for {len(items)} objects, got {ncols}x{nrows} cells")
        cw, ch = (x1 - x0) / ncols, (y1 - y0) / nrows
        cells = rng.sample(range(ncols * nrows), len(items))
        for (shape, colour), cell in zip(items, cells, strict=True):
            cx0, cy0 = x0 + (cell % ncols) * cw, y0 + (cell // ncols) * ch
            # 1 px free on each side of the cell keeps neighbours >= 2 px apart.
            room = int(min(cw, ch)) - 2
            s = rng.randint(min(_SIZE[0], room), min(_SIZE[1], room))
            bx = int(cx0) + 1 + rng.randint(0, int(cw) - 2 - s)
            by = int(cy0) + 1 + rng.randint(0, int(ch) - 2 - s)
            out.append((shape, colour, bx, by, bx + s - 1, by + s - 1))
    return out


def _star(x0: int, y0: int, x1: int, y1: int) -> list[tuple[float, float]]:
    r_out = (x1 - x0) / 2
    r_in = 0.45 * r_out
    cx = (x0 + x1) / 2
    # A 5-point star is 1.81 R tall: centre it vertically in the box.
    cy = y0 + r_out + (x1 - x0 - r_out * (1 + math.cos(math.pi / 5))) / 2
    pts = []
    for k in range(10):
        r = r_out if k % 2 == 0 else r_in
        a = -math.pi / 2 + k * math.pi / 5
        pts.append((cx + r * math.cos(a), cy + r * math.sin(a)))
    return pts


def _render(objects: list[tuple[str, str, int, int, int, int]]):
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (IMAGE_SIZE, IMAGE_SIZE), BACKGROUND)
    draw = ImageDraw.Draw(img)
    for shape, colour, x0, y0, x1, y1 in objects:
        fill = PALETTE[colour]
        if shape == "circle":
            draw.ellipse((x0, y0, x1, y1), fill=fill)
        elif shape == "square":
            draw.rectangle((x0, y0, x1, y1), fill=fill)
        elif shape == "triangle":
            draw.polygon([(x0, y1), (x1, y1), ((x0 + x1) / 2, y0)], fill=fill)
        elif shape == "star":
            draw.polygon(_star(x0, y0, x1, y1), fill=fill)
        else:
            raise ValueError(f"expected a shape in {SHAPES}, got {shape!r}")
    return img


def _write_png(img, path: Path) -> None:
    # Pillow writes no timestamp chunk, so equal pixels give equal bytes.
    img.save(path, format="PNG", optimize=False, compress_level=6)


# --------------------------------------------------------------------------------------------
# Public helpers: render a scene, apply ablations, read back what images should contain
# --------------------------------------------------------------------------------------------
def apply_ablations(scene: dict, ablations: list[dict]) -> dict:
    """The scene a node shows: ``scene`` (SEG metadata form) with ``ablations`` applied.

    Examples
    --------
    >>> s = {"groups": [{"shape": "circle", "colour": "red", "count": 2},
    ...                 {"shape": "square", "colour": "blue", "count": 1}], "relation": "left of"}
    >>> apply_ablations(s, [{"type": "swapped_position"}])["relation"]
    'right of'
    """
    out = Scene.from_dict(scene)
    for a in ablations:
        out = Ablation.from_dict(a).apply(out)
    return out.to_dict()


def render_scene(scene: dict, seed: int | str = 0):
    """Render a scene (SEG metadata form) with seeded jitter, as the generator does.

    Returns
    -------
    (PIL.Image.Image, list of (shape, colour, x0, y0, x1, y1))
        The RGB image and each drawn object with the square box (inclusive) it fills.

    Raises
    ------
    ValueError
        A malformed scene (unknown shape/colour, count outside 0-3, bad relation).
    """
    objects = _layout(Scene.from_dict(scene), random.Random(seed))
    return _render(objects), objects

# --------------------------------------------------------------------------------------------
# Reading back what images should contain
# --------------------------------------------------------------------------------------------
def expected_objects(scene: dict) -> dict[tuple[str, str], int]:
    """``(shape, colour) -> count`` of a scene dict (as stored in SEG metadata), zeros left out.

    Examples
    --------
    >>> expected_objects({"groups": [{"shape": "circle", "colour": "red", "count": 2},
    ...                              {"shape": "square", "colour": "blue", "count": 0}], "relation": None})
    {('circle', 'red'): 2}
    """
    out: dict[tuple[str, str], int] = {}
    for g in scene["groups"]:
        if g["count"] > 0:
            key = (g["shape"], g["colour"])
            out[key] = out.get(key, 0) + int(g["count"])
    return out
