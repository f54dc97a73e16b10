"""The bundled synthetic SEG set: rendered shape scenes with real, composable ablations.

Every SEG is a prompt about a small scene of flat coloured shapes (``"two red circles left of a
blue square"``). Its nodes are the same scene with 0 to 3 *ablations* applied (wrong colour,
wrong count, wrong shape, missing object, swapped position); a node's level is its number of
ablations, and an edge joins two nodes when the child's ablations are a superset of the parent's
(the transitive reduction of that order, so edges go one level at a time). Each node holds a few
images rendered from the node's scene with per-image jitter (sizes, positions, split of the
canvas), drawn without anti-aliasing on a plain light background so every object pixel has
exactly one palette colour: a colour-segmentation "detector" finds the objects from pixels.

What an image should contain is stored alongside:

* ``seg.metadata["scene"]``: the prompt's scene ``{groups: [{shape, colour, count}], relation}``
  (``relation`` relates group 0 to group 1, e.g. ``"left of"``, or is ``None``);
* ``seg.metadata["nodes"][label]``: ``{ablations: [...], scene: {...}}``, the node's rendered
  scene (a missing group has ``count: 0``); only in sets written with images;
* ``seg.metadata["kind"]``: the prompt kind, also the SEG's subset (``Colour``, ``Count``,
  ``Position``);
* ``boxes.json`` beside ``dataset.yaml`` (named by the dataset metadata ``boxes_file``):
  image id -> ``[[shape, colour, x0, y0, x1, y1], ...]``, the square box (inclusive pixel
  coordinates) each drawn object is inscribed in; see :func:`load_boxes`.

SEG ``i`` depends only on ``(seed, i)``, so a smaller set is a prefix of a larger one with the
same seed, and the structure (nodes, edges, image ids) does not depend on ``images``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from .graph import build_graph
from .model import SEG, ImageRecord, SEGDataset
from .seg_format import load_seg_file, save_seg_file

# Re-exported: the scene model and renderer moved to synthetic_scene, their names stay importable here.
from .synthetic_scene import (  # noqa: F401
    _OPPOSITE,
    ABLATION_TYPES,
    BACKGROUND,
    IMAGE_SIZE,
    PALETTE,
    SHAPES,
    Ablation,
    Group,
    Scene,
    _layout,
    _render,
    _star,
    _write_png,
    apply_ablations,
    expected_objects,
    render_scene,
)

__all__ = [
    "GENERATOR_VERSION", "PALETTE", "SHAPES", "KINDS", "IMAGE_SIZE", "BACKGROUND",
    "ABLATION_TYPES", "load_mini", "make_synthetic", "mini_cache_dir", "generator_tag", "load_boxes",
    "expected_objects", "apply_ablations", "render_scene",
]

log = logging.getLogger(__name__)

# Bump when the output changes in a way the source hash would not show (it nearly always will).
GENERATOR_VERSION = 1


# Prompt kind -> subset name; SEG i has kind KINDS[i % 3] so every subset gets a third.
KINDS = ("Colour", "Count", "Position")
# The ablation a kind of prompt is about; its SEGs' first level-1 node always has it.
_KIND_ABLATION = {"Colour": "wrong_colour", "Count": "wrong_count", "Position": "swapped_position"}

# Deepest error level of SEG i, cycled per kind (stratified, not drawn, so every small set has
# each kind at each depth): per kind 1/2 of the SEGs reach level 3, 1/3 level 2, 1/6 level 1.
_DEPTHS = (3, 2, 3, 1, 3, 2)



def _compatible(abls: list[Ablation], n_groups: int) -> bool:
    """Whether the ablations can hold at once (a missing group can have no other error)."""
    missing = {a.group for a in abls if a.kind == "missing_object"}
    if len(missing) >= n_groups:  # at least one group stays visible
        return False
    if missing and any(a.kind == "swapped_position" for a in abls):
        return False
    seen: set[tuple[str, int | None]] = set()
    for a in abls:
        if (a.kind, a.group) in seen:
            return False
        seen.add((a.kind, a.group))
        if a.kind != "missing_object" and a.group in missing:
            return False
    return True


def _prompt(scene: Scene, kind: str) -> str:
    if scene.relation is not None:
        return f"{scene.groups[0].phrase()} {scene.relation} {scene.groups[1].phrase()}"
    phrases = [g.phrase(numbers=(kind == "Count")) for g in scene.groups]
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]


def _make_scene(kind: str, rng: random.Random) -> Scene:
    colours = rng.sample(list(PALETTE), 3)  # distinct colours: one colour = one group
    if kind == "Colour":
        n = rng.choice((2, 3))
        return Scene(tuple(Group(rng.choice(SHAPES), colours[i], 1) for i in range(n)))
    if kind == "Count":
        if rng.random() < 0.4:
            return Scene((Group(rng.choice(SHAPES), colours[0], rng.choice((2, 3))),))
        shapes = rng.sample(SHAPES, 2)
        counts = rng.choice(((2, 1), (3, 1), (1, 2), (1, 3), (2, 2), (3, 2), (2, 3)))
        return Scene(tuple(Group(shapes[i], colours[i], counts[i]) for i in range(2)))
    shapes = rng.sample(SHAPES, 2)
    counts = [2 if rng.random() < 0.3 else 1 for _ in range(2)]
    relation = rng.choice(list(_OPPOSITE))
    return Scene(tuple(Group(shapes[i], colours[i], counts[i]) for i in range(2)), relation)


def _ablation_pool(scene: Scene, rng: random.Random) -> list[Ablation]:
    """One candidate ablation per (kind, group), in a seeded order."""
    used = {g.colour for g in scene.groups}
    spare = [c for c in PALETTE if c not in used]
    rng.shuffle(spare)  # distinct replacement colours, never a colour of the prompt
    pool: list[Ablation] = []
    for i, g in enumerate(scene.groups):
        pool.append(Ablation("wrong_colour", i, spare[i]))
        pool.append(Ablation("wrong_count", i, rng.choice([c for c in (1, 2, 3) if c != g.count])))
        pool.append(Ablation("wrong_shape", i, rng.choice([s for s in SHAPES if s != g.shape])))
        if len(scene.groups) > 1:
            pool.append(Ablation("missing_object", i))
    if scene.relation is not None:
        pool.append(Ablation("swapped_position"))
    rng.shuffle(pool)
    return pool


def _node_sets(kind: str, pool: list[Ablation], n_groups: int, max_level: int,
               rng: random.Random) -> list[list[tuple[int, ...]]]:
    """Ablation sets (sorted pool indices) per level 0..max_level: level k sets have k ablations.

    Level 1 has one or two nodes, the first with the kind's own ablation; every level-k set
    extends a level-(k-1) set by one compatible ablation, so each node has a parent.
    """
    own = next(i for i, a in enumerate(pool) if a.kind == _KIND_ABLATION[kind])
    others = [i for i in range(len(pool)) if i != own]
    first = [(own,)]
    if rng.random() < 0.5:
        first.append((rng.choice(others),))
    levels = [[()], first]
    for _ in range(2, max_level + 1):
        cands = _extensions(levels[-1], pool, n_groups)
        if not cands:
            break
        n = 2 if len(cands) > 1 and rng.random() < 0.35 else 1
        levels.append(sorted(rng.sample(cands, n)))
    return levels


def _extensions(sets: list[tuple[int, ...]], pool: list[Ablation], n_groups: int) -> list[tuple[int, ...]]:
    """The ablation sets one level down from ``sets``: each set with one more pool ablation compatible with it
    (sorted pool indices, each set once, in the order found)."""
    cands: list[tuple[int, ...]] = []
    for s in sets:
        for j in range(len(pool)):
            t = tuple(sorted(s + (j,)))
            if j not in s and t not in cands and _compatible([pool[k] for k in t], n_groups):
                cands.append(t)
    return cands



# --------------------------------------------------------------------------------------------
# Dataset generation
# --------------------------------------------------------------------------------------------
def _node_labels(levels: list[list[tuple[int, ...]]]) -> list[tuple[str, tuple[int, ...]]]:
    out = []
    for lvl, sets in enumerate(levels):
        for j, s in enumerate(sets):
            out.append((str(lvl) if len(sets) == 1 else f"{lvl}{'abcdefghijklmnopqrstuvwxyz'[j]}", s))
    return out


@dataclass(frozen=True)
class _SegImages:
    """Where the images of SEG ``seg`` go (``images/<seg_dir>/<node>-<k>.png`` under ``out``) and whether they
    are drawn (``draw``; each image's boxes then go into ``boxes``, image id -> boxes) or only named."""

    out: Path
    seg_dir: str
    seed: int
    seg: int
    draw: bool
    boxes: dict[str, list]

    def records(self, label: str, scene: Scene, n: int) -> list[ImageRecord]:
        """The ``n`` images of node ``label``, showing ``scene``, each laid out from its own seed."""
        recs = []
        for j in range(n):
            rel = f"images/{self.seg_dir}/{label}-{j}.png"
            image_id = f"{self.seg_dir}/{label}-{j}.png"
            if self.draw:
                img_rng = random.Random(f"ts2-synthetic/{self.seed}/{self.seg}/{label}/{j}")
                objects = _layout(scene, img_rng)
                _write_png(_render(objects), self.out / rel)
                self.boxes[image_id] = [list(o) for o in objects]
            recs.append(ImageRecord(image_id=image_id, path=self.out / rel))
        return recs


def _covering_edges(labelled: list[tuple[str, tuple[int, ...]]], pool: list[Ablation],
                    scene: Scene) -> tuple[list[tuple[str, str]], dict[tuple[str, str], list[str]]]:
    """Parent -> child when the child's ablations strictly contain the parent's; the transitive reduction keeps
    only the covering pairs (no 0 -> 2 shortcut past a 1 in between). Each edge's errors are the ablations the
    child adds."""
    order = nx.DiGraph()
    order.add_nodes_from(label for label, _ in labelled)
    sets = dict(labelled)
    order.add_edges_from((u, v) for u, su in labelled for v, sv in labelled if set(su) < set(sv))
    edges = sorted(nx.transitive_reduction(order).edges)
    return edges, {(u, v): [pool[k].describe(scene) for k in sets[v] if k not in sets[u]] for u, v in edges}


def _make_seg(i: int, images: _SegImages, images_per_node: int | None) -> SEG:
    """SEG ``i`` of the set seeded ``images.seed``: a scene of the SEG's kind, ablation sets as nodes, images."""
    rng = random.Random(f"ts2-synthetic/{images.seed}/{i}")
    kind = KINDS[i % len(KINDS)]
    scene = _make_scene(kind, rng)
    pool = _ablation_pool(scene, rng)
    max_level = _DEPTHS[(i // len(KINDS)) % len(_DEPTHS)]
    labelled = _node_labels(_node_sets(kind, pool, len(scene.groups), max_level, rng))

    nodes: dict[str, list[ImageRecord]] = {}
    node_errors: dict[str, list[str]] = {}
    node_meta: dict[str, dict] = {}
    for label, s in labelled:
        abls = [pool[k] for k in s]
        node_scene = scene
        for a in abls:
            node_scene = a.apply(node_scene)
        node_errors[label] = [a.describe(scene) for a in abls]
        node_meta[label] = {"ablations": [a.to_dict() for a in abls], "scene": node_scene.to_dict()}
        n_img = images_per_node if images_per_node is not None else rng.randint(2, 4)
        nodes[label] = images.records(label, node_scene, n_img)

    edges, edge_errors = _covering_edges(labelled, pool, scene)
    graph = build_graph(nodes, edges=edges, edge_errors=edge_errors, node_errors=node_errors)
    metadata: dict[str, Any] = {"kind": kind, "scene": scene.to_dict()}
    if images.draw:  # what each image shows; left out of structure-only sets, where it would double the file
        metadata["nodes"] = node_meta
    return SEG(seg_id=str(i), prompt=_prompt(scene, kind), graph=graph, subset=kind, metadata=metadata)


def make_synthetic(out: str | Path, n_segs: int, seed: int, images: bool = True,
                   images_per_node: int | None = None, name: str | None = None) -> Path:
    """Write a synthetic SEG dataset to ``out`` and return the path of its ``dataset.yaml``.

    Parameters
    ----------
    out : str or Path
        A new or empty folder. Receives ``dataset.yaml`` (format ``ts2-seg/1``) and, when
        ``images``, ``images/<seg>/<node>-<k>.png`` and ``boxes.json``.
    n_segs : int
        Number of SEGs (>= 1). SEG ``i`` depends only on ``(seed, i)``.
    seed : int
        Seed of everything: scenes, ablations, graph shapes, image counts and layouts.
    images : bool
        ``False`` writes the structure only: image ids and relative paths but no image files,
        no ``boxes.json`` and no per-node ``metadata["nodes"]``; prompts, scenes, nodes, node
        and edge errors, edges and image ids are the same as with ``True``.
    images_per_node : int, optional
        Images per node (>= 1); ``None`` draws 2-4 per node from the seed.
    name : str, optional
        Dataset name (default ``synthetic-<n_segs>-<seed>``).

    Raises
    ------
    ValueError
        ``n_segs < 1`` or ``images_per_node < 1``.
    FileExistsError
        ``out`` exists and is not empty (a rerun never mixes with old files).

    Examples
    --------
    >>> p = make_synthetic(tmp / "syn", n_segs=3, seed=0, images=False)  # doctest: +SKIP
    >>> load_seg_file(p).seg_ids  # doctest: +SKIP
    ['0', '1', '2']
    """
    from .progress import tqdm

    n_segs, seed, images_per_node = _checked_sizes(n_segs, seed, images_per_node)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"expected a new or empty folder for the synthetic set, got {out} "
                              "with content; remove it or choose another out=")
    out.mkdir(parents=True, exist_ok=True)
    width = max(4, len(str(n_segs - 1)))
    boxes: dict[str, list] = {}
    segs = []
    t0 = time.perf_counter()
    for i in tqdm(range(n_segs), desc="synthetic SEGs", unit="SEG", leave=False, mininterval=0.5):
        seg_dir = f"seg{i:0{width}d}"
        if images:
            (out / "images" / seg_dir).mkdir(parents=True, exist_ok=True)
        segs.append(_make_seg(i, _SegImages(out, seg_dir, seed, i, images, boxes), images_per_node))
    meta: dict[str, Any] = {
        "generator": "seg_data.synthetic", "generator_version": GENERATOR_VERSION, "seed": seed,
        "n_segs": n_segs, "images": bool(images), "image_size": IMAGE_SIZE,
        "background": list(BACKGROUND), "palette": {k: list(v) for k, v in PALETTE.items()},
    }
    if images:
        meta["boxes_file"] = "boxes.json"
        (out / "boxes.json").write_text(json.dumps(boxes, separators=(",", ":")), encoding="utf-8")
    ds = SEGDataset(segs, name=name or f"synthetic-{n_segs}-{seed}", root=out, metadata=meta)
    path = save_seg_file(ds, out / "dataset.yaml")
    # The cached mini set is written to a hidden .partial- folder and renamed: say where it ends up.
    log.log(logging.DEBUG if out.name.startswith(".") and ".partial-" in out.name else logging.INFO,
            "wrote %d synthetic SEGs (%d images%s) to %s in %.1f s", n_segs, ds.n_images,
            "" if images else ", structure only", out, time.perf_counter() - t0)
    return path


def _checked_sizes(n_segs, seed, images_per_node) -> tuple[int, int, int | None]:
    """``n_segs`` (>= 1), ``seed`` and ``images_per_node`` (>= 1 or ``None``) as integers.

    Raises
    ------
    ValueError
        ``n_segs < 1`` or ``images_per_node < 1``.
    """
    if int(n_segs) < 1:
        raise ValueError(f"expected n_segs >= 1, got {n_segs}")
    if images_per_node is not None and int(images_per_node) < 1:
        raise ValueError(f"expected images_per_node >= 1 or None, got {images_per_node}")
    return int(n_segs), int(seed), None if images_per_node is None else int(images_per_node)


# --------------------------------------------------------------------------------------------
# The cached default set
# --------------------------------------------------------------------------------------------
def generator_tag() -> str:
    """Short hash of the generator's source, version and Pillow version (names cache folders).

    Any change to this module, to :mod:`seg_data.synthetic_scene` (or to Pillow's rasteriser)
    gives a new folder, so a stale cache is never read.
    """
    import PIL

    from . import synthetic_scene

    h = hashlib.sha256(f"{GENERATOR_VERSION}/{PIL.__version__}/".encode())
    for source in (__file__, synthetic_scene.__file__):  # the generator is both modules
        try:
            h.update(Path(source).read_bytes())
        except OSError:  # source not shipped (frozen install): the version alone must do
            pass
    return h.hexdigest()[:10]


def mini_cache_dir(n_segs: int = 30, seed: int = 0, cache_dir: str | Path | None = None) -> Path:
    """Folder of the cached mini set: ``<root>/mini-<n>-<seed>-<generator tag>``.

    ``root`` is ``cache_dir`` if given, else :func:`seg_data.paths.cache_root` (``$TS2_CACHE_DIR``,
    ``$XDG_CACHE_HOME/ts2`` or ``~/.cache/ts2``).

    Raises
    ------
    NotADirectoryError
        ``root`` is a file (:func:`seg_data.paths.check_cache_folder`).
    """
    from .paths import cache_root, check_cache_folder

    root = check_cache_folder(Path(cache_dir).expanduser() if cache_dir is not None else cache_root())
    return root / f"mini-{int(n_segs)}-{int(seed)}-{generator_tag()}"


def _clean_stale_partials(parent: Path, name: str, older_than_s: float = 86400.0) -> None:
    # Left by a killed generation; a day old is far past any live generation of this set.
    now = time.time()
    for p in parent.glob(f".{name}.partial-*"):
        try:
            if now - p.stat().st_mtime > older_than_s:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass


def load_mini(n_segs: int = 30, seed: int = 0, cache_dir: str | Path | None = None,
              check_images: bool = False) -> SEGDataset:
    """The bundled synthetic dataset (``dataset=mini``), generated on first use and cached.

    The set is written by :func:`make_synthetic` into a temporary folder next to the cache
    folder (:func:`mini_cache_dir`) and renamed into place only when complete, so an interrupted
    generation never leaves a partial dataset; later calls load the cached ``dataset.yaml``.

    Parameters
    ----------
    n_segs, seed : int
        Passed to :func:`make_synthetic` (defaults: 30 SEGs, seed 0).
    cache_dir : str or Path, optional
        Cache root (default ``$TS2_CACHE_DIR`` or ``~/.cache/ts2``).
    check_images : bool
        Also validate that every image file exists.

    Raises
    ------
    SEGValidationError
        The cached set does not validate (e.g. images deleted and ``check_images``).
    OSError
        The cache folder cannot be created or written.
    """
    folder = mini_cache_dir(n_segs, seed, cache_dir)
    target = folder / "dataset.yaml"
    if not target.is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        _clean_stale_partials(folder.parent, folder.name)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=folder.parent))
        log.info("generating the mini dataset (%d SEGs, seed %d) into %s", n_segs, seed, folder)
        try:
            make_synthetic(tmp, n_segs=n_segs, seed=seed, images=True, name="mini")
            (tmp / "generator.json").write_text(json.dumps(
                {"generator_version": GENERATOR_VERSION, "tag": generator_tag(), "n_segs": int(n_segs),
                 "seed": int(seed)}), encoding="utf-8")
            try:
                os.rename(tmp, folder)  # atomic; fails if another process finished first
            except OSError as e:
                if not target.is_file():
                    raise OSError(f"could not move the generated mini set from {tmp} to {folder}: {e}") from e
                log.info("another process generated %s first; using it", folder)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    ds = load_seg_file(target, check_images=check_images)
    return ds


# --------------------------------------------------------------------------------------------
# Reading back what images should contain
# --------------------------------------------------------------------------------------------
def load_boxes(ds: SEGDataset) -> dict[str, list[tuple[str, str, int, int, int, int]]]:
    """Image id -> drawn objects ``(shape, colour, x0, y0, x1, y1)`` of a synthetic dataset.

    Raises
    ------
    ValueError
        The dataset has no boxes file (not synthetic, or written with ``images=False``).
    FileNotFoundError
        The boxes file named in its metadata is missing.
    """
    name = ds.metadata.get("boxes_file")
    if not name or ds.root is None:
        raise ValueError(f"dataset {ds.name!r}: expected synthetic metadata with 'boxes_file', got none "
                         "(only make_synthetic(images=True) writes boxes)")
    path = Path(ds.root) / name
    if not path.is_file():
        raise FileNotFoundError(f"dataset {ds.name!r}: expected boxes at {path}, found none")
    return {k: [tuple(o) for o in v] for k, v in json.loads(path.read_text(encoding="utf-8")).items()}
