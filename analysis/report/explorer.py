"""The SEG explorer: one self-contained HTML page to browse where a metric fails.

From merged results (:class:`analysis.report.merged.MergedResults`: per-image scores and ``per_seg.csv``)
and the SEG structure, :func:`explorer_data` builds one plain-data record per SEG: its nodes with
error texts, images and scores, a left-to-right layout by error count (``networkx``'s
``multipartite_layout``), its walks with each metric's per-walk rank_m (Spearman, the protocol's
tie rule), the worst walk, and the image pairs each metric orders against the graph's edges.
:func:`explorer_html` embeds that record as JSON in a page whose own small script
(``explorer.js``, shipped as package data) draws three views: SEGs sorted worst first by a
metric's rank_m or sep_m (filters: subset, "metric A fails, metric B passes"), one SEG with its
DAG as inline SVG, and two metrics side by side on one SEG.

Safety: every string from data (prompts, node errors, metric and file names) reaches the page
only inside a ``<script type="application/json">`` block with ``<``, ``>`` and ``&`` written as
JSON ``\\u`` escapes (so no ``</script>`` can end the block), and the script inserts it with
``textContent`` and ``setAttribute`` only, never ``innerHTML``.

Thumbnails are small JPEGs made once per image with Pillow and embedded as ``data:`` URIs,
shrunk until all of them fit ``thumb_budget`` bytes (the TS2 release's 2,840 images stay far
under 50 MB). Without image files the page shows structure and scores only.

This module never imports torch.
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

import numpy as np
import pandas as pd

from seg_data import SEGDataset
from seg_data.result_sets import atomic_write_text
from seg_data.results import KEY_COLUMNS, metric_columns

from ..metametrics.rank import rank_walks
from ..metametrics.walkstats import WalkStats
from ..protocols import PROTOCOLS, Protocol
from ..scores_io import prepare_inputs, read_scores
from ..walks import protocol_walks, walk_count

__all__ = ["ExplorerOutputs", "explorer_data", "explorer_html", "json_for_script", "make_thumbnails",
           "write_explorer", "THUMB_SIDE", "THUMB_BUDGET", "MAX_PAIRS", "MAX_WALKS"]

log = logging.getLogger(__name__)

#: Longest side of a thumbnail in pixels.
THUMB_SIDE = 96
#: Bytes all embedded thumbnails may take (base64 included); over it they are made smaller.
THUMB_BUDGET = 40 * 2**20
#: Walks listed per SEG at most; a SEG with more is drawn without its walks (and a note says so).
MAX_WALKS = 5000
#: Misordered image pairs kept per SEG and metric (the largest score gaps first).
MAX_PAIRS = 30
_JPEG_QUALITY = 70
# Layout of the SVG drawing, in pixels: column spacing, row spacing, node box size.
_COL, _ROW, _NODE_W, _NODE_H, _PAD = 215, 70, 175, 52, 16


@dataclass(frozen=True)
class ExplorerOutputs:
    """What :func:`write_explorer` wrote: the page, its size, SEG and thumbnail counts, notes."""

    html: Path
    n_segs: int
    n_images: int
    n_thumbnails: int
    size_bytes: int
    notes: tuple[str, ...] = ()


def json_for_script(obj) -> str:
    """``obj`` as JSON that is safe inside a ``<script type="application/json">`` element.

    ``<``, ``>`` and ``&`` become ``\\u003c``, ``\\u003e``, ``\\u0026`` (the same string to
    ``JSON.parse``), so no data can close the element or open a tag; non-ASCII is escaped too.
    NaN and infinities become ``null`` (JSON has none).

    Examples
    --------
    >>> json_for_script({"p": "<script>alert(1)</script>"})
    '{"p": "\\\\u003cscript\\\\u003ealert(1)\\\\u003c/script\\\\u003e"}'
    """
    text = json.dumps(_finite(obj), ensure_ascii=True, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _finite(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, np.generic):
        return _finite(obj.item())
    return obj


def make_thumbnails(paths: Mapping[str, Path | str | None], side: int = THUMB_SIDE, budget: int = THUMB_BUDGET,
                    progress: bool = True) -> tuple[dict[str, str], list[str]]:
    """JPEG thumbnails as ``data:`` URIs, made once per image: ``(key -> URI, notes)``.

    Images that are missing or unreadable get none (counted in a note). When the thumbnails
    together exceed ``budget`` bytes they are made again with the side shrunk in proportion
    to the square root of the excess (bytes grow with the area), at least 24 px; if even those
    do not fit, the last ones are left out with a note.
    """
    from PIL import Image, UnidentifiedImageError

    todo = {k: Path(p) for k, p in paths.items() if p is not None and Path(p).is_file()}
    notes = []
    absent = len(paths) - len(todo)
    if absent:
        notes.append(f"{absent} of {len(paths)} image(s) have no file on disk: shown without a thumbnail")
    sources: dict[str, Image.Image] = {}
    bad = []
    from seg_data.progress import tqdm

    for k, p in tqdm(todo.items(), desc="thumbnails", disable=not progress or not todo, leave=False):
        try:
            with Image.open(p) as im:
                im.draft("RGB", (side * 2, side * 2))  # JPEG: decode at a reduced scale, much faster
                small = im.convert("RGB")
                small.thumbnail((side * 2, side * 2))
                sources[k] = small
        except (OSError, UnidentifiedImageError, ValueError) as e:
            bad.append(f"{p} ({type(e).__name__})")
    if bad:
        notes.append(f"{len(bad)} image(s) could not be read, shown without a thumbnail, e.g. {bad[0]}")

    def encode(s: int) -> dict[str, str]:
        out = {}
        for k, im in sources.items():
            t = im.copy()
            t.thumbnail((s, s))
            buf = io.BytesIO()
            t.save(buf, "JPEG", quality=_JPEG_QUALITY, optimize=True)
            out[k] = "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
        return out

    thumbs = encode(side)
    total = sum(map(len, thumbs.values()))
    if total > budget and sources:
        smaller = max(24, int(side * math.sqrt(budget / total) * 0.9))
        log.info("thumbnails: %.1f MB at %d px exceed the %.1f MB budget; making them at %d px",
                 total / 2**20, side, budget / 2**20, smaller)
        thumbs = encode(smaller)
    kept, used = {}, 0
    for k, v in thumbs.items():
        if used + len(v) > budget:
            notes.append(f"thumbnail budget of {budget / 2**20:.0f} MB reached: {len(thumbs) - len(kept)} image(s) "
                         "shown without a thumbnail")
            break
        kept[k] = v
        used += len(v)
    return kept, notes


def _protocol(name: str) -> Protocol:
    if name in PROTOCOLS:
        return PROTOCOLS[name]
    log.info("protocol %r is not a named one (%s): walks drawn as under 'graph'", name, ", ".join(PROTOCOLS))
    return PROTOCOLS["graph"]


def _layout(seg) -> dict[str, tuple[float, float]]:
    """Pixel centres of the nodes: columns left to right by error count (networkx's
    ``multipartite_layout``), nodes of one column top to bottom in label order (1a, 1b, ...;
    networkx orders a layer by set iteration, which is arbitrary)."""
    import networkx as nx

    from seg_data.model import label_sort_key

    g = nx.DiGraph()
    g.add_nodes_from((n, {"level": int(lev)}) for n, lev in zip(seg.labels, seg.levels, strict=True))
    g.add_edges_from(e for e in seg.seg.graph.edges if e[0] in g and e[1] in g)
    pos = nx.multipartite_layout(g, subset_key="level", align="vertical")
    xs = sorted({round(float(p[0]), 9) for p in pos.values()})
    col = {n: xs.index(round(float(p[0]), 9)) for n, p in pos.items()}
    out, used = {}, {}
    for n in sorted(seg.labels, key=label_sort_key):
        i = used[col[n]] = used.get(col[n], -1) + 1
        out[n] = (_PAD + _NODE_W / 2 + col[n] * _COL, _PAD + _NODE_H / 2 + i * _ROW)
    return out


def _seg_values(per_seg: pd.DataFrame | None, protocol: str, metrics: Sequence[str]) -> dict[tuple[str, str], dict]:
    """(metric, meta-metric) -> {seg_id: value} from ``per_seg.csv`` rows of ``protocol``."""
    out: dict[tuple[str, str], dict] = {}
    if per_seg is None:
        return out
    d = per_seg[(per_seg["protocol"] == protocol) & per_seg["metric"].isin(metrics)]
    for (m, k), grp in d.groupby(["metric", "meta_metric"], sort=False):
        out[(str(m), str(k))] = dict(zip(grp["seg_id"].astype(str), grp["value"].astype(float), strict=True))
    return out


def _walk_values(walks: Sequence[Sequence[int]], node_rows: Sequence[np.ndarray], levels: Sequence[int],
                 x: np.ndarray, protocol: Protocol) -> np.ndarray:
    """``(n_metrics, n_walks)`` rank_m of each walk (:func:`analysis.metametrics.rank.rank_walks`)."""
    if not walks:
        return np.zeros((x.shape[1], 0))
    rows = [np.concatenate([node_rows[i] for i in w]) if w else np.zeros(0, np.int64) for w in walks]
    lv = [np.concatenate([np.full(len(node_rows[i]), levels[i]) for i in w]) for w in walks]
    width = max(1, max(len(r) for r in rows))
    out = np.empty((x.shape[1], len(walks)))
    lev = np.zeros((len(walks), width))
    for i, v in enumerate(lv):
        lev[i, :len(v)] = v
    for j in range(x.shape[1]):
        sc = np.full((len(walks), width), np.nan)
        for i, r in enumerate(rows):
            sc[i, :len(r)] = x[r, j]
        out[j] = rank_walks(WalkStats(lev, sc), protocol.tie_method, protocol.degenerate_walk)
    return out


def explorer_data(merged, dataset: SEGDataset | None = None, metrics: Sequence[str] | None = None,
                  protocol: str | None = None, subsets: str = "auto", title: str = "TS2 explorer",
                  images: bool = True, thumb_side: int = THUMB_SIDE, thumb_budget: int = THUMB_BUDGET,
                  progress: bool = True) -> tuple[dict, dict[str, str]]:
    """The page's data and thumbnails (``key -> data URI``) from merged results.

    ``merged`` is a :class:`analysis.report.merged.MergedResults` with per-image ``scores`` (and usually
    ``per_seg``); ``dataset`` gives prompts, node errors and edges (without one, SEGs come from
    the score table's node labels with TS2-convention edges). ``metrics`` (default: all) are
    shown; ``protocol`` (default ``graph`` when computed, else the first) decides the per-SEG
    values read from ``per_seg`` and how walks are built.

    A misordered pair is two images on the two ends of a graph edge (``u -> v``, ``v`` with more
    errors) where the metric scores ``v``'s image strictly higher (after orienting
    lower-is-better metrics); ties are counted separately, never as misordered.

    Raises
    ------
    ValueError
        No per-image scores, an unknown metric, no SEG left to show, a protocol not in ``per_seg``.
    """
    chosen, protocol = _chosen_metrics_and_protocol(merged, metrics, protocol)
    proto = _protocol(protocol)
    inputs, scores = SegScores.of(merged, dataset, chosen, proto, subsets)
    values = _seg_values(merged.per_seg, protocol, chosen)
    meta = [k for k in ("rank", "sep") if any((m, k) in values for m in chosen)]
    files = ImageFiles.from_scores(merged.scores)
    notes = list(inputs.notes)
    segs = [_seg_entry(s, scores, proto, values, meta, files, notes) for s in inputs.structure.segs
            if any(len(r) for r in s.rows)]
    if not segs:
        raise ValueError("no SEG with a scored image to show")
    thumbs: dict[str, str] = {}
    if images:
        thumbs, tnotes = make_thumbnails(files.of_rows(), side=thumb_side, budget=thumb_budget, progress=progress)
        notes += tnotes
    else:
        notes.append("images left out (images=false): structure and scores only")
    _link_thumbnails(segs, thumbs)
    data = {"title": title, "dataset": merged.dataset or getattr(dataset, "name", None), "protocol": protocol,
            "metrics": [{"name": m, "role": merged.role(m), "lower_is_better": m in merged.lower_is_better}
                        for m in chosen],
            "meta_metrics": meta, "subsets": [x for x in dict.fromkeys(s["subset"] for s in segs) if x],
            "segs": segs, "notes": notes, "node_size": [_NODE_W, _NODE_H]}
    return data, thumbs


@dataclass(frozen=True)
class SegScores:
    """The score matrix the explorer draws: per row (image) its file name (``names``), the
    metrics' scores as given (``raw``, shown) and oriented higher-is-better (``oriented``, for
    walks and misordered pairs); one column per metric of ``metrics``."""

    names: list[str]
    raw: np.ndarray
    oriented: np.ndarray
    metrics: list[str]

    @classmethod
    def of(cls, merged, dataset: SEGDataset | None, chosen: list[str], proto: Protocol, subsets: str):
        """``(inputs, scores)``: the prepared inputs of ``merged``'s per-image scores of the
        ``chosen`` metrics under ``proto`` (:func:`analysis.scores_io.prepare_inputs`) and their matrix."""
        lower = [m for m in chosen if m in merged.lower_is_better]
        cols = [c for c in KEY_COLUMNS if c in merged.scores.columns]
        table = read_scores(merged.scores[cols + chosen], lower_is_better=lower)
        inputs = prepare_inputs(table, dataset, subsets=subsets, max_walks=None).for_protocol(proto)
        x = inputs.scores  # oriented: higher is better for every metric
        return inputs, cls(names=_row_file_names(table, dataset), raw=x * np.where([m in lower for m in chosen], -1.0, 1.0),
                           oriented=x, metrics=chosen)


@dataclass
class ImageFiles:
    """Where each image's file is: by file name from the score table's ``image_path`` column,
    and, as SEG entries are built, by score-matrix row (the dataset's record first)."""

    by_file: dict[str, Path | str | None]
    by_row: dict[int, Path | str | None] = field(default_factory=dict)

    @classmethod
    def from_scores(cls, scores: pd.DataFrame) -> ImageFiles:
        if "image_path" not in scores.columns or "file_name" not in scores.columns:
            return cls({})
        return cls({str(f): p for f, p in zip(scores["file_name"], scores["image_path"], strict=True)
                    if isinstance(p, str) and p})

    def note_row(self, row: int, fid: str, rec) -> None:
        """Row ``row`` shows image ``fid``: its file is the dataset record's, else the score table's."""
        self.by_row[row] = rec.path if rec is not None and rec.path is not None else self.by_file.get(fid)

    def of_rows(self) -> dict[str, Path | str | None]:
        """Thumbnail key (the row, as text) -> image file."""
        return {str(r): p for r, p in self.by_row.items()}


def _link_thumbnails(segs: list[dict], thumbs: Mapping[str, str]) -> None:
    """Point each image of ``segs`` at its thumbnail's key (``t``), or None when it has none."""
    for seg in segs:
        for n in seg["nodes"]:
            for im in n["images"]:
                im["t"] = str(im["r"]) if str(im["r"]) in thumbs else None


def _chosen_metrics_and_protocol(merged, metrics: Sequence[str] | None,
                                 protocol: str | None) -> tuple[list[str], str]:
    """The metrics shown and the protocol read, checked against the results (unknown ones raise)."""
    if merged.scores is None:
        raise ValueError("the explorer needs per-image scores (scores.csv, or the score files an analysis read); "
                         "found none in the results")
    have = metric_columns(merged.scores.columns)
    chosen = list(have if not metrics else metrics)
    unknown = [m for m in chosen if m not in have]
    if unknown:
        raise ValueError(f"expected metrics among the score columns {have}, got unknown {unknown}")
    if not chosen:
        raise ValueError("expected at least one metric column in the scores, got none")
    ps = merged.per_seg
    protos = list(dict.fromkeys(ps["protocol"])) if ps is not None else []
    if protocol is None:
        protocol = "graph" if "graph" in protos or not protos else protos[0]
    elif protos and protocol not in protos:
        raise ValueError(f"expected protocol among those in per_seg.csv {protos}, got {protocol!r}")
    return chosen, protocol


def _row_file_names(table, dataset: SEGDataset | None) -> list[str]:
    """The file name of each score-matrix row (a row number in the table when it names none)."""
    frame = table.frame
    # Row r of the score matrix is the r-th table row that prepare_inputs kept (those naming an
    # image of the dataset, when there is one): its file name, and its image file if known.
    if table.has_file_name:
        names = frame["file_name"].astype(str).tolist()
        if dataset is not None:
            known = {im.image_id for s in dataset for _, im in s.iter_images()}
            names = [f for f in names if f in known]
    else:
        names = [f"row {i + 2} of the score table" for i in range(len(frame))]
    return names


def _node_entries(s, scores: SegScores, pos: Mapping[str, tuple[float, float]], files: ImageFiles) -> list[dict]:
    """Each node of SEG ``s``: its label, error count and texts, position, and images with their scores."""
    g = s.seg.graph
    nodes = []
    for i, lbl in enumerate(s.labels):
        by_id = {im.image_id: im for im in s.seg.images(lbl)}
        imgs = []
        for r in map(int, s.rows[i]):
            fid = scores.names[r]
            files.note_row(r, fid, by_id.get(fid))
            imgs.append({"f": fid, "r": r, "s": [float(v) if np.isfinite(v) else None for v in scores.raw[r]]})
        nodes.append({"label": lbl, "level": int(s.levels[i]), "errors": [str(e) for e in g.nodes[lbl].get("errors", ())],
                      "x": pos[lbl][0], "y": pos[lbl][1], "images": imgs})
    return nodes


def _listed_walks(s, proto: Protocol, node_index: Mapping[str, int], notes: list[str]) -> list[list[int]]:
    """The walks of SEG ``s`` as node indices; none (and a note) when there are more than :data:`MAX_WALKS`."""
    n_walks = walk_count(s, proto.walks, proto.root_duplication)
    if n_walks > MAX_WALKS:
        notes.append(f"SEG {s.seg_id}: {n_walks} walks, more than the {MAX_WALKS} the explorer lists; "
                     "drawn without its walks")
        return []
    return [[node_index[n] for n in w] for w in protocol_walks(s, proto.walks, proto.root_duplication)]


def _metric_entry(s, j: int, m: str, walk_values: np.ndarray, edges, scores: SegScores, values: dict,
                  meta: list[str]) -> dict:
    """Metric ``m`` (column ``j``) on SEG ``s``: its per-SEG values, per-walk rank_m, worst walk, misordered pairs."""
    vals = walk_values[j]
    fin = np.flatnonzero(np.isfinite(vals))
    worst = int(fin[np.argmin(vals[fin])]) if len(fin) else None
    return {"values": {k: values.get((m, k), {}).get(s.seg_id) for k in meta},
            "walks": [float(v) for v in vals], "worst": worst,
            **_misordered(edges, s.rows, scores.oriented[:, j])}


def _seg_entry(s, scores: SegScores, proto: Protocol, values: dict, meta: list[str], files: ImageFiles,
               notes: list[str]) -> dict:
    """One SEG's page entry: nodes, edges, walks, per-metric values, and the drawing's size.

    Records each image's file in ``files`` and appends to ``notes`` as it goes.
    """
    node_index = {lbl: i for i, lbl in enumerate(s.labels)}
    pos = _layout(s)
    edges = [[node_index[u], node_index[v], [str(e) for e in d.get("errors", ())]]
             for u, v, d in s.seg.graph.edges(data=True) if u in node_index and v in node_index]
    walks = _listed_walks(s, proto, node_index, notes)
    wv = _walk_values(walks, s.rows, s.levels, scores.oriented, proto)
    per_metric = {m: _metric_entry(s, j, m, wv, edges, scores, values, meta) for j, m in enumerate(scores.metrics)}
    return {"id": s.seg_id, "subset": s.subset, "prompt": s.seg.prompt, "nodes": _node_entries(s, scores, pos, files),
            "edges": [[u, v, e] for u, v, e in edges], "walks": walks, "metrics": per_metric,
            "width": max(p[0] for p in pos.values()) + _NODE_W / 2 + _PAD,
            "height": max(p[1] for p in pos.values()) + _NODE_H / 2 + _PAD}


def _misordered(edges, node_rows, x: np.ndarray) -> dict:
    """Per edge ``[against, ties, pairs]`` and the worst image pairs ``[edge, row_a, row_b]`` (the
    parent's image, the child's), largest score gap first, at most :data:`MAX_PAIRS`."""
    counts, pairs = [], []
    for k, (u, v, _) in enumerate(edges):
        a, b = x[node_rows[u]], x[node_rows[v]]
        ok_a, ok_b = np.isfinite(a), np.isfinite(b)
        gap = b[ok_b][None, :] - a[ok_a][:, None]  # > 0: the child (more errors) scored higher
        counts.append([int((gap > 0).sum()), int((gap == 0).sum()), int(gap.size)])
        ia, ib = np.nonzero(gap > 0)
        ra, rb = node_rows[u][ok_a][ia], node_rows[v][ok_b][ib]
        pairs += [(float(gap[i, j]), k, int(p), int(q)) for i, j, p, q in zip(ia, ib, ra, rb, strict=True)]
    pairs.sort(key=lambda t: -t[0])
    return {"edges": counts, "pairs": [[k, p, q] for _, k, p, q in pairs[:MAX_PAIRS]]}


def _asset(name: str) -> str:
    text = files(__package__).joinpath("assets", name).read_text(encoding="utf-8")
    if "</" in text:  # would end its inline <script>/<style> element early
        raise ValueError(f"analysis/report/assets/{name}: expected no '</' (it would end the inline element), found one")
    return text


def explorer_html(data: dict, thumbs: Mapping[str, str]) -> str:
    """The complete page: CSS and script inline, data and thumbnails as escaped JSON blocks."""
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{html.escape(str(data.get('title', 'TS2 explorer')))}</title>"
            f"<style>{_asset('explorer.css')}</style></head><body>\n"
            "<noscript>The explorer needs JavaScript.</noscript>\n<div id='app'></div>\n"
            f"<script type='application/json' id='ts2-data'>{json_for_script(data)}</script>\n"
            f"<script type='application/json' id='ts2-thumbs'>{json_for_script(dict(thumbs))}</script>\n"
            f"<script>{_asset('explorer.js')}</script>\n</body></html>\n")


def write_explorer(merged, path: str | Path, dataset: SEGDataset | None = None, **kwargs) -> ExplorerOutputs:
    """Build the page (:func:`explorer_data`, :func:`explorer_html`) and write it to ``path``
    atomically (inside a result set when ``path`` is in its stage folder)."""
    data, thumbs = explorer_data(merged, dataset, **kwargs)
    text = explorer_html(data, thumbs)
    p = atomic_write_text(Path(path), text)
    n_images = sum(len(n["images"]) for s in data["segs"] for n in s["nodes"])
    for note in data["notes"]:
        log.info("explorer: %s", note)
    return ExplorerOutputs(p, len(data["segs"]), n_images, len(thumbs), len(text.encode("utf-8")),
                           tuple(data["notes"]))
