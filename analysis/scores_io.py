"""Reading score tables and joining them to SEG structure.

Formats
-------
wide
    One row per image: ``seg_id``, ``node``, optional ``file_name``, optional ``subset``, and
    one numeric column per metric (every other column, except the descriptive ones in
    :data:`IGNORED_COLUMNS`). ``../shared/ts2/released/scores_subset.csv`` is one. The TS2
    metadata names ``id``/``rank`` are accepted for ``seg_id``/``node``.
long
    One row per (image, metric): ``seg_id, node, file_name, metric, score`` (``value`` is
    accepted for ``score``), optional ``higher_is_better`` (true/false per metric) and
    ``subset``. It is pivoted to the wide form.

Which format (:func:`table_format`): a table is long when it has a ``metric`` column and a
``score`` (or ``value``) column, the ``metric`` column holds names (not numbers), and every other
column is a key or descriptive one. A ``metric`` column holding only numbers makes the table wide
(``metric`` and ``score`` are then two metrics). Anything in between (metric names plus other
score columns) is refused as ambiguous.

Headers: a column name given twice, or twice up to surrounding spaces (``random`` and
`` random``), is refused. Descriptive columns (:data:`IGNORED_COLUMNS`) are not analysed; when
one holds only numbers (it may be a metric) a warning names it, and ``metrics=[...]`` can select
it. Ids and labels follow :mod:`seg_data.ids` (``007`` and ``7`` are refused, not merged).

Cells: empty, ``nan``, ``NA``, ``null``, ``None`` are missing scores (NaN, dropped by the
meta-metrics). Quotes around a number, even unbalanced ones (``"0.5"``, ``0.5"``, ``"0.5``), are
dropped. Any other non-numeric cell, or an infinite value, is an error naming the row and
column. Values a metric declares as failure codes (:data:`analysis.protocols.FAILURE_CODES`,
e.g. VIEScore's ``-1``) are kept as written and counted in the log and the analysis notes; each
protocol decides whether they are scores or missing (its ``failure_codes`` option).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from seg_data import SEGDataset
from seg_data.ids import normalize_id, normalize_label
from seg_data.results import (
    DESCRIPTIVE_COLUMNS,
    KEY_ALIASES,
    KEY_COLUMNS,
    UNNAMED_COLUMN,
    metric_columns,
    non_metric_reason,
    run_record_beside,
)

# What the readers return, and what a read table is joined with, live beside this module; they are
# importable from here too, where callers have always found them.
from .inputs import SUBSET_SOURCES, AnalysisInputs, degenerate_metrics, prepare_inputs
from .protocols import FAILURE_CODES, failure_cells
from .reference import REFERENCE_SUFFIX, apply_lower_is_better, identical_to_reference, reference_names, with_reference
from .score_table import ScoreTable

__all__ = ["ScoreTable", "AnalysisInputs", "read_scores", "read_score_frame", "read_result_table",
           "prepare_inputs", "table_format", "table_shape", "IGNORED_COLUMNS",
           "METRIC_SENTINELS", "SUBSET_SOURCES", "degenerate_metrics", "apply_lower_is_better", "with_reference",
           "identical_to_reference", "reference_names", "REFERENCE_SUFFIX", "keys_from_dataset"]

log = logging.getLogger(__name__)

ALIASES = KEY_ALIASES  # TS2 metadata names of the keys (seg_data.results)
# Descriptive columns a score table may carry that are not metrics (the one list: seg_data.results).
IGNORED_COLUMNS = DESCRIPTIVE_COLUMNS
# Failure codes per metric column: one list, in analysis.protocols (which decides what they mean).
METRIC_SENTINELS = FAILURE_CODES
LONG_EXTRA_COLUMNS = frozenset({"metric", "score", "value", "higher_is_better"})
MISSING_TOKENS = frozenset({"", "nan", "NaN", "NAN", "NA", "N/A", "null", "NULL", "None", "none"})



def _row_label(source: str, i: int, from_file: bool) -> str:
    return f"{source}, row {i + 2}" if from_file else f"{source}, row {i}"


def _to_float(col: pd.Series, name: str, source: str, from_file: bool) -> np.ndarray:
    """A column as floats; NaN for missing tokens; a clear error for anything else."""
    if pd.api.types.is_bool_dtype(col):
        raise ValueError(f"{source}, column {name!r}: expected numeric scores, got booleans")
    if pd.api.types.is_numeric_dtype(col):
        vals = col.to_numpy(dtype=float)
    else:
        # Quotes around a number, balanced or not, are a writer's glitch (a stray quote in the release's
        # llmscore_over cells), not a different value.
        text = col.astype("string")
        if _may_need_strip(text):
            text = text.str.strip().str.strip("\"'").str.strip()
        missing = text.isna() | text.isin(MISSING_TOKENS)
        num = pd.to_numeric(text.where(~missing, None), errors="coerce")
        bad = num.isna() & ~missing
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(f"{_row_label(source, i, from_file)}, column {name!r}: expected a number, got {col.iloc[i]!r}")
        vals = num.to_numpy(dtype=float)
    inf = np.isinf(vals)
    if inf.any():
        i = int(np.flatnonzero(inf)[0])
        raise ValueError(f"{_row_label(source, i, from_file)}, column {name!r}: expected a finite number, got {float(vals[i])!r}")
    return vals


def _may_need_strip(text: pd.Series) -> bool:
    """False when stripping spaces and quotes would change no cell of the string column ``text``.

    The three strips of :func:`_to_float` take half its time on a clean column (no cell has a
    space or a quote anywhere: the usual case, and then they change nothing). The cells are
    joined with NUL, which is no whitespace, and ``str.split()`` cuts at exactly the characters
    ``str.strip()`` removes, so a whole that does not split holds none of them. Any space or quote,
    inner ones included, or a storage other than Python strings, answers True (strip as before).
    """
    if getattr(text.dtype, "storage", None) != "python":
        return True
    joined = "\x00".join(text.dropna().to_numpy(dtype=object))
    return not joined or joined.split() != [joined] or '"' in joined or "'" in joined


def _check_header(columns: Sequence[str], source: str) -> None:
    """Refuse a column name given twice, also up to surrounding spaces."""
    seen: dict[str, str] = {}
    for c in columns:
        key = str(c).strip()
        if key in seen:
            same = seen[key] == str(c)
            raise ValueError(f"{source}: expected each column name once, got {key!r} twice"
                             + ("" if same else f" ({seen[key]!r} and {str(c)!r} differ only by spaces)"))
        seen[key] = str(c)


def _read_csv(path: Path, sep: str) -> pd.DataFrame:
    import csv

    with open(path, newline="", encoding="utf-8") as f:
        header = next(csv.reader(f, delimiter=sep), None)
    if not header:
        raise ValueError(f"{path}: expected a header row naming the columns (seg_id, node, ...), got an empty file")
    _check_header(header, str(path))
    with open(path, "rb") as f:
        # Only a quoted field holds a line break (or runs to the end of the file): without any
        # quote in the file, the per-cell search below has nothing to find.
        quoted = any(b'"' in chunk for chunk in iter(lambda: f.read(1 << 24), b""))
    try:
        df = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False)
        stray = quoted and any(df[c].str.contains("\n", regex=False).any() for c in df.columns)
    except pd.errors.ParserError as e:
        if "EOF inside string" not in str(e):
            raise
        stray = True
    if not stray:
        return df
    # An opening quote without its closing one swallows the following lines (or the file): read the
    # lines as they are, quotes dropped, when every line then has the header's number of fields.
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [line.split(sep) for line in lines[1:] if line.strip()]
    bad = next((i for i, r in enumerate(rows) if len(r) != len(header)), None)
    if bad is not None:
        raise ValueError(f"{path}, row {bad + 2}: expected {len(header)} fields, got {len(rows[bad])} "
                         "(an unbalanced quote earlier in the file?)")
    log.warning("%s: unbalanced quotes: read line by line with the quotes dropped", path)
    return pd.DataFrame([[c.strip('"') for c in r] for r in rows], columns=header, dtype=str)


# First bytes of files that are often saved under a text table's name by mistake.
_MAGIC = ((b"\x1f\x8b", "a gzip-compressed file: gunzip it first"),
          (b"PK\x03\x04", "a ZIP archive, such as an Excel workbook (.xlsx): export the sheet as CSV"),
          (b"PAR1", "a Parquet file: name it .parquet"),
          (b"\xd0\xcf\x11\xe0", "an old Excel workbook (.xls): export the sheet as CSV"))


def _check_not_binary(path: Path, suffix: str) -> None:
    """Name what a text table really is when its first bytes say so (a gzip or an .xlsx saved as
    .csv), instead of a decoding error."""
    with path.open("rb") as f:
        head = f.read(8)
    for magic, what in _MAGIC:
        if head.startswith(magic):
            raise ValueError(f"{path}: expected a {suffix.lstrip('.')} text table, got {what}")


def _read_file(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(f"expected a score table at {path}, found none")
    suffix = path.suffix.lower()
    if suffix in {".csv", ".tsv", ".txt", ".json", ".jsonl"}:
        _check_not_binary(path, suffix)
    try:
        if suffix in {".csv", ".tsv", ".txt"}:
            return _read_csv(path, "\t" if suffix == ".tsv" else ",")
        if suffix == ".parquet":
            return pd.read_parquet(path)
        if suffix in {".jsonl", ".json"}:
            return pd.read_json(path, lines=suffix == ".jsonl", dtype=False)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, ImportError) as e:
        raise ValueError(f"{path}: could not read as a {suffix.lstrip('.')} table: {e}") from e
    raise ValueError(f"{path}: expected a .csv, .tsv, .parquet, .json or .jsonl score table, got {suffix!r}")


def _parse_bool(v, where: str) -> bool:
    s = str(v).strip().lower()
    if s in {"true", "1", "yes"}:
        return True
    if s in {"false", "0", "no"}:
        return False
    raise ValueError(f"{where}: expected true/false in column 'higher_is_better', got {v!r}")


def _pivot_long(df: pd.DataFrame, source: str, from_file: bool) -> tuple[pd.DataFrame, set[str]]:
    value_col = "score" if "score" in df.columns else "value"
    keys = [c for c in ("seg_id", "node", "file_name") if c in df.columns]
    if "file_name" not in keys:
        raise ValueError(f"{source}: a long score table needs a 'file_name' column to tell images apart")
    df = df.copy()
    df["metric"] = df["metric"].astype(str).str.strip()
    dup = df.duplicated(["file_name", "metric"], keep=False)
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise ValueError(f"{_row_label(source, i, from_file)}: expected one score per (file_name, metric), got "
                         f"{int(dup.sum())} duplicated rows, e.g. {df['file_name'].iloc[i]!r} / {df['metric'].iloc[i]!r}")
    lower: set[str] = set()
    if "higher_is_better" in df.columns:
        for m, g in df.groupby("metric", sort=False):
            flags = {_parse_bool(v, f"{source}, metric {m!r}") for v in g["higher_is_better"]}
            if len(flags) > 1:
                raise ValueError(f"{source}: metric {m!r}: expected one higher_is_better value, got both")
            if flags == {False}:
                lower.add(m)
    df[value_col] = _to_float(df[value_col], value_col, source, from_file)
    extra = [c for c in ("subset",) if c in df.columns]
    info = df.drop_duplicates("file_name")[keys + extra].set_index("file_name")
    wide = df.pivot(index="file_name", columns="metric", values=value_col)
    wide.columns = [str(c) for c in wide.columns]
    out = info.join(wide).reset_index()
    return out, lower


def read_scores(source: str | Path | pd.DataFrame, metrics: Sequence[str] | None = None,
                lower_is_better: Iterable[str] = (), dataset: SEGDataset | None = None) -> ScoreTable:
    """Read and validate a wide or long score table.

    Parameters
    ----------
    source : path or DataFrame
        ``.csv``/``.tsv``/``.parquet``/``.json``/``.jsonl`` file, or a frame.
    metrics : sequence of str, optional
        Metric columns to keep (default: every score column).
    lower_is_better : iterable of str
        Metrics where a lower score means a better image (added to any declared in a long
        table's ``higher_is_better`` column, and in a ``run.json`` beside the file: the
        directions ``ts2 score`` recorded, read with :func:`seg_data.results.run_record_beside`).
    dataset : SEGDataset, optional
        A wide table keyed by ``file_name`` alone gets its ``seg_id`` and ``node`` from it
        (:func:`keys_from_dataset`).

    Raises
    ------
    FileNotFoundError
        No file at ``source``, or ``source`` is a URL (``http://...``: not fetched).
    ValueError
        Missing ``seg_id``/``node`` columns, a bad node label, a non-numeric or infinite score
        (naming row and column), duplicated ``file_name``, unknown metric names.

    Examples
    --------
    >>> t = read_scores(pd.DataFrame({"seg_id": [0, 0], "node": ["0", "1"], "clip": [0.9, 0.4]}))
    >>> t.metrics, t.frame["seg_id"].tolist()
    (('clip',), ['0', '0'])
    """
    df, name = _load_frame(source)
    from_file = not isinstance(source, pd.DataFrame)
    declared_lower: set[str] = set()
    notes: list[str] = []
    if table_format(df, name) == "long":
        df, declared_lower = _pivot_long(df, name, from_file)
        from_file = False  # row numbers of the pivoted frame no longer match the file
    if dataset is not None and "file_name" in df.columns and not {"seg_id", "node"} & set(df.columns):
        df = keys_from_dataset(df, name, dataset, notes)
    df = _checked_keys(df, name, from_file)
    df = _drop_blank_columns(df, name, metrics, notes)
    score_cols = _score_columns(df, name, metrics, notes)
    values = {c: _metric_values(df[c], c, name, from_file, notes) for c in score_cols}
    # all columns at once: one assignment per column fragments the frame (a PerformanceWarning each
    # after 100 columns: 101 of them for a 200-metric table)
    out = pd.concat([df[[c for c in KEY_COLUMNS if c in df.columns]].copy(),
                     pd.DataFrame(values, index=df.index, columns=list(score_cols))], axis=1)
    lower = _lower_is_better(source, name, lower_is_better, declared_lower, score_cols)
    codes = {c: FAILURE_CODES[c] for c in score_cols if c in FAILURE_CODES}
    return ScoreTable(out, tuple(score_cols), frozenset(lower), name, tuple(notes), codes)


def read_score_frame(source: str | Path, metrics: Iterable[str] | None = None, *,
                     allow_url: bool = False) -> tuple[pd.DataFrame, frozenset[str]]:
    """A score table file as a wide frame, read as :func:`read_scores` reads it, for readers that
    keep every column (``ts2 report``'s result folders, ``ts2 reproduce``).

    The one reading of a score file (:func:`_load_frame`: header checks, the TS2 key aliases) and
    the one NaN policy (:func:`_to_float`, see the module docstring: ``""``, ``nan``, ``NA``,
    ``null``, ``None`` ... are missing, quotes around a number dropped, any other text or an
    infinite value an error naming row and column). A long table is pivoted to the wide form.
    The score columns are floats: those of ``metrics`` the table has (a folder analysed with
    ``metrics=[...]`` may keep text columns beside them), by default every metric column
    (:func:`seg_data.results.metric_columns`); every other column keeps its text as written. Unlike :func:`read_scores`, ids are not validated and no
    column is dropped: the frame is passed on (e.g. to :func:`analysis.pipeline.analyze`, which
    validates it).

    Returns
    -------
    (DataFrame, frozenset of str)
        The frame, and the metrics the file declares lower-is-better (a long table's
        ``higher_is_better`` column, a ``run.json`` beside the file).

    Raises
    ------
    FileNotFoundError
        No file at ``source``; a URL unless ``allow_url`` (then read with pandas: an unreachable
        server raises its ``OSError``).
    ValueError
        Unreadable file, a column name given twice, no ``seg_id``/``node`` column, a non-numeric or
        infinite score (naming row and column), an ambiguous long/wide table.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "s.csv")
    >>> _ = open(p, "w").write('seg_id,node,prompt,m\\n0,0,NA,"0.5"\\n0,1,x,NA\\n')
    >>> f, lower = read_score_frame(p)
    >>> f["prompt"].tolist(), f["m"].tolist(), lower
    (['NA', 'x'], [0.5, nan], frozenset())
    """
    df, name = _load_frame(source, allow_url=allow_url)
    declared_lower: set[str] = set()
    from_file = True
    if table_format(df, name) == "long":
        df, declared_lower = _pivot_long(df, name, from_file)
        from_file = False  # row numbers of the pivoted frame no longer match the file
    _require_keys(df, name)
    df = df.copy()
    cols = metric_columns(df.columns)
    if metrics is not None:
        chosen = {str(m) for m in metrics}
        cols = [c for c in df.columns if c in chosen]
    for c in cols:
        df[c] = _to_float(df[c], c, name, from_file)
    lower = _lower_is_better(source, name, (), declared_lower, metric_columns(df.columns))
    return df, frozenset(lower)


def read_result_table(path: str | Path, what: str, required: Sequence[str],
                      dtype: dict[str, type] | None = None) -> pd.DataFrame:
    """A long result table written by ts2 (``metametrics.csv``, ``per_seg.csv``,
    ``human_metametrics.csv``: one row per value), the one reader of them.

    NaN policy: pandas' default missing values (an empty cell, ``NaN``, ``NA`` ...) are NaN, as
    ts2 writes a value that is not defined (an empty cell); ``dtype`` keeps name columns
    (``metric``, ``seg_id``, ``subset``) as text. ``what`` names the table in errors.

    Raises
    ------
    ValueError
        Not readable as CSV, or a column of ``required`` missing (naming the file, what was
        expected and what it has).
    """
    p = Path(path)
    try:
        df = pd.read_csv(p, dtype=dtype, keep_default_na=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: could not read {what} as CSV ({type(e).__name__}: {e})") from e
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"{p}: expected {what} columns {list(required)}, missing {missing} (got {list(df.columns)})")
    return df


def _load_frame(source: str | Path | pd.DataFrame, allow_url: bool = False) -> tuple[pd.DataFrame, str]:
    """The table as a frame (a copy of a given frame) with checked, stripped headers and the TS2 key
    aliases renamed, and the name errors use; a URL is refused rather than fetched (unless
    ``allow_url``: read with pandas, every cell as text as from a file)."""
    from_file = not isinstance(source, pd.DataFrame)
    name = str(source) if from_file else "<frame>"
    url = from_file and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", name)
    if url and not allow_url:
        raise FileNotFoundError(f"expected a local score table file, got the URL {name}; download it first "
                                "and pass its path")
    if url:
        df = pd.read_csv(name, dtype=str, keep_default_na=False)
    else:
        df = _read_file(Path(source)) if from_file else source.copy()
    _check_header([str(c) for c in df.columns], name)
    df.columns = [str(c).strip() for c in df.columns]
    for old, new in ALIASES.items():
        if new not in df.columns and old in df.columns:
            df = df.rename(columns={old: new})
    return df, name


def keys_from_dataset(df: pd.DataFrame, name: str, dataset: SEGDataset, notes: list[str] | None = None) -> pd.DataFrame:
    """A table keyed by ``file_name`` alone, with each image's ``seg_id`` and ``node`` from ``dataset``.

    A name matches the dataset's image id exactly, else (for every row of the table at once)
    its last path part (``000-00.jpg`` for ``images/000-00.jpg``), which is then replaced by
    the dataset's id so the join on ``file_name`` finds it.

    Raises
    ------
    ValueError
        A name that is no image of the dataset, or whose last part names two of its images
        (the file, row and name said).
    """
    images = dataset.image_table()
    ids = images["file_name"].astype(str)
    key = {f: (s, n) for f, s, n in zip(ids, images["seg_id"].astype(str), images["node"].astype(str), strict=True)}
    names = df["file_name"].astype("string").str.strip()
    exact = names.isin(key.keys())
    if not exact.all():
        base = ids.map(lambda f: f.replace("\\", "/").rsplit("/", 1)[-1])
        counts = base.value_counts()
        by_base = dict(zip(base, ids, strict=True))
        for i, f in names.items():
            if exact[i] or pd.isna(f):
                continue
            b = str(f).replace("\\", "/").rsplit("/", 1)[-1]
            if counts.get(b, 0) > 1:
                raise ValueError(f"{name}: row {i + 2}: expected a file_name naming one image of the dataset, got "
                                 f"{f!r}, which matches {int(counts[b])} images "
                                 f"({', '.join(sorted(ids[base == b])[:3])}); write the path as the dataset does")
            if b not in by_base:
                raise ValueError(f"{name}: row {i + 2}: expected a file_name of the dataset's images (e.g. {ids.iloc[0]!r}), "
                                 f"got {f!r}, which is none of its {len(ids)} images")
            names[i] = by_base[b]
        if notes is not None:
            notes.append(f"{name}: {int((~exact).sum())} file name(s) matched to the dataset's images by their last "
                         "path part")
    out = df.copy()
    out["file_name"] = names
    out.insert(0, "node", names.map(lambda f: key[f][1]))
    out.insert(0, "seg_id", names.map(lambda f: key[f][0]))
    return out


def _checked_keys(df: pd.DataFrame, name: str, from_file: bool) -> pd.DataFrame:
    """The wide frame with its key columns present, as stripped strings (``12.0`` read back as ``12``),
    every ``seg_id``/``node`` cell a valid id/label and each ``file_name`` once; errors name the row."""
    _require_keys(df, name)
    df = df.reset_index(drop=True)
    if not len(df):
        raise ValueError(f"{name}: expected at least one row of scores, got only the header")
    if pd.api.types.is_float_dtype(df["seg_id"]):
        # A numeric column (parquet, JSON, a frame with NaN) stores 12 as 12.0: the type, not what was written.
        whole = df["seg_id"].dropna()
        if (whole == whole.round()).all():
            df["seg_id"] = df["seg_id"].map(lambda v: v if pd.isna(v) else str(int(v)))
    for c in KEY_COLUMNS:
        if c in df.columns:
            text = df[c].astype("string")
            df[c] = text.str.strip() if _may_need_strip(text) else text
    _check_key_cells(df, name, from_file)
    return df


def _require_keys(df: pd.DataFrame, name: str) -> None:
    missing = [c for c in ("seg_id", "node") if c not in df.columns]
    if missing:
        raise ValueError(f"{name}: expected columns 'seg_id' and 'node' (one row per image), missing {missing}; "
                         f"got {list(df.columns)}")


def _check_key_cells(df: pd.DataFrame, name: str, from_file: bool) -> None:
    """No empty ``seg_id``/``node`` cell, ids and labels as :mod:`seg_data.ids` accepts them, no
    ``file_name`` twice; the error names the first offending row."""
    for c in ("seg_id", "node"):
        empty = df[c].isna() | (df[c] == "")
        if empty.any():
            i = int(np.flatnonzero(empty.to_numpy())[0])
            raise ValueError(f"{_row_label(name, i, from_file)}, column {c!r}: expected a value, got an empty cell")
    # Ids and labels are compared as written (seg_data.ids): '007' and '7' are refused, not merged.
    for c, check in (("seg_id", normalize_id), ("node", normalize_label)):
        for v in df[c].unique():
            try:
                check(v)
            except ValueError as e:
                i = int(np.flatnonzero((df[c] == v).to_numpy())[0])
                raise ValueError(f"{_row_label(name, i, from_file)}, column {c!r}: {e}") from e
    if "file_name" in df.columns:
        dup = df["file_name"].duplicated(keep=False)
        if dup.any():
            i = int(np.flatnonzero(dup.to_numpy())[0])
            raise ValueError(f"{_row_label(name, i, from_file)}: expected each file_name once, got "
                             f"{df['file_name'].iloc[i]!r} {int((df['file_name'] == df['file_name'].iloc[i]).sum())} times")


def _drop_blank_columns(df: pd.DataFrame, name: str, metrics: Sequence[str] | None, notes: list[str]) -> pd.DataFrame:
    """The frame without header-less, value-less columns (a trailing separator, as Excel writes), unless
    ``metrics`` names one; the drop is logged and added to ``notes``."""
    blank = [c for c in df.columns if UNNAMED_COLUMN.match(c) and not _has_value(df[c])]
    if blank and (metrics is None or not set(blank) & {str(m) for m in metrics}):
        msg = (f"{name}: column(s) {blank} have no header name and no value (a trailing separator, as "
               "Excel writes): dropped")
        log.warning(msg)
        notes.append(msg)
        df = df.drop(columns=blank)
    return df


def _score_columns(df: pd.DataFrame, name: str, metrics: Sequence[str] | None, notes: list[str]) -> list[str]:
    """The metric columns to analyse: ``metrics`` (checked) or every column that is not a key or
    descriptive one. Numeric columns left out are warned about (and added to ``notes``): they may be
    metrics under a descriptive name."""
    roles = _ColumnRoles.of(df)
    score_cols = roles.chosen(metrics, name)
    left_out = [c for c in roles.candidates if c not in score_cols and roles.why[c] is not None]
    numeric = [c for c in left_out if _all_numeric(df[c])]
    for msg in roles.numeric_left_out(numeric, name):
        log.warning(msg)
        notes.append(msg)
    if left_out and len(left_out) > len(numeric):
        log.info("%s: descriptive column(s) not analysed: %s", name, [c for c in left_out if c not in numeric])
    if not score_cols:
        raise ValueError(f"{name}: expected at least one metric column besides {list(KEY_COLUMNS)}, got none")
    return score_cols


@dataclass(frozen=True)
class _ColumnRoles:
    """The non-key columns of a wide table, in order, each with why it is not a metric (None: it is one,
    by :func:`seg_data.results.non_metric_reason`)."""

    why: dict[str, str | None]

    @classmethod
    def of(cls, df: pd.DataFrame) -> _ColumnRoles:
        return cls({c: non_metric_reason(c, df.columns) for c in df.columns if c not in KEY_COLUMNS})

    @property
    def candidates(self) -> list[str]:
        return list(self.why)

    def chosen(self, metrics: Sequence[str] | None, name: str) -> list[str]:
        """``metrics`` when given (each must be a column), else every column that is a metric by its name."""
        by_name = [c for c, why in self.why.items() if why is None]
        if metrics is None:
            return by_name
        metrics = [str(m) for m in metrics]
        unknown = [m for m in metrics if m not in self.why]
        if unknown:
            raise ValueError(f"{name}: expected metrics among {by_name}, got unknown {unknown}")
        return metrics

    def numeric_left_out(self, numeric: Sequence[str], name: str) -> list[str]:
        """The warnings for columns left out that hold only numbers (they may be metrics): one for those
        under a descriptive name, one per column left out for another reason."""
        out = []
        named = [c for c in numeric if c in IGNORED_COLUMNS]
        if named:
            out.append(f"{name}: column(s) {named} hold only numbers but are descriptive names "
                       f"({sorted(IGNORED_COLUMNS)}) and are not analysed; pass metrics=[...] naming them to "
                       "analyse them as metrics")
        out += [f"{name}: column {c!r} holds only numbers but is {self.why[c]}, not a metric, and is not analysed; "
                f"pass metrics=[...] naming it to analyse it as a metric" for c in numeric if c not in IGNORED_COLUMNS]
        return out


def _metric_values(col: pd.Series, c: str, name: str, from_file: bool, notes: list[str]) -> np.ndarray:
    """One metric column as floats (see :func:`_to_float`); cells holding the metric's failure codes
    and a column with no score at all are logged (the codes also in ``notes``)."""
    vals = _to_float(col, c, name, from_file)
    n_fail = int(failure_cells(vals, FAILURE_CODES.get(c, ())).sum())
    if n_fail:
        msg = (f"{name}: metric {c!r}: {n_fail} cell(s) hold the failure code(s) {list(FAILURE_CODES[c])}: "
               "scores under protocol.failure_codes=score (paper, as the authors' code), missing under "
               "failure_codes=missing (graph)")
        log.warning(msg)
        notes.append(msg)
    if np.isnan(vals).all():
        log.warning("%s: metric %r has no score at all (every cell is missing)", name, c)
    return vals


def _lower_is_better(source: str | Path | pd.DataFrame, name: str, lower_is_better: Iterable[str],
                     declared_lower: set[str], score_cols: list[str]) -> set[str]:
    """The lower-is-better metrics: those given, those a long table declares, and those a ``run.json``
    beside the file records; a given name that is not a score column is an error."""
    lower = {str(m) for m in lower_is_better} | (declared_lower & set(score_cols))
    run = None if isinstance(source, pd.DataFrame) else run_record_beside(source)
    if run is not None:
        lower |= run.lower_is_better & set(score_cols)
    unknown = sorted(lower - set(score_cols))
    if unknown:
        raise ValueError(f"{name}: lower_is_better names {unknown}, expected metrics among {score_cols}")
    return lower


def table_shape(path: str | Path) -> tuple[int, int, int] | None:
    """``(n_segs, n_metric_columns, n_subsets)`` of a wide CSV/TSV score table, read cheaply (the
    header and the ``seg_id``/``subset`` columns), for estimating work before an analysis; None
    when the file is not such a table (the analysis reports why).

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "s.csv")
    >>> _ = open(p, "w").write("seg_id,node,file_name,a,b\\n0,0,x,1,2\\n1,0,y,1,2\\n1,1,z,3,4\\n")
    >>> table_shape(p)
    (2, 2, 0)
    """
    p = Path(path)
    if p.suffix.lower() not in {".csv", ".tsv", ".txt"} or not p.is_file():
        return None
    try:
        sep = "\t" if p.suffix.lower() == ".tsv" else ","
        head = [str(c).strip() for c in pd.read_csv(p, sep=sep, nrows=0).columns]
        sid = _seg_id_column(head)
        if sid is None or "metric" in head:
            return None
        cols = [sid] + (["subset"] if "subset" in head else [])
        f = pd.read_csv(p, sep=sep, usecols=cols, dtype=str, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError, UnicodeDecodeError):
        return None
    n_sub = int(f["subset"].nunique()) if "subset" in f.columns else 0
    return int(f[sid].nunique()), len(_header_metrics(head)), n_sub


def _seg_id_column(header: Sequence[str]) -> str | None:
    """The header's SEG id column: ``seg_id``, else its TS2 metadata name ``id``, else None."""
    return next((c for c in ("seg_id", "id") if c in header), None)


