"""``ts2 explore results=DIR [metrics=[a,b]] [out=FILE]``: the interactive SEG explorer.

Reads result folders the way ``ts2 report`` does (:func:`analysis.report.result_dirs.merged_results`:
per-image scores, ``per_seg.csv``; values missing for score-only folders are computed, without a
bootstrap) and writes one self-contained HTML page (:mod:`analysis.report.explorer`): ``explorer.html``
in ``output_dir`` as a result set, or the file ``out=``. The SEG structure (prompts, node errors,
edges, image files) comes from ``path=``/``dataset=``, else from the dataset the run recorded in
its ``run.json``, else from the score table's node labels. Exit code 0, or 2 for bad input.

Never imports torch.
"""

from __future__ import annotations

import logging
import sys

from omegaconf import DictConfig

from ts2.common import as_list, load_dataset, output_dir

log = logging.getLogger(__name__)


def explore_from_config(cfg: DictConfig):
    """The explorer a ``ts2 explore`` config asks for (:func:`ts2.result_views.write_explorer_page`), with the
    dataset given (``path=``/``dataset=``), else the one the results recorded. Returns ``(path written,
    analysis.report.explorer.ExplorerOutputs)``."""
    from analysis.report.settings import ExploreSettings
    from ts2.result_views import write_explorer_page

    results = as_list(cfg.get("results"))  # none: write_explorer_page says what it expected
    dataset = load_dataset(cfg) if cfg.get("path") or cfg.get("dataset") is not None else None
    out = cfg.get("out")
    return write_explorer_page(results, ExploreSettings.from_mapping(cfg), dataset,
                               image_roots=as_list(cfg.get("image_roots")), out=str(out) if out else None,
                               output_dir=output_dir(cfg))


def main(cfg: DictConfig) -> int:
    try:
        written, res = explore_from_config(cfg)
    except (FileNotFoundError, ValueError) as e:
        log.error("%s", e)
        return 2
    sys.stdout.write(f"explorer: {written} ({res.n_segs} SEGs, {res.n_images} images, {res.n_thumbnails} thumbnails, "
                     f"{res.size_bytes / 2**20:.1f} MB)\n")
    return 0
