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

Image ``path`` is relative to the file's folder (absolute paths are kept as they are).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .graph import build_graph
from .model import SEG, ImageRecord, SEGDataset
from .results import atomic_write_text
from .validate import raise_on_errors, validate_dataset

__all__ = ["FORMAT", "load_seg_file", "save_seg_file", "dataset_to_dict", "dataset_from_dict"]

FORMAT = "ts2-seg/1"


# Datasets with more images than this are written to .yaml files in JSON syntax (see save_seg_file).
JSON_SYNTAX_MIN_IMAGES = 5000
# Characters a YAML reader rejects or reads as line breaks inside a quoted scalar; JSON leaves them raw.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def _json_body(text: str) -> str | None:
    """The text after leading comment lines if it is a JSON object (JSON is YAML), else None."""
    i = 0
    while True:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        if text.startswith("#", i):
            j = text.find("\n", i)
            i = len(text) if j < 0 else j + 1
            continue
        return text[i:] if text.startswith("{", i) else None


def _read(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        body = _json_body(text)
        if body is not None:
            # A YAML file in JSON syntax (big datasets are saved so): the json parser reads it ~30x
            # faster than PyYAML. YAML flow mappings that are not strict JSON fall through to PyYAML.
            try:
                return json.loads(body)
            except json.JSONDecodeError:
                pass
        import yaml

        # The C loader is ~10x faster on big (100k-image) files; fall back when libyaml is absent.
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except Exception as e:  # yaml and json raise different classes; both mean "not parseable"
        raise ValueError(f"{path}: could not parse as {path.suffix.lstrip('.').upper() or 'YAML'}: {e}") from e


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


def dataset_from_dict(data: Any, base: Path, source: str = "<dict>") -> SEGDataset:
    """Build a dataset from the plain-data form; structural errors name the SEG and entry."""
    if not isinstance(data, dict) or not isinstance(data.get("segs"), list):
        raise ValueError(f"{source}: expected a mapping with a 'segs' list (format {FORMAT}), got {type(data).__name__}")
    fmt = data.get("format", FORMAT)
    if fmt != FORMAT:
        raise ValueError(f"{source}: expected format {FORMAT!r}, got {fmt!r}")
    segs = []
    for i, e in enumerate(data["segs"]):
        if not isinstance(e, dict) or "id" not in e:
            raise ValueError(f"{source}: segs[{i}]: expected a mapping with an 'id', got {e!r:.80}")
        sid = str(e["id"])
        try:
            nodes: dict[str, list[ImageRecord]] = {}
            node_err: dict[str, list[str]] = {}
            for n in e.get("nodes") or []:
                lbl = str(n["label"])
                if lbl in nodes:
                    raise ValueError(f"node {lbl!r} is defined twice")
                nodes[lbl] = [ImageRecord(image_id=str(im["id"]),
                                          path=None if im.get("path") is None else (base / im["path"]),
                                          source=im.get("source")) for im in (n.get("images") or [])]
                node_err[lbl] = [str(x) for x in (n.get("errors") or [])]
            edges = e.get("edges")
            edge_list = None if edges is None else [(str(x["from"]), str(x["to"])) for x in edges]
            edge_err = {} if edges is None else {(str(x["from"]), str(x["to"])): [str(y) for y in (x.get("errors") or [])]
                                                  for x in edges}
        except (KeyError, TypeError) as ex:
            raise ValueError(f"{source}: SEG {sid}: expected nodes with 'label' and images with 'id', "
                             f"edges with 'from'/'to'; missing or malformed {ex}") from ex
        except ValueError as ex:
            raise ValueError(f"{source}: SEG {sid}: {ex}") from ex
        g = build_graph(nodes, edges=edge_list, edge_errors=edge_err, node_errors=node_err)
        segs.append(SEG(seg_id=sid, prompt=str(e.get("prompt") or ""), graph=g, subset=e.get("subset"),
                        metadata=dict(e.get("metadata") or {})))
    return SEGDataset(segs, name=str(data.get("name", "dataset")), root=base,
                      metadata=dict(data.get("metadata") or {}))


def load_seg_file(path: str | Path, check_images: bool = False, validate: bool = True) -> SEGDataset:
    """Load a dataset in our explicit-edge format (``.yaml``, ``.yml`` or ``.json``).

    Raises
    ------
    FileNotFoundError, ValueError, SEGValidationError
        Missing file; unparseable or malformed content (naming the SEG); validation errors.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"expected a SEG file (.yaml/.json) at {path}, found none")
    ds = dataset_from_dict(_read(path), base=path.parent, source=str(path))
    ds.metadata.setdefault("source", str(path))
    if validate:
        problems = validate_dataset(ds, check_images=check_images)
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
