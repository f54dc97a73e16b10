"""Our explicit-edge SEG format: one YAML or JSON file per dataset.

Schema (``format: ts2-seg/1``)::

    format: ts2-seg/1
    name: my-set
    metadata: {...}              # optional, free
    segs:
      - id: "0"
        prompt: two red circles left of a blue square
        subset: Synth            # optional
        nodes:
          - label: "0"
            errors: []           # this node's errors against the prompt (free text)
            images:
              - {id: seg000/0-0.png, path: images/seg000/0-0.png, source: render}
          - label: 1a
            errors: [wrong colour: circles are green]
            images: [...]
        edges:                   # optional: omitted -> the TS2 convention from the labels
          - {from: "0", to: 1a, errors: [wrong colour]}

Image ``path`` is relative to the file's folder; it must stay under the allowed image roots
(default: the file's folder; ``image_roots=[...]`` adds others), so ``../`` and absolute paths
out of them are refused (:mod:`seg_data.paths`). Keys not in the schema are refused with the
nearest valid key ("did you mean"); ids and labels follow :mod:`seg_data.ids`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .gcpause import gc_paused
from .graph import build_graph
from .ids import normalize_id, normalize_label
from .model import SEG, ImageRecord, SEGDataset
from .result_sets import atomic_write_text
from .untrusted import TypedScalar, load_untrusted, plain
from .validate import raise_on_errors, validate_dataset

__all__ = ["FORMAT", "load_seg_file", "save_seg_file", "dataset_to_dict", "dataset_from_dict"]

FORMAT = "ts2-seg/1"


# Datasets with more images than this are written to .yaml files in JSON syntax (see save_seg_file).
JSON_SYNTAX_MIN_IMAGES = 5000
# Characters a YAML reader rejects or reads as line breaks inside a quoted scalar; JSON leaves them raw.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def _rel(p: Path | None, base: Path) -> str | None:
    """``p`` relative to ``base`` (already resolved) when it lies below it, else as given."""
    if p is None:
        return None
    p = Path(p)
    try:  # cheap lexical check first: resolve() stats the file system (slow at 100k images)
        return (p if p.is_absolute() else Path.cwd() / p).relative_to(base).as_posix()
    except ValueError:
        pass
    try:
        return p.resolve().relative_to(base).as_posix()
    except ValueError:
        return str(p)


def dataset_to_dict(ds: SEGDataset, base: Path | None = None) -> dict:
    """Plain-data form of a dataset; image paths are made relative to ``base`` where possible."""
    base = (Path(base) if base is not None else Path.cwd()).resolve()
    segs = []
    for s in ds:
        g = s.graph
        nodes = [{
            "label": n,
            "errors": list(g.nodes[n].get("errors", ())),
            "images": [{k: v for k, v in (("id", im.image_id), ("path", _rel(im.path, base)), ("source", im.source))
                        if v is not None} for im in s.images(n)],
        } for n in s.nodes]
        edges = [{"from": u, "to": v, "errors": list(d.get("errors", ()))}
                 for u, v, d in sorted(g.edges(data=True), key=lambda e: (nodes_idx(s, e[0]), nodes_idx(s, e[1])))]
        entry = {"id": s.seg_id, "prompt": s.prompt, "subset": s.subset, "nodes": nodes, "edges": edges}
        if s.metadata:
            entry["metadata"] = s.metadata
        segs.append(entry)
    meta = {k: v for k, v in ds.metadata.items() if k != "problems"}
    return {"format": FORMAT, "name": ds.name, "metadata": meta, "segs": segs}


def nodes_idx(seg: SEG, n: str) -> int:
    return seg.nodes.index(n)


# Keys of each ts2-seg/1 mapping: anything else is refused with the nearest valid key, so that a
# typo (``edge:`` for ``edges:``) never silently changes the graph.
SCHEMA_KEYS: dict[str, tuple[str, ...]] = {
    "dataset": ("format", "name", "metadata", "segs"),
    "seg": ("id", "prompt", "subset", "nodes", "edges", "metadata"),
    "node": ("label", "errors", "images"),
    "image": ("id", "path", "source"),
    "edge": ("from", "to", "errors"),
}


# The same keys as sets, for the check every mapping goes through (100k images: one each).
_SCHEMA_KEY_SETS: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in SCHEMA_KEYS.items()}


def _mapping(obj: Any, kind: str, where: str, required: tuple[str, ...] = ()) -> dict:
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a mapping ({kind}), got {type(obj).__name__}: {obj!r:.60}")
    if obj.keys() <= _SCHEMA_KEY_SETS[kind]:
        # Every key a schema string (a TypedScalar key never equals one): only `required` is left.
        for k in required:
            if k not in obj:
                raise ValueError(f"{where}: expected key {k!r} in a {kind}, got keys {sorted(map(str, obj))}")
        return obj
    allowed = SCHEMA_KEYS[kind]
    for k in obj:
        key = k.text if isinstance(k, TypedScalar) else k
        if key not in allowed:
            near = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ValueError(f"{where}: unknown key {key!r} in a {kind} (expected {', '.join(allowed)}){hint}")
    missing = [k for k in required if k not in obj]
    if missing:
        raise ValueError(f"{where}: expected key {missing[0]!r} in a {kind}, got keys {sorted(map(str, obj))}")
    return obj


def _text(value: Any, where: str, field: str, optional: bool = False) -> str | None:
    """A string field as written: typed YAML scalars give their text; lists, mappings, floats refused."""
    if value is None and optional:
        return None
    if isinstance(value, TypedScalar):
        return value.text
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):  # JSON integers are exact
        return str(value)
    raise ValueError(f"{where}: expected text for {field!r}, got {type(value).__name__}: {value!r:.60}")


def _raw(value: Any) -> Any:
    return value.text if isinstance(value, TypedScalar) else value


def _list(value: Any, where: str, field: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a list for {field!r}, got {type(value).__name__}: {value!r:.60}")
    return value


def dataset_from_dict(data: Any, base: Path, source: str = "<dict>",
                      image_roots: Sequence[str | Path] | None = None) -> SEGDataset:
    """Build a dataset from the plain-data form, strictly.

    Unknown or missing keys, wrong types (a list where a prompt goes), ambiguous ids and labels
    (:mod:`seg_data.ids`) and image paths outside ``image_roots`` (default: ``base``; see
    :func:`seg_data.paths.resolve_image_path`) are refused with the SEG and entry named.
    """
    from .paths import ImageRoots

    roots = ImageRoots(base, image_roots)
    data = _mapping(data, "dataset", source, required=("segs",))
    fmt = _text(data.get("format", FORMAT), source, "format")
    if fmt != FORMAT:
        raise ValueError(f"{source}: expected format {FORMAT!r}, got {fmt!r}")
    segs = []
    seen_ids: dict[str, int] = {}
    for i, e in enumerate(_list(data["segs"], source, "segs")):
        here = f"{source}: segs[{i}]"
        e = _mapping(e, "seg", here, required=("id",))
        sid = _seg_id(e["id"], here)
        if sid in seen_ids:
            raise ValueError(f"{here}: expected unique SEG ids, got {sid!r} again (first at segs[{seen_ids[sid]}])")
        seen_ids[sid] = i
        segs.append(_seg_from_dict(e, sid, f"{source}: SEG {sid}", roots))
    meta = _metadata(data.get("metadata"), source)
    return SEGDataset(segs, name=_text(data.get("name", "dataset"), source, "name"), root=base, metadata=meta)


def _seg_id(raw: Any, where: str) -> str:
    """A SEG's id as written; an unquoted id YAML types as a number (.nan, 1:30 = 90, 0x1F) must be a
    canonical integer."""
    numeric = isinstance(raw, TypedScalar) and isinstance(raw.value, (int, float)) and not isinstance(raw.value, bool)
    return normalize_id(_raw(raw), where, integer=numeric)


def _metadata(value: Any, where: str) -> dict:
    """A ``metadata`` entry as plain data: a mapping (absent or empty: ``{}``)."""
    meta = plain(value or {})
    if not isinstance(meta, dict):
        raise ValueError(f"{where}: expected a mapping for 'metadata', got {type(meta).__name__}")
    return meta


def _seg_from_dict(e: dict, sid: str, here: str, roots) -> SEG:
    """One SEG entry (its keys checked) with id ``sid``: nodes with their images, edges, prompt, subset, metadata."""
    nodes: dict[str, list[ImageRecord]] = {}
    node_err: dict[str, list[str]] = {}
    for j, n in enumerate(_list(e.get("nodes"), here, "nodes")):
        n = _mapping(n, "node", f"{here}, nodes[{j}]", required=("label",))
        lbl = normalize_label(_raw(n["label"]), f"{here}, nodes[{j}]", strict=False)
        if lbl in nodes:
            raise ValueError(f"{here}: node {lbl!r} is defined twice")
        nodes[lbl] = [_image_from_dict(im, f"{here}, node {lbl}, images[{k}]", roots)
                      for k, im in enumerate(_list(n.get("images"), f"{here}, node {lbl}", "images"))]
        node_err[lbl] = [_text(x, f"{here}, node {lbl}", "errors") for x in _list(n.get("errors"), here, "errors")]
    edge_list, edge_err = _edges_from_list(e.get("edges"), here)
    prompt = _text(e.get("prompt", ""), here, "prompt")
    subset = _text(e.get("subset"), here, "subset", optional=True)
    meta = _metadata(e.get("metadata"), here)
    g = build_graph(nodes, edges=edge_list, edge_errors=edge_err, node_errors=node_err)
    return SEG(seg_id=sid, prompt=prompt, graph=g, subset=subset, metadata=meta)


def _image_from_dict(im: Any, at: str, roots) -> ImageRecord:
    """One image entry: a non-empty id, a path under the image roots (or none), a source (or none)."""
    im = _mapping(im, "image", at, required=("id",))
    path = _text(im.get("path"), at, "path", optional=True)
    image_id = _text(im["id"], at, "id")
    if not image_id.strip():
        raise ValueError(f"{at}: expected an image id, got an empty one")
    return ImageRecord(image_id=image_id, path=None if path is None else roots.resolve(path, at),
                       source=_text(im.get("source"), at, "source", optional=True))


def _edges_from_list(edges: Any, here: str) -> tuple[list[tuple[str, str]] | None, dict]:
    """A SEG's ``edges`` as ``(from, to)`` label pairs with each edge's errors; ``None`` when the SEG gives
    no edges (its graph then follows the TS2 convention)."""
    if edges is None:
        return None, {}
    edge_list, edge_err = [], {}
    for k, x in enumerate(_list(edges, here, "edges")):
        at = f"{here}, edges[{k}]"
        x = _mapping(x, "edge", at, required=("from", "to"))
        u, v = (normalize_label(_raw(x[f]), f"{at}, {f!r}", strict=False) for f in ("from", "to"))
        edge_list.append((u, v))
        edge_err[(u, v)] = [_text(y, at, "errors") for y in _list(x.get("errors"), at, "errors")]
    return edge_list, edge_err


def load_seg_file(path: str | Path, check_images: bool = False, validate: bool = True,
                  image_roots: Sequence[str | Path] | None = None) -> SEGDataset:
    """Load a dataset in our explicit-edge format (``.yaml``, ``.yml`` or ``.json``).

    The file is read as untrusted input (:func:`seg_data.untrusted.load_untrusted`: size,
    nesting and alias bounds, duplicated keys refused) and checked strictly against the schema
    (:func:`dataset_from_dict`). Image paths must lie under ``image_roots`` (default: the file's
    folder).

    Raises
    ------
    FileNotFoundError, ValueError, SEGValidationError
        Missing file; unparseable, over a bound or malformed content (naming the SEG and
        entry); validation errors.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"expected a SEG file (.yaml/.json) at {path}, found none")
    with gc_paused():  # millions of long-lived objects, no cycles: see seg_data.gcpause
        ds = dataset_from_dict(load_untrusted(path), base=path.parent, source=str(path), image_roots=image_roots)
        ds.metadata.setdefault("source", str(path))
        if validate:
            problems = validate_dataset(ds, check_images=check_images)
    if validate:
        raise_on_errors(problems, source=str(path))
        ds.metadata["problems"] = problems
    return ds


def save_seg_file(ds: SEGDataset, path: str | Path) -> Path:
    """Write ``ds`` to ``path`` (format by suffix: ``.json`` or YAML). Round-trips with load."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dataset_to_dict(ds, base=path.parent)
    n_images = ds.n_images
    if path.suffix.lower() == ".json":
        text = json.dumps(data, indent=1)
    elif n_images > JSON_SYNTAX_MIN_IMAGES:
        # Block YAML takes PyYAML ~0.5 ms per image to read (a minute for 100k images); the same data
        # in JSON syntax is still valid YAML and loads ~30x faster (_read). Characters YAML would
        # reject or fold are escaped; astral characters stay raw (YAML cannot read JSON's surrogates).
        body = _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(data, ensure_ascii=False))
        text = (f"# {FORMAT} dataset {ds.name!r} ({len(ds)} SEGs, {n_images} images) in JSON syntax, which is "
                f"also YAML: it loads much faster than block YAML\n{body}\n")
    else:
        import yaml

        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        text = yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True)
    return atomic_write_text(path, text)  # a crash never leaves a half-written dataset file
