"""``ts2 data info | validate | make-synthetic | from-labels``."""

from __future__ import annotations

import json
import logging
import sys
from collections import Counter
from contextlib import contextmanager

from omegaconf import DictConfig

from ts2.common import load_dataset

log = logging.getLogger(__name__)


@contextmanager
def _problems_printed_by_us():
    """While ``data info``/``validate`` load a dataset, the loader's per-problem warnings are held
    back: both commands print every problem themselves (it was shown twice)."""
    validate_log = logging.getLogger("seg_data.validate")
    level = validate_log.level
    validate_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        validate_log.setLevel(level)


def _load(cfg: DictConfig):
    with _problems_printed_by_us():
        return load_dataset(cfg)


def _print_problems(lines: list[tuple[str, str, str]], n_segs: int | None, max_listed: int) -> int:
    """Print problems ``(severity, code, text)``, at most ``max_listed`` per code (0: all), then a
    summary line with the counts per severity and code. Returns the number of errors."""
    shown: Counter = Counter()
    for _sev, code, text in lines:
        shown[code] += 1
        if not max_listed or shown[code] <= max_listed:
            sys.stdout.write(f"{text}\n")
    for code, n in shown.items():
        if max_listed and n > max_listed:
            sys.stdout.write(f"... and {n - max_listed} more [{code}] (max_listed={max_listed}; 0 lists all)\n")
    n_err = sum(sev == "error" for sev, _, _ in lines)
    by = {sev: Counter(code for s, code, _ in lines if s == sev) for sev in ("error", "warning")}

    def part(sev: str, n: int) -> str:
        codes = ", ".join(f"{c}: {k}" for c, k in by[sev].most_common())
        return f"{n} {sev}(s)" + (f" ({codes})" if codes else "")

    segs = f"{n_segs} SEGs, " if n_segs is not None else ""
    sys.stdout.write(("INVALID" if n_err else "OK") + f": {segs}{part('error', n_err)}, "
                     f"{part('warning', len(lines) - n_err)}\n")
    return n_err


def main(cfg: DictConfig) -> int:
    return ACTIONS[cfg.action](cfg)


def _max_walks(cfg: DictConfig) -> int | None:
    from seg_data.graph import MAX_WALKS

    v = cfg.get("max_walks", MAX_WALKS)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"expected max_walks to be a positive integer or null, got {v!r}")
    return v


def info(cfg: DictConfig) -> int:
    from seg_data.summary import format_summary, summarize

    try:
        ds = _load(cfg)
    except (FileNotFoundError, ValueError) as e:  # unreadable file, missing columns, invalid SEGs
        log.error("%s", e)
        return 2
    try:
        summary = summarize(ds, check_images=bool(cfg.check_images), max_walks=_max_walks(cfg))
    except ValueError as e:
        log.error("%s", e)
        return 2
    if cfg.json:
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        sys.stdout.write(format_summary(summary) + "\n")
    return 0


def validate(cfg: DictConfig) -> int:
    from seg_data import SEGValidationError
    from seg_data.summary import summarize

    max_listed = int(cfg.get("max_listed", 0) or 0)
    try:
        ds = _load(cfg)
    except SEGValidationError as e:
        problems = [(p.severity, p.code, str(p)) for p in e.problems]
        _print_problems(problems, None, max_listed)
        return 1
    except (FileNotFoundError, ValueError) as e:  # not even loadable: missing file or columns, bad id
        log.error("%s", e)
        sys.stdout.write("INVALID: could not load the dataset\n")
        return 2
    try:
        found = summarize(ds, check_images=bool(cfg.check_images), max_walks=_max_walks(cfg))["problems"]
    except ValueError as e:
        log.error("%s", e)
        return 2
    problems = []
    for p in found:
        node = f", node {p['node']}" if p["node"] is not None else ""
        problems.append((p["severity"], p["code"], f"{p['severity']}: SEG {p['seg_id']}{node}: {p['message']} [{p['code']}]"))
    return 1 if _print_problems(problems, len(ds), max_listed) else 0


def make_synthetic(cfg: DictConfig) -> int:
    from seg_data.synthetic import make_synthetic as build

    if not cfg.out:
        log.error("expected out=DIR for make-synthetic, got none")
        return 2
    if not isinstance(cfg.images, bool):
        log.error("make-synthetic: expected images=true or false, got %r (a folder is from-labels' images=)", cfg.images)
        return 2
    path = build(out=cfg.out, n_segs=int(cfg.n_segs), seed=int(cfg.seed), images=bool(cfg.images),
                 images_per_node=cfg.get("images_per_node"))
    sys.stdout.write(f"wrote {path}\n")
    return 0


def from_labels(cfg: DictConfig) -> int:
    """SEGs from fine-grained human labels (seg_data.labels; the rule in docs/labels.md)."""
    from seg_data.labels import LabelFormatError, LabelSettings
    from seg_data.labels import from_labels as build

    if not cfg.out:
        log.error("expected out=DIR for from-labels (a new or empty folder), got none")
        return 2
    images = cfg.images
    if images is True:
        log.error("expected images=DIR for from-labels (the folder the label file's image paths are relative "
                  "to), got none; images=false builds the structure only (no scoring)")
        return 2
    try:
        settings = LabelSettings(fail_below=float(cfg.fail_below), min_raters=int(cfg.min_raters),
                                 subset_by=str(cfg.subset_by), group_by=str(cfg.group_by))
        ds, summary = build(str(cfg.format), cfg.labels, cfg.out, images=None if images is False else images,
                            settings=settings)
    except (LabelFormatError, FileExistsError, FileNotFoundError, ValueError, RuntimeError) as e:
        log.error("%s", e)
        return 2
    for line in summary.lines():
        sys.stdout.write(line + "\n")
    sys.stdout.write(f"wrote {len(ds)} SEGs to {cfg.out} (use path={cfg.out} with any ts2 command)\n")
    return 0


ACTIONS = {"info": info, "validate": validate, "make-synthetic": make_synthetic, "from-labels": from_labels}
