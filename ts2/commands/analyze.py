"""``ts2 analyze scores=FILE [dataset=... | path=DIR] [protocol=paper|graph] [output_dir=DIR]``.

Writes ``metametrics.csv``, ``per_seg.csv``, ``table.md/.tex/.csv``, ``analysis.json``,
``verdict.csv`` (:mod:`analysis.verdict`) and, when asked, ``compare.csv`` / ``ranking.csv`` /
``pairs.csv`` into ``output_dir``, and prints a short summary ending with one verdict line per
metric under evaluation. The work is :func:`analysis.session.run_analysis` (also behind
``ts2.analyze``); this handler parses the config, calls it and prints. ``human=SET`` (or a list)
hands over to :mod:`ts2.commands.analyze_human`; with ``scores=`` too, the human sets are
analysed after the SEG view, into ``<output_dir>/human``. Imports neither torch nor :mod:`metrics_adapters`.
"""

from __future__ import annotations

import logging
import sys

from omegaconf import DictConfig, OmegaConf

from ts2.common import output_dir

log = logging.getLogger(__name__)


def _protocols(cfg: DictConfig) -> list | None:
    """The protocol named by the ``protocol`` group when the command line or ``ts2.analyze`` sets
    it (``protocol=graph``, ``protocol.tie_method=min``): that one protocol, configured, replaces
    the ``protocols`` list of ``conf/analysis/default.yaml``. None when the group is left alone."""
    if cfg.get("protocol") is None or not _sets_protocol_group(cfg):
        return None
    proto = OmegaConf.to_container(cfg.protocol, resolve=True)
    if isinstance(proto, dict):
        from hydra.utils import instantiate

        return [instantiate(cfg.protocol)]
    return [proto]


def _sets_protocol_group(cfg: DictConfig) -> bool:
    """Whether the overrides choose or change the ``protocol`` group (not ``protocols=``)."""
    task = None
    if cfg.get("hydra") is not None:  # a config composed by ts2.analyze / precheck keeps its hydra node
        task = cfg.hydra.overrides.task
    else:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            task = HydraConfig.get().overrides.task
    keys = [str(o).lstrip("+~").split("=", 1)[0] for o in task or ()]
    return any(k == "protocol" or k.startswith("protocol.") for k in keys)


def _list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _reference(cfg: DictConfig):
    """``reference=``: ``auto`` (default: the paper's released scores when they lie in the dataset's
    folder, resolved by :func:`analysis.session.run_analysis`), a file, or none."""
    from pathlib import Path

    ref = cfg.get("reference", None)
    if ref in (None, "", "none", "null"):
        return None
    return "auto" if ref == "auto" else Path(str(ref))


def settings_from_config(cfg: DictConfig):
    """The :class:`analysis.settings.AnalysisSettings` of an analyze config (``conf/analysis/
    default.yaml``; a ``protocol=`` group choice replaces ``protocols``, see :func:`_protocols`)."""
    from analysis.settings import AnalysisSettings

    protocols = _protocols(cfg)
    return AnalysisSettings.from_config(cfg, **({} if protocols is None else {"protocols": protocols}))


def analysis_from_config(cfg: DictConfig, scores, dataset=None):
    """The typed objects of an analyze config, handed to :func:`analysis.session.run_analysis` (the
    function ``ts2.analyze`` calls too): :class:`~analysis.settings.AnalysisSettings`,
    :class:`~analysis.settings.ComparisonSettings`, the metrics, the reference, progress and the store."""
    from analysis.session import run_analysis
    from analysis.settings import ComparisonSettings

    return run_analysis(scores, dataset, settings_from_config(cfg), ComparisonSettings.from_config(cfg),
                        metrics=_list(cfg.get("metrics")) or None, reference=_reference(cfg),
                        progress=bool(cfg.get("progress", True)), store=bool(cfg.get("store", True)))


def main(cfg: DictConfig) -> int:
    if cfg.get("human") and not cfg.get("scores"):
        from ts2.commands.analyze_human import human_main

        return human_main(cfg)
    if not cfg.get("scores"):
        log.error("expected scores=FILE (a score table: seg_id, node, [file_name], one column per metric), got none")
        return 2
    from seg_data import SEGValidationError
    from seg_data.gcpause import gc_frozen

    out = output_dir(cfg)
    try:
        analysis = _analyse(cfg)
    except (FileNotFoundError, ValueError, KeyError, SEGValidationError, RuntimeError) as e:
        log.error("%s", e)
        return 2
    with gc_frozen():
        analysis.write(out)
    for note in analysis.result.notes:
        log.warning("%s", note)
    sys.stdout.write(_printed(analysis, out))
    if cfg.get("human"):  # both views in one call: the human sets beside, in <output_dir>/human
        return _human_beside(cfg, out)
    return 0


def _analyse(cfg: DictConfig):
    """The SEG view's analysis of ``cfg.scores`` (with the dataset when one is given); a wrong ``human=`` entry
    fails first, before the work."""
    from seg_data.gcpause import gc_frozen

    if cfg.get("human"):
        from seg_data.human import resolve_human
        from ts2.human_sets import human_entries

        for entry in human_entries(cfg.get("human")):
            resolve_human(entry)
    dataset = None
    if cfg.get("path") or cfg.get("dataset") is not None:
        from ts2.common import load_dataset

        dataset = load_dataset(cfg)
    # The dataset (millions of objects at 100k images) lives through the analysis and the
    # writing: the collector's passes need not walk it again and again.
    with gc_frozen():
        return analysis_from_config(cfg, str(cfg.scores), dataset)


def _printed(analysis, out) -> str:
    """What ``ts2 analyze`` prints: missing scores, the summary, the files written and how to read them in a
    browser, and last one verdict line per metric under evaluation."""
    missing = [n for r in analysis.result.protocols.values() for n in r.missing]
    # on stdout too: a blanked column changes the numbers below without an error
    text = "missing scores:\n" + "".join(f"  {n}\n" for n in missing) if missing else ""
    text += analysis.summary(verdict=False)
    text += (f"\nwrote {out}/metametrics.csv, per_seg.csv, table.md|tex|csv"
             + "".join(f", {k}.csv" for k in analysis.extra) + "\n"
             + f"to read them in a browser: ts2 report results={out} (report.html: tables, figures, verdict, "
             f"explorer) or ts2 explore results={out} (the SEG explorer alone)\n")
    return text + analysis.verdict_text(above=text)


def _human_beside(cfg: DictConfig, out) -> int:
    from ts2.commands.analyze_human import human_main

    human_cfg = OmegaConf.merge(cfg, {"output_dir": str(out / "human")})
    rc = human_main(human_cfg)
    if rc == 0:
        sys.stdout.write(f"both views: ts2 report results={out} human={out / 'human'}\n")
    return rc
