"""The validated wide score table every reader of ``analysis`` returns (:mod:`analysis.scores_io`) and the
joins take (:mod:`analysis.inputs`, :mod:`analysis.reference`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .protocols import failure_cells

__all__ = ["ScoreTable"]


@dataclass(frozen=True)
class ScoreTable:
    """A validated wide score table.

    ``frame`` has string columns ``seg_id``, ``node`` (and ``file_name``/``subset`` when
    given) and one float column per metric; ``lower_is_better`` names metrics whose scores
    fall as images get better (their scores are negated before analysis).
    """

    frame: pd.DataFrame
    metrics: tuple[str, ...]
    lower_is_better: frozenset[str] = frozenset()
    source: str = "<frame>"
    notes: tuple[str, ...] = ()  # what the reader changed or left out (failure codes, ignored columns)
    failure_codes: dict[str, tuple[float, ...]] = field(default_factory=dict)  # metric -> its failure codes

    def failure_mask(self) -> np.ndarray:
        """``(n_rows, n_metrics)``: True where a cell holds its metric's failure code (as written)."""
        x = self.frame[list(self.metrics)].to_numpy(dtype=float)
        out = np.zeros(x.shape, dtype=bool)
        for j, m in enumerate(self.metrics):
            out[:, j] = failure_cells(x[:, j], self.failure_codes.get(m, ()))
        return out

    @property
    def has_file_name(self) -> bool:
        return "file_name" in self.frame.columns

    def oriented(self) -> np.ndarray:
        """``(n_rows, n_metrics)`` scores, lower-is-better columns negated: higher is better for all."""
        x = self.frame[list(self.metrics)].to_numpy(dtype=float, copy=True)
        for j, m in enumerate(self.metrics):
            if m in self.lower_is_better:
                x[:, j] = -x[:, j]
        return x
