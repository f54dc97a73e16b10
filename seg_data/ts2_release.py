"""Loader for the TS2 release layout: ``metadata.csv`` (+ optional ``images/`` beside it).

``metadata.csv`` columns: ``id, target_prompt, file_name, image_source, rank``; one row per image,
``id`` the SEG, ``rank`` the node label (read as a string: ``1a`` and ``1`` differ). The release
has no edges, so graphs follow the TS2 convention (:func:`seg_data.graph.ts2_convention_edges`).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .graph import build_graph
from .ids import normalize_id, normalize_label
from .model import SEG, ImageRecord, SEGDataset, label_sort_key
from .paths import ImageRoots
from .validate import Problem, raise_on_errors, validate_dataset

__all__ = ["load_ts2_release", "ts2_subset", "TS2_SUBSETS", "TS2_N_SEGS", "TS2_LAST_SEG", "REQUIRED_COLUMNS", "HF_REPO_ID", "load_ts2",
           "TS2_FILE_NAME", "follows_ts2_naming"]

log = logging.getLogger(__name__)

REQUIRED_COLUMNS = ("id", "target_prompt", "file_name", "rank")
HF_REPO_ID = "saxon/T2IScoreScore"
# Subsets of the release by SEG id range (paper, section 3): inclusive bounds.
TS2_SUBSETS: dict[str, tuple[int, int]] = {"Synth": (0, 110), "Nat": (111, 135), "Real": (136, 164)}
TS2_N_SEGS = 165          # SEG ids "0" .. "164"
TS2_LAST_SEG = "164"      # the SEG the paper's code never analyses (analysis.release)
# The release's image file names: images/NNN-MM.ext, NNN the SEG id with three digits.
TS2_FILE_NAME = re.compile(r"^images/(\d{3})-\d+\.\w+$")


def ts2_subset(seg_id: int | str) -> str | None:
    """TS2 subset of a SEG id (``Synth`` 0-110, ``Nat`` 111-135, ``Real`` 136-164), else ``None``."""
    try:
        i = int(seg_id)
    except (TypeError, ValueError):
        return None
    return next((name for name, (lo, hi) in TS2_SUBSETS.items() if lo <= i <= hi), None)


def follows_ts2_naming(seg_ids: Sequence, file_names: Sequence) -> bool:
    """Whether every row follows the release's naming: file ``images/NNN-MM.ext`` in SEG ``NNN``
    (0 to 164). A score table named like that gets the TS2 subsets by default (``subsets=auto``).

    Examples
    --------
    >>> follows_ts2_naming(["0", "12"], ["images/000-01.jpg", "images/012-03.png"])
    True
    >>> follows_ts2_naming(["1"], ["images/000-01.jpg"])
    False
    """
    seg_ids, file_names = [str(v) for v in seg_ids], [str(v) for v in file_names]
    if not seg_ids or len(seg_ids) != len(file_names):
        return False
    for sid, fn in zip(seg_ids, file_names, strict=True):
        m = TS2_FILE_NAME.match(fn)
        if m is None or not sid.isdigit() or int(m.group(1)) != int(sid) or not 0 <= int(sid) < TS2_N_SEGS:
            return False
    return True


def load_ts2_release(path: str | Path, check_images: bool = False, validate: bool = True,
                     image_roots: Sequence[str | Path] | None = None) -> SEGDataset:
    """Load a TS2 release folder (or its ``metadata.csv``) as a :class:`SEGDataset`.

    Parameters
    ----------
    path : path-like
        The folder holding ``metadata.csv`` (images, if present, are resolved against it) or
        the CSV file itself.
    check_images : bool
        Report image files that do not exist (scoring needs them, analysis does not).
    validate : bool
        Run validation and raise :class:`SEGValidationError` on errors (warnings are logged and
        kept in ``dataset.metadata["problems"]``).

    Raises
    ------
    FileNotFoundError
        No ``metadata.csv`` at ``path``.
    ValueError
        An empty file, missing or duplicated columns, an ambiguous or non-integer SEG id or
        node label (:mod:`seg_data.ids`; the message names the file and row), an image path
        outside ``image_roots`` (default: the folder of ``metadata.csv``; :mod:`seg_data.paths`).
    SEGValidationError
        Validation errors (every one is listed).
    """
    path = Path(path)
    csv = path / "metadata.csv" if path.is_dir() else path
    if not csv.is_file():
        raise FileNotFoundError(f"expected a TS2 metadata.csv at {csv}, found none")
    rows = _ReleaseRows.read(_read_metadata(csv), csv, ImageRoots(csv.parent, image_roots))
    problems: list[Problem] = []
    segs = [rows.seg(seg_int, seg_rows, problems) for seg_int, seg_rows in sorted(rows.rows_of_segs().items())]
    ds = SEGDataset(segs, name="ts2", root=csv.parent, metadata={"source": str(csv), "format": "ts2-release"})
    if validate:
        problems += validate_dataset(ds, check_images=check_images)
        raise_on_errors(problems, source=str(csv))
    ds.metadata["problems"] = problems
    return ds


def _read_metadata(csv: Path):
    """``metadata.csv`` as a table of strings with the release's columns, each once, and at least one row.

    Raises
    ------
    ValueError
        An empty or unparsable file, a column given twice, a required column missing, no rows.
    """
    import pandas as pd

    try:
        df = pd.read_csv(csv, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError as e:
        raise ValueError(f"{csv}: expected a CSV header with columns {list(REQUIRED_COLUMNS)}, got an empty file") from e
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise ValueError(f"{csv}: could not parse as CSV: {e}") from e
    dup = [c for c in df.columns if re.fullmatch(r".+\.\d+", c) and c.rsplit(".", 1)[0] in df.columns]
    if dup:
        raise ValueError(f"{csv}: expected each column name once, got {dup[0].rsplit('.', 1)[0]!r} twice")
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{csv}: expected columns {list(REQUIRED_COLUMNS)}, missing {missing} (got {list(df.columns)})")
    if df.empty:
        raise ValueError(f"{csv}: expected at least one image row, got only the header")
    return df


@dataclass(frozen=True)
class _ReleaseRows:
    """The rows of ``metadata.csv`` as plain lists, one entry per row (per-row pandas access, iterrows or a
    groupby frame per SEG, was most of the load time): SEG ids and node labels checked, image paths resolved."""

    seg_ids: list[int]
    ranks: list[str]
    file_names: list[str]
    prompts: list[str]
    paths: list[Path]
    sources: list[str | None]

    @classmethod
    def read(cls, df, csv: Path, roots: ImageRoots) -> _ReleaseRows:
        """The rows of ``df``, read from ``csv``; errors name the file, row and column.

        Ids and labels are compared as written (:mod:`seg_data.ids`): ``01`` and ``1``, ``1A`` and ``1a`` are
        refused, not merged.
        """
        ids = [normalize_id(v, f"{csv}, row {i + 2}, column 'id'", integer=True) for i, v in enumerate(df["id"])]
        ranks = [normalize_label(v, f"{csv}, row {i + 2}, column 'rank'", strict=False)
                 for i, v in enumerate(df["rank"])]
        file_names = df["file_name"].tolist()
        for i, fn in enumerate(file_names):
            if not fn.strip():
                raise ValueError(f"{csv}, row {i + 2}, column 'file_name': expected an image file name, "
                                 "got an empty cell")
        paths = [roots.resolve(fn, f"{csv}, row {i + 2}, column 'file_name'") for i, fn in enumerate(file_names)]
        sources = df["image_source"].tolist() if "image_source" in df.columns else [None] * len(df)
        return cls([int(v) for v in ids], ranks, file_names, df["target_prompt"].tolist(), paths, sources)

    def rows_of_segs(self) -> dict[int, list[int]]:
        """SEG id -> its rows in file order."""
        rows_of: dict[int, list[int]] = {}
        for i, v in enumerate(self.seg_ids):
            rows_of.setdefault(v, []).append(i)
        return rows_of

    def seg(self, seg_int: int, rows: list[int], problems: list[Problem]) -> SEG:
        """The SEG of ``rows``, its nodes in label order, graph by the TS2 convention.

        The prompt is the SEG's most common one; rows that disagree are a known glitch of the release
        (images/003-08.jpg carries SEG 0's prompt) and are appended to ``problems`` as warnings, not fatal.
        """
        seg_id = str(seg_int)
        prompt = Counter(self.prompts[k] for k in rows).most_common(1)[0][0]
        for k in rows:
            if self.prompts[k] != prompt:
                problems.append(Problem("warning", "prompt_mismatch", seg_id, self.ranks[k],
                                        f"{self.file_names[k]}: expected the SEG's prompt {prompt!r}, "
                                        f"got {self.prompts[k]!r}"))
        nodes: dict[str, list[ImageRecord]] = {}
        for k in rows:
            nodes.setdefault(self.ranks[k], []).append(ImageRecord(image_id=self.file_names[k], path=self.paths[k],
                                                                   source=self.sources[k] or None))
        nodes = dict(sorted(nodes.items(), key=lambda kv: label_sort_key(kv[0])))
        return SEG(seg_id=seg_id, prompt=prompt, graph=build_graph(nodes), subset=ts2_subset(seg_int))


def load_ts2(path: str | Path | None = None, check_images: bool = False, revision: str | None = None,
             cache_dir: str | Path | None = None, image_roots: Sequence[str | Path] | None = None) -> SEGDataset:
    """The TS2 dataset from a local ``path``, or from the Hugging Face hub when ``path`` is None.

    The hub copy (``saxon/T2IScoreScore``) is downloaded once with ``huggingface_hub`` into the
    user's cache; it has the release layout (``metadata.csv`` beside ``images/``).
    """
    if path is None:
        path = download_ts2(revision=revision, cache_dir=cache_dir)
    return load_ts2_release(path, check_images=check_images, image_roots=image_roots)


def download_ts2(revision: str | None = None, cache_dir: str | Path | None = None) -> Path:
    """Download the TS2 dataset snapshot and return the folder holding ``metadata.csv``."""
    from .hub_data import download_dataset

    local = download_dataset(HF_REPO_ID, "pass path=DIR with a local copy of the release (metadata.csv + images/)",
                             revision=revision, cache_dir=cache_dir)
    hits = sorted(local.rglob("metadata.csv"), key=lambda p: len(p.parts))
    if not hits:
        raise FileNotFoundError(f"expected metadata.csv in the downloaded snapshot {local}, found none")
    return hits[0].parent
