"""``ts2 data info | validate | make-synthetic``."""

from __future__ import annotations

import json
import logging
import sys

from omegaconf import DictConfig

from ts2.common import load_dataset

log = logging.getLogger(__name__)


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
        ds = load_dataset(cfg)
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

    try:
        ds = load_dataset(cfg)
    except SEGValidationError as e:
        for p in e.problems:
            sys.stdout.write(f"{p}\n")
        n = sum(p.severity == "error" for p in e.problems)
        sys.stdout.write(f"INVALID: {n} error(s)\n")
        return 1
    except (FileNotFoundError, ValueError) as e:  # not even loadable: missing file or columns, bad id
        log.error("%s", e)
        sys.stdout.write("INVALID: could not load the dataset\n")
        return 2
    try:
        problems = summarize(ds, check_images=bool(cfg.check_images), max_walks=_max_walks(cfg))["problems"]
    except ValueError as e:
        log.error("%s", e)
        return 2
    for p in problems:
        node = f", node {p['node']}" if p["node"] is not None else ""
        sys.stdout.write(f"{p['severity']}: SEG {p['seg_id']}{node}: {p['message']} [{p['code']}]\n")
    n_err = sum(p["severity"] == "error" for p in problems)
    sys.stdout.write(("INVALID" if n_err else "OK") + f": {len(ds)} SEGs, {n_err} error(s), "
                     f"{len(problems) - n_err} warning(s)\n")
    return 1 if n_err else 0


def make_synthetic(cfg: DictConfig) -> int:
    from seg_data.synthetic import make_synthetic as build

    if not cfg.out:
        log.error("expected out=DIR for make-synthetic, got none")
        return 2
    path = build(out=cfg.out, n_segs=int(cfg.n_segs), seed=int(cfg.seed), images=bool(cfg.images),
                 images_per_node=cfg.get("images_per_node"))
    sys.stdout.write(f"wrote {path}\n")
    return 0


ACTIONS = {"info": info, "validate": validate, "make-synthetic": make_synthetic}