def _header_metrics(header: Sequence[str]) -> list[str]:
    """The columns of a wide table's header that hold metrics, by their names alone: neither a key, a
    descriptive column nor a TS2 key alias."""
    not_metrics = set(KEY_COLUMNS) | set(IGNORED_COLUMNS) | set(ALIASES)
    return [c for c in header if c not in not_metrics]


def _has_value(col: pd.Series) -> bool:
    """Whether a column holds any cell that is not a missing token."""
    if not pd.api.types.is_object_dtype(col) and not pd.api.types.is_string_dtype(col):
        return bool(col.notna().any())
    text = col.astype("string").str.strip()
    return bool((text.notna() & ~text.isin(MISSING_TOKENS)).any())


def _all_numeric(col: pd.Series) -> bool:
    if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        return bool(col.notna().any())
    text = col.astype("string").str.strip()
    text = text[text.notna() & ~text.isin(MISSING_TOKENS)]
    return bool(len(text)) and bool(pd.to_numeric(text, errors="coerce").notna().all())


def table_format(df: pd.DataFrame, source: str = "<frame>") -> str:
    """``"long"`` or ``"wide"`` by the rule of the module docstring; refuses ambiguous tables.

    Raises
    ------
    ValueError
        ``metric`` holds names and there is a ``score``/``value`` column, but other columns
        that may be scores too.

    Examples
    --------
    >>> table_format(pd.DataFrame({"seg_id": ["0"], "node": ["0"], "metric": [0.3], "score": [0.5]}))
    'wide'
    >>> table_format(pd.DataFrame({"seg_id": ["0"], "node": ["0"], "file_name": ["a"], "metric": ["clip"], "score": [0.5]}))
    'long'
    """
    cols = set(df.columns)
    if "metric" not in cols or not ({"score", "value"} & cols):
        return "wide"
    if _all_numeric(df["metric"]):
        log.info("%s: column 'metric' holds only numbers: read as a wide table with a metric named 'metric'", source)
        return "wide"
    others = sorted(c for c in cols - set(KEY_COLUMNS) - LONG_EXTRA_COLUMNS - set(ALIASES)
                    if non_metric_reason(c) is None)
    if others:
        raise ValueError(f"{source}: ambiguous score table: columns 'metric' (names) and 'score'/'value' make it look long "
                         f"(one row per image and metric), but columns {others} look like scores of a wide table; "
                         "expected one of the two forms (rename the columns)")
    return "long"
