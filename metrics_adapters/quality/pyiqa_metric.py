"""No-reference image quality models of the ``pyiqa`` toolbox as metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..base import Metric, ScoreItem

__all__ = ["PyIQAMetric"]


class PyIQAMetric(Metric):
    """Scores from ``pyiqa.create_metric(model)`` (a no-reference IQA model).

    Parameters
    ----------
    name : str
    model : str
        A pyiqa metric name (``maniqa``, ``musiq``, ``clipiqa``, ``brisque``, ``niqe``, ...).
    lower_better : bool, optional
        Direction; ``None`` takes pyiqa's own ``lower_better`` for the model once loaded
        (``True`` for BRISQUE/NIQE). Give it explicitly when the direction must be known before
        loading.
    max_side : int, optional
        Downscale larger images first (IQA transformers are slow on big inputs).

    Notes
    -----
    pyiqa downloads weights from the internet on first use (into its cache); offline, loading
    fails with pyiqa's error. Install with ``pip install ts2[iqa]``.
    """

    paper = "Chen and Mo 2022, IQA-PyTorch (pyiqa); the paper of the chosen model"

    higher_is_better = True
    role = "control"  # prompt-blind image quality: a floor for faithfulness, not a competitor
    needs_images = True

    def __init__(self, name: str = "iqa", model: str = "maniqa", lower_better: bool | None = None,
                 max_side: int | None = None) -> None:
        super().__init__(name)
        self.model = str(model)
        self.lower_better = lower_better
        if lower_better is not None:
            self.higher_is_better = not bool(lower_better)
        self.max_side = None if max_side is None else int(max_side)
        self._net = None
        self.device = "cpu"

    def settings(self) -> dict[str, Any]:
        try:
            from importlib.metadata import version

            v = version("pyiqa")
        except Exception:  # not installed: the fingerprint still names the model
            v = None
        return {"model": self.model, "max_side": self.max_side, "pyiqa": v}

    def model_ids(self) -> dict[str, Any]:
        return {"iqa_model": f"pyiqa:{self.model}"}

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        try:
            import pyiqa
        except ImportError as e:
            raise ImportError("quality=pyiqa needs the pyiqa package: pip install 'ts2[iqa]'") from e
        import torch

        self._net = pyiqa.create_metric(self.model, device=torch.device(device), as_loss=False)
        self.device = device
        if self.lower_better is None:
            self.higher_is_better = not bool(getattr(self._net, "lower_better", False))

    def unload(self) -> None:
        self._net = None

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> list[float]:
        import torch

        if self._net is None:
            self.load(self.device)
        out = []
        for im in images:  # one at a time: images differ in size and pyiqa models take any size
            im = im.convert("RGB")
            if self.max_side and max(im.size) > self.max_side:
                im = im.copy()
                im.thumbnail((self.max_side, self.max_side))
            x = torch.from_numpy(np.asarray(im, dtype=np.float32) / 255.0).permute(2, 0, 1)[None].to(self.device)
            with torch.inference_mode():
                y = self._net(x)
            out.append(float(torch.as_tensor(y).flatten()[0]))
        return out
