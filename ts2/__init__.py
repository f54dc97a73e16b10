"""ts2: validate text-to-image faithfulness metrics against T2IScoreScore semantic error graphs.

From Python (see docs/python.md)::

    import ts2
    ds = ts2.load_dataset("mini")                                    # SEGs; ds.to_frame(): one row per image
    scores = ts2.score(my_metric, ds, name="mine", version="1")      # f(images, prompts) -> floats
    a = ts2.analyze(scores, ds, bootstrap=200)                       # a.metametrics, a.compare("mine", "x")
    a.to_report("outputs/mine")                                      # what ts2 report writes

``load_dataset``, ``load_metric``, ``score``, ``analyze``, ``report``, ``reproduce``, ``human`` and
``from_labels`` (SEGs from fine-grained human labels, docs/labels.md) are imported on first use (module ``__getattr__``), so ``import ts2`` loads neither torch nor
pandas nor Hydra.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

# name -> module defining it; nothing is imported until asked for.
_API = {
    "load_dataset": "ts2.api",
    "load_metric": "ts2.api",
    "score": "ts2.api",
    "analyze": "ts2.api",
    "report": "ts2.api",
    "explore": "ts2.api",
    "reproduce": "ts2.api",
    "human": "ts2.api",
    "from_labels": "seg_data.labels",
    "Analysis": "analysis.session",
    "Metric": "metrics_adapters.base",
    "SEGDataset": "seg_data.model",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(import_module(_API[name]), name)
    raise AttributeError(f"module 'ts2' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
