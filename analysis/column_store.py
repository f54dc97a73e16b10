"""The analysis store: what one score column's analysis gives, kept by content and reused.

A researcher analyses their metric against the same reference columns again and again, changing
only their own column. Everything that depends only on one column, the SEG structure and the
settings is then the same as last time; the store keeps it in the cache folder
(``<cache>/analysis``, beside the score cache; :func:`seg_data.paths.cache_root`) and the next
run reads it instead of computing it. Kept per column and protocol:

- the per-SEG values (``(meta-metric, SEG)``: every walk value averaged per SEG, delta divided by
  the column's normaliser), from which the estimates, bootstrap replicates, paired differences,
  ranking and verdict are recomputed (they mix columns or are cheap);
- the chance levels, bands and Monte-Carlo errors (``(meta-metric, group)``), the costly part:
  each column's permutations are its own (:func:`analysis.chance.column_streams`), so they are the
  same bits whichever columns are analysed beside it.

Keys (:func:`column_keys`) hash everything that changes a result: the column's values as
analysed (oriented, failure codes applied), the SEG structure (walks, node rows, levels,
subsets), the protocol, the settings that reach the kernels (meta-metrics; for chance levels also
``chance``, ``seed``, ``confidence``, the block and step sizes, and whether the column is
lower-is-better) and the code (every source file of :mod:`analysis` and numpy's version). A
metric's *name* is not in the key: a renamed column is found again.

Entries are ``.npz`` files named by their key, written to a temporary file and renamed into place
(two runs writing one key write the same bytes; a reader never sees half a file), read without
pickle. The store is bounded (:data:`DEFAULT_MAX_BYTES`, ``TS2_ANALYSIS_STORE_MAX_MB``): past the
bound the least recently used entries go. A store that cannot be written (read-only, full) or an
entry that cannot be read is logged and skipped: the analysis then computes, never fails.
``ts2 cache info`` counts the entries and ``ts2 cache clear`` deletes them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

__all__ = ["ColumnStore", "StoreInfo", "column_keys", "structure_digest", "code_identity", "DEFAULT_MAX_BYTES",
           "STORE_FOLDER"]

log = logging.getLogger(__name__)

#: Folder of the store under the cache folder.
STORE_FOLDER = "analysis"
#: Size bound of the store (``TS2_ANALYSIS_STORE_MAX_MB`` overrides it): about 2,000 columns of the
#: TS2 release under both protocols.
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
_SUFFIX = ".npz"


@lru_cache(maxsize=1)
def code_identity() -> str:
    """A digest of every source file of the :mod:`analysis` package and numpy's version.

    Any change to the analysis code gives new keys (stale entries are never read; they age out),
    the way the score cache's keys hold the adapter's code.
    """
    root = Path(__file__).resolve().parent
    h = hashlib.sha256(np.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _update(h, part) -> None:
    """Feed one key part to a hash, typed, so that different parts never hash alike."""
    if isinstance(part, np.ndarray):
        a = np.ascontiguousarray(part)
        h.update(b"A" + str(a.dtype).encode() + repr(a.shape).encode() + b"\0" + a.tobytes())
    elif isinstance(part, bytes):
        h.update(b"B" + len(part).to_bytes(8, "little") + part)
    elif isinstance(part, tuple | list):
        h.update(b"L" + len(part).to_bytes(8, "little"))
        for x in part:
            _update(h, x)
    else:
        text = repr(part).encode()
        h.update(b"R" + len(text).to_bytes(8, "little") + text)


def structure_digest(structure, walk_table) -> bytes:
    """A digest of what the per-column results of one protocol depend on besides the column: the
    walk table (SEGs, subsets, every walk's rows and levels) and each analysed SEG's node rows and
    levels, in the walk table's SEG order."""
    h = hashlib.sha256()
    _update(h, (walk_table.seg_ids, walk_table.subsets, walk_table.walk_seg, int(structure.n_rows)))
    for b in walk_table.buckets:
        _update(h, (b.walk, b.rows, b.levels, int(b.max_slots)))
    by_id = {s.seg_id: s for s in structure.segs}
    for sid in walk_table.seg_ids:
        s = by_id[sid]
        _update(h, (s.levels, tuple(s.rows)))
    return h.digest()


def column_keys(kind: str, shared: Sequence, columns: np.ndarray, per_column: Sequence[Sequence] | None = None
                ) -> list[str]:
    """One key per column of ``columns`` (``(n_rows, n_columns)``): the hash of the code identity,
    ``kind``, the ``shared`` parts, the column's values (as float64) and its ``per_column`` parts.

    Examples
    --------
    >>> x = np.array([[1.0, 1.0, 2.0], [3.0, 3.0, 4.0]])
    >>> a, b, c = column_keys("t", ("paper",), x)
    >>> a == b, a == c, a == column_keys("t", ("graph",), x)[0]
    (True, False, False)
    """
    base = hashlib.sha256()
    _update(base, (code_identity(), kind, tuple(shared)))
    x = np.asarray(columns, dtype=np.float64)
    out = []
    for j in range(x.shape[1]):
        h = base.copy()
        _update(h, x[:, j])
        _update(h, tuple(per_column[j]) if per_column is not None else ())
        out.append(h.hexdigest())
    return out


@dataclass(frozen=True)
class StoreInfo:
    """What ``ts2 cache info`` says of the store."""

    path: str
    n_entries: int
    size_bytes: int
    max_bytes: int


def _max_bytes() -> int:
    raw = os.environ.get("TS2_ANALYSIS_STORE_MAX_MB")
    if raw is None or raw == "":
        return DEFAULT_MAX_BYTES
    try:
        mb = float(raw)
    except ValueError:
        log.warning("TS2_ANALYSIS_STORE_MAX_MB: expected a number of MiB, got %r; using %d MiB", raw,
                    DEFAULT_MAX_BYTES // 2**20)
        return DEFAULT_MAX_BYTES
    return max(0, int(mb * 2**20))


class ColumnStore:
    """Per-column analysis results in a folder, by key (module docstring).

    Parameters
    ----------
    folder : path
        The store's folder (created when first written).
    max_bytes : int, optional
        Size bound; default ``TS2_ANALYSIS_STORE_MAX_MB`` or :data:`DEFAULT_MAX_BYTES`. 0 keeps
        nothing.
    """

    def __init__(self, folder: str | Path, max_bytes: int | None = None) -> None:
        self.folder = Path(folder)
        self.max_bytes = _max_bytes() if max_bytes is None else int(max_bytes)
        self.hits = 0
        self.misses = 0
        self._written = 0
        self._broken = False  # a write failed: stop trying for this store (said once)

    @classmethod
    def at(cls, cache_dir: str | Path | None = None, max_bytes: int | None = None) -> ColumnStore:
        """The store under ``cache_dir`` (default :func:`seg_data.paths.cache_root`)."""
        from seg_data.paths import cache_root, check_cache_folder

        root = check_cache_folder(Path(cache_dir).expanduser() if cache_dir else cache_root())
        return cls(root / STORE_FOLDER, max_bytes)

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}{_SUFFIX}"

    def get(self, key: str) -> dict[str, np.ndarray] | None:
        """The arrays stored under ``key``, or None (absent, or unreadable: then removed)."""
        path = self._path(key)
        try:
            with np.load(path, allow_pickle=False) as z:
                out = {name: z[name] for name in z.files}
        except (FileNotFoundError, NotADirectoryError):  # not stored (or no store folder can exist there)
            self.misses += 1
            return None
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
            log.warning("analysis store: could not read %s (%s: %s); computing it again", path, type(e).__name__, e)
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass
            self.misses += 1
            return None
        try:
            os.utime(path)  # least recently used goes first when the store is full
        except OSError:
            pass
        self.hits += 1
        return out

    def put(self, key: str, arrays: dict[str, np.ndarray]) -> None:
        """Store ``arrays`` under ``key`` (atomically); a failure is logged once, never raised."""
        if self._broken or self.max_bytes <= 0:
            return
        path = self._path(key)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, path)
            self._written += 1
        except OSError as e:
            self._broken = True
            log.warning("analysis store: could not write to %s (%s); this run computes without keeping results",
                        self.folder, e.strerror or e)
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass

    def _entries(self) -> list[os.DirEntry]:
        out: list[os.DirEntry] = []
        try:
            subs = list(os.scandir(self.folder))
        except OSError:
            return out
        for sub in subs:
            if sub.is_dir(follow_symlinks=False):
                try:
                    out.extend(e for e in os.scandir(sub.path) if e.name.endswith(_SUFFIX) and e.is_file())
                except OSError:
                    continue
        return out

    def prune(self) -> int:
        """Delete least recently used entries until the store is within 80% of its bound (when it is
        over it); returns how many were deleted. Runs after a run that wrote entries."""
        if not self._written:
            return 0
        self._written = 0
        stats = []
        for e in self._entries():
            try:
                st = e.stat()
            except OSError:
                continue
            stats.append((st.st_mtime, st.st_size, e.path))
        total = sum(s for _, s, _ in stats)
        if total <= self.max_bytes:
            return 0
        n = 0
        for _, size, path in sorted(stats):
            if total <= 0.8 * self.max_bytes:
                break
            try:
                os.unlink(path)
            except OSError:  # another run pruned it first
                continue
            total -= size
            n += 1
        log.info("analysis store: %d least recently used entries deleted (bound %d MiB)", n, self.max_bytes // 2**20)
        return n

    def info(self) -> StoreInfo:
        sizes = []
        for e in self._entries():
            try:
                sizes.append(e.stat().st_size)
            except OSError:
                continue
        return StoreInfo(str(self.folder), len(sizes), int(sum(sizes)), self.max_bytes)

    def clear(self) -> int:
        """Delete every entry; returns how many."""
        n = 0
        for e in self._entries():
            try:
                os.unlink(e.path)
                n += 1
            except OSError:
                continue
        return n

    def get_many(self, keys: Iterable[str]) -> list[dict[str, np.ndarray] | None]:
        return [self.get(k) for k in keys]


_CHANCE_ARRAYS = ("mean", "low", "high", "mc_error")


@dataclass
class _Stored:
    """One kind of per-column result (its arrays ``names``, each of ``shape`` per column) for every
    column: the keys, what the store held, and the columns still to compute (``need``)."""

    store: ColumnStore | None
    keys: list[str]
    got: list
    names: tuple[str, ...]
    shape: tuple[int, ...]

    @classmethod
    def look_up(cls, store: ColumnStore | None, kind: str, shared: Sequence, scores: np.ndarray,
                per_column: Sequence[Sequence], names: tuple[str, ...], shape: tuple[int, ...]) -> _Stored:
        n = scores.shape[1]
        if store is None:
            return cls(None, [], [None] * n, names, shape)
        keys = column_keys(kind, shared, scores, per_column)
        return cls(store, keys, store.get_many(keys), names, shape)

    @cached_property
    def need(self) -> list[int]:
        """Columns with no usable entry (absent, or a damaged or foreign file of other arrays)."""
        return [j for j, e in enumerate(self.got)
                if e is None or not all(n in e and e[n].shape == self.shape and e[n].dtype == np.float64
                                        for n in self.names)]

    def assemble(self, fresh: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every column's arrays: ``fresh`` (rows: the ``need`` columns, in order; stored now) and the rest
        from the store."""
        need = self.need
        out = {n: np.empty((len(self.got), *self.shape)) for n in self.names}
        for n in self.names:
            out[n][need] = fresh[n]
        for j in set(range(len(self.got))) - set(need):
            for n in self.names:
                out[n][j] = self.got[j][n]
        if self.store is not None:
            for i, j in enumerate(need):
                self.store.put(self.keys[j], {n: fresh[n][i] for n in self.names})
        return out


@dataclass(frozen=True)
class ChanceRequest:
    """The chance-level settings of one protocol's run (:func:`analysis.chance.chance_levels`)."""

    n_perm: int
    seed: int
    confidence: float
    lower_is_better: tuple[str, ...] = ()
    progress: bool = False


def column_results(store: ColumnStore | None, scores: np.ndarray, structure, walk_table, sigma: np.ndarray,
                   protocol, metrics: Sequence[str], meta_metrics: Sequence[str], chance: ChanceRequest | None):
    """The per-SEG values and (when ``chance`` is given) the chance levels of every column, reading
    what ``store`` holds and computing, in one batch, only the columns it lacks (then storing them).

    Without a store every column is computed; with one, the same bits (each column's computation
    does not depend on the others: tests/test_column_store.py checks it).

    Returns
    -------
    (SegValues, ChanceLevels or None)
    """
    from .aggregate import SegValues, compute_seg_values
    from .chance import chance_levels

    n_m, n_k, n_s = len(metrics), len(meta_metrics), walk_table.n_segs
    sigma = np.asarray(sigma, dtype=float)
    digest = structure_digest(structure, walk_table) if store is not None else b""
    shared = (protocol, tuple(meta_metrics), digest)
    seg = _Stored.look_up(store, "seg_values", shared, scores, [(sigma[j : j + 1],) for j in range(n_m)],
                          ("values",), (n_k, n_s))
    levels = _chance_stored(store, shared, scores, sigma, metrics, walk_table, chance, n_k) if chance is not None else None
    need_seg, need_chance = seg.need, (levels.need if levels is not None else [])
    need = sorted(set(need_seg) | set(need_chance))
    if store is not None:
        log.info("protocol %s: %d of %d columns read from the analysis store (%s)", protocol.name, n_m - len(need),
                 n_m, store.folder)
    fresh = _FreshWalks.of(walk_table, scores, need, protocol, meta_metrics)
    values = {"values": np.empty((0, n_k, n_s))}
    if need_seg:
        wv, nv = fresh.rows(need_seg)
        values = {"values": compute_seg_values(walk_table, wv, nv, sigma[need_seg], protocol,
                                               [metrics[j] for j in need_seg], meta_metrics).values}
    sv = SegValues(protocol, tuple(metrics), tuple(meta_metrics), walk_table.seg_ids, walk_table.subsets,
                   seg.assemble(values)["values"], walk_table.walks_per_seg(), sigma)
    out = None
    if levels is not None:
        got = None
        if need_chance:
            got = chance_levels(scores[:, need_chance], structure, walk_table, sigma[need_chance], protocol,
                                [metrics[j] for j in need_chance], meta_metrics, chance.lower_is_better,
                                n_perm=chance.n_perm, seed=chance.seed, confidence=chance.confidence,
                                progress=chance.progress, observed=fresh.rows(need_chance))
        out = _assembled_levels(levels, got, chance)
    if store is not None:
        store.prune()
    return sv, out


def _chance_stored(store: ColumnStore | None, shared: tuple, scores: np.ndarray, sigma: np.ndarray,
                   metrics: Sequence[str], walk_table, chance: ChanceRequest, n_k: int) -> _Stored:
    """The chance levels ``store`` holds per column (keyed by the permutation settings, each column's
    sigma and direction), and the columns it lacks; ``n_k`` meta-metrics."""
    from .chance import chance_steps

    flip = [m in set(chance.lower_is_better) for m in metrics]
    n_g = 1 + len({s for s in walk_table.subsets if s is not None})  # Avg and each subset
    steps = chance_steps(chance.n_perm, walk_table.n_walks, n_k)
    return _Stored.look_up(store, "chance", (*shared, chance.n_perm, chance.seed, chance.confidence, steps),
                           scores, [(sigma[j : j + 1], flip[j]) for j in range(len(metrics))], _CHANCE_ARRAYS,
                           (n_k, n_g))


@dataclass(frozen=True)
class _FreshWalks:
    """The walk values and valid counts of the columns ``need`` (sorted column indices) that the store
    lacked, computed in one batch (None when it lacked none)."""

    need: list[int]
    wv: np.ndarray | None
    nv: np.ndarray | None

    @classmethod
    def of(cls, walk_table, scores: np.ndarray, need: list[int], protocol, meta_metrics: Sequence[str]) -> _FreshWalks:
        from .compute import walk_values

        wv, nv = walk_values(walk_table, scores[:, need], protocol, meta_metrics) if need else (None, None)
        return cls(need, wv, nv)

    def rows(self, columns: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The walk values and valid counts of ``columns`` (each among ``need``), in that order."""
        at = {j: i for i, j in enumerate(self.need)}
        rows = [at[j] for j in columns]
        return self.wv[rows], self.nv[rows]


def _assembled_levels(levels: _Stored, got, chance: ChanceRequest):
    """The :class:`~analysis.chance.ChanceLevels` of every column: those ``levels`` read from the store and
    those just computed (``got``; None when none was)."""
    from .chance import ChanceLevels

    arrays = levels.assemble({n: getattr(got, n) if got is not None else np.empty((0, *levels.shape))
                              for n in _CHANCE_ARRAYS})
    return ChanceLevels(arrays["mean"], arrays["low"], arrays["high"], int(chance.n_perm),
                        float(chance.confidence), arrays["mc_error"])
