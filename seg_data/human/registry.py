"""The registry of human-judgment set families: one module per family, found by name or by sniffing a path.

Every family is a module of this package that defines

``FAMILY``
    a :class:`HumanSetFamily` (name, kind, format, size, license, how to get it, hub repository);
``detect(sniff) -> bool``
    whether a path (seen through a :class:`Sniff`: suffix, CSV/parquet header, parsed JSON,
    folder listing) is in the family's format;
``load(path) -> HumanJudgments``
    the reader (a file, or a folder holding the family's files).

:data:`HUMAN_SETS` maps each family's name to its module, in detection order (the first family
whose ``detect`` accepts a path reads it); modules are imported only when used. Adding a family
is one module with those three names and one line here (EvalMuse-40K's joined that way).

A ``human=`` entry (:func:`resolve_human`) is

* ``PATH``: a file or folder, its family detected;
* ``NAME:PATH``: a file or folder read by the family ``NAME``;
* ``NAME``: the family's files from the Hugging Face hub (:func:`fetch_human_set`), for the
  families that live there; offline this fails at once saying how to get the files and which
  ``NAME:DIR`` to pass instead.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

__all__ = ["HumanSetFamily", "Sniff", "HUMAN_SETS", "family", "family_module", "families", "sniff_path",
           "resolve_human", "fetch_human_set", "load_human", "load_human_set"]

log = logging.getLogger(__name__)

#: Family name -> module, in detection order (specific formats before the generic ones).
HUMAN_SETS: Mapping[str, str] = MappingProxyType({
    "tifa_v1": "seg_data.human.tifa_v1",
    "tifa160_dsg": "seg_data.human.dsg",
    "seetrue": "seg_data.human.seetrue",
    "genai_bench": "seg_data.human.genai_bench",
    "t2i_eval_bench": "seg_data.human.t2i_eval_bench",
    "hpdv2": "seg_data.human.hpdv2",
    "imagereward_db": "seg_data.human.imagereward_db",
    "evalmuse": "seg_data.human.evalmuse",
    "ts2_csv": "seg_data.human.ts2_csv",
})


@dataclass(frozen=True)
class HumanSetFamily:
    """What a family is and where it comes from (the rows of docs/human.md's table of sets).

    Attributes
    ----------
    name, title : str
        Registry key and display name.
    kind : {"likert", "binary", "ranked"}
        :data:`seg_data.human.base.KINDS`.
    file_format : str
        The files read, in one line.
    size, license : str
        As stated by the source.
    get : str
        How to get it.
    hub_repo : str, optional
        Hugging Face dataset repository of the files (None: not on the hub as files ts2 reads).
    hub_files : tuple of str
        The files of ``hub_repo`` the loader reads (downloaded by :func:`fetch_human_set`).
    raters : str
        Who the raters are (the rater ceiling needs two or more): people, annotation slots, or one.
    """

    name: str
    title: str
    kind: str
    file_format: str
    size: str
    license: str
    get: str
    hub_repo: str | None = None
    hub_files: tuple[str, ...] = ()
    raters: str = "one"


@dataclass(frozen=True)
class Sniff:
    """A path as the families' ``detect`` see it, read once.

    ``columns``: the header of a CSV or parquet file; ``data``: a parsed JSON file (None when the
    file is not JSON or does not parse); ``names``: the file names of a folder.
    """

    path: Path
    suffix: str
    is_dir: bool
    columns: tuple[str, ...] = ()
    data: Any = None
    names: frozenset[str] = frozenset()

    def first_record(self) -> Any:
        """The first value of a JSON object, or the first element of a JSON list (None otherwise)."""
        if isinstance(self.data, dict) and self.data:
            return next(iter(self.data.values()))
        if isinstance(self.data, list) and self.data:
            return self.data[0]
        return None


def family_module(name: str) -> ModuleType:
    """The module of family ``name``.

    Raises
    ------
    KeyError
        Unknown name; the message lists the valid ones.
    """
    try:
        module = HUMAN_SETS[name]
    except KeyError:
        raise KeyError(f"unknown human-judgment set {name!r}; expected one of {list(HUMAN_SETS)}") from None
    return importlib.import_module(module)


def family(name: str) -> HumanSetFamily:
    """The :class:`HumanSetFamily` registered as ``name`` (KeyError listing the valid names)."""
    return family_module(name).FAMILY


def families() -> list[HumanSetFamily]:
    """Every registered family, in registry order."""
    return [family(n) for n in HUMAN_SETS]


def sniff_path(path: Path) -> Sniff:
    """Read what the detectors look at: a CSV/parquet header, a JSON file, a folder's names."""
    if path.is_dir():
        return Sniff(path, "", True, names=frozenset(p.name for p in path.iterdir()))
    suffix = path.suffix.lower()
    if suffix == ".csv":
        with path.open(encoding="utf-8", errors="replace") as f:
            head = f.readline()
        import csv

        cols = next(csv.reader([head]), [])
        return Sniff(path, suffix, False, columns=tuple(c.strip().lstrip("\ufeff") for c in cols))
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq

            cols = tuple(pq.read_schema(path).names)
        except Exception:  # noqa: BLE001 - unreadable or no pyarrow: the loader says which
            cols = ()
        return Sniff(path, suffix, False, columns=cols)
    if suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None  # the family's loader names the parse error
        return Sniff(path, suffix, False, data=data)
    return Sniff(path, suffix, False)


def _detect(path: Path) -> str:
    sniff = sniff_path(path)
    for name in HUMAN_SETS:
        if family_module(name).detect(sniff):
            return name
    if sniff.is_dir:
        raise ValueError(f"{path}: expected a folder holding the files of a known human-judgment set "
                         f"({', '.join(f'{f.name}: {f.file_format}' for f in families())}), got {sorted(sniff.names)[:10]}")
    raise ValueError(f"{path}: expected a .json (TIFA v1.0, GenAI-Bench, T2I-Eval-Bench, HPDv2, EvalMuse), .csv (ts2 human CSV, "
                     f"TIFA160 DSG ratings, SeeTRUE) or .parquet (ImageRewardDB) file of a known human-judgment set, "
                     f"got {path.suffix!r}" + (f" with columns {list(sniff.columns)}" if sniff.columns else "")
                     + "; name the family as NAME:PATH, NAME one of " + ", ".join(HUMAN_SETS))


def resolve_human(spec: str | Path) -> tuple[str, Path | None]:
    """The family and local path of a ``human=`` entry (module docstring); path None = from the hub.

    Raises
    ------
    FileNotFoundError
        A path (or ``NAME:PATH``) that does not exist.
    KeyError
        ``NAME:PATH`` or ``NAME`` with an unknown ``NAME`` (the valid ones listed).
    ValueError
        A path no family reads, or a family name whose set is not on the hub.
    """
    text = str(spec)
    p = Path(text).expanduser()
    if p.exists():
        return _detect(p), p
    name, sep, rest = text.partition(":")
    if sep and name in HUMAN_SETS:
        q = Path(rest).expanduser()
        if not q.exists():
            raise FileNotFoundError(f"expected the {name} files at {q}, found none")
        return name, q
    if not sep and text in HUMAN_SETS:
        if family(text).hub_repo is None:
            raise ValueError(f"human set {text!r} is not downloaded from the hub: expected {text}:PATH "
                             f"({family(text).get})")
        return text, None
    if sep and name.isidentifier() and len(name) > 1:
        raise KeyError(f"unknown human-judgment set {name!r} in {text!r}; expected one of {list(HUMAN_SETS)}")
    raise FileNotFoundError(f"expected a human-judgment file (or folder) at {p}, found none (or a set name, one "
                            f"of {list(HUMAN_SETS)}, optionally NAME:PATH)")


def fetch_human_set(name: str, revision: str | None = None, cache_dir: str | Path | None = None) -> Path:
    """The local folder of family ``name``'s hub files (downloaded once into the hub cache).

    Raises
    ------
    ValueError
        The family is not on the hub.
    RuntimeError
        The download failed (offline: the message says how to get the files and to pass
        ``NAME:DIR``).
    """
    from ..hub_data import download_dataset

    fam = family(name)
    if fam.hub_repo is None:
        raise ValueError(f"human set {name!r} is not on the Hugging Face hub: {fam.get}")
    return download_dataset(fam.hub_repo, f"pass human={name}:DIR", patterns=fam.hub_files, revision=revision,
                            cache_dir=cache_dir)


def load_human_set(spec: str | Path, scores: str | Path | None = None, revision: str | None = None,
                   cache_dir: str | Path | None = None):
    """One ``human=`` entry loaded (from its path or the hub), with the metric scores of ``scores`` joined.

    Parameters
    ----------
    spec : str or path
        ``PATH``, ``NAME:PATH`` or ``NAME`` (:func:`resolve_human`).
    scores : path, optional
        Metric scores by item (:func:`seg_data.human.scores.attach_scores`: a TIFA v1.0 JSON or a
        score CSV keyed by item id or image).
    revision, cache_dir
        Of the hub download.

    Returns
    -------
    HumanJudgments
        ``name`` is the family's name (or the file's stem for ts2's own formats).
    """
    from dataclasses import replace

    from .scores import attach_scores

    name, path = resolve_human(spec)
    if path is None:
        path = fetch_human_set(name, revision, cache_dir)
    hj = family_module(name).load(path)
    if name != "ts2_csv":  # your own CSV keeps its file name; a known set its family name
        hj = replace(hj, name=name)
    if scores is not None:
        hj = attach_scores(hj, scores)
    return hj


def load_human(path: str | Path):
    """A human-judgment file or folder of any registered family (detected), without extra scores.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path`` (and not a set name).
    ValueError
        No family reads it, or a malformed file (the message names the file and record/row).
    """
    return load_human_set(path)
