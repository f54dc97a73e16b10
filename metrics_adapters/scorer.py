"""What the scoring engine needs of a metric: the :class:`Scorer` protocol.

The engine (:mod:`.engine`), its batch loop (:mod:`.batch_loop`), its input pipeline
(:mod:`.pipeline`) and its output writer (:mod:`.outputs`) take any object with these members;
:class:`metrics_adapters.base.Metric` is the one class that implements them (structurally: it does
not name this protocol). So imports run one way: ``base`` (whose ``Metric.__call__`` runs the
engine) -> ``engine`` -> ``scorer``/``items``, and nothing on the engine's side imports the
Metric class (a contract in ``pyproject.toml``'s ``[tool.importlinter]``).

This module imports nothing of the package but :mod:`.items`; the meaning of each member is
documented on :class:`~metrics_adapters.base.Metric`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from .items import ScoreItem

__all__ = ["Scorer"]


@runtime_checkable
class Scorer(Protocol):
    """A metric as the engine drives it: identity, columns, cost, load/score/unload and hooks.

    Data members are read-only properties here: a class attribute (``needs_images``), an instance
    attribute (``name``) or a property implements each.
    """

    # -- identity and columns -------------------------------------------------------------------
    @property
    def name(self) -> str: ...

    @property
    def needs_images(self) -> bool: ...

    @property
    def score_range(self) -> tuple[float, float] | None: ...

    @property
    def columns(self) -> tuple[str, ...] | None: ...

    @property
    def config_key(self) -> str: ...

    def fingerprint(self) -> dict[str, Any]: ...

    def output_columns(self) -> tuple[str, ...]: ...

    def directions(self) -> dict[str, bool]: ...

    def roles(self) -> dict[str, str]: ...

    # -- cost and models ------------------------------------------------------------------------
    def flops_per_image(self) -> float | None: ...

    def model_ids(self) -> dict[str, Any]: ...

    def hub_models(self) -> tuple[Any, ...]: ...

    # -- work -----------------------------------------------------------------------------------
    def prepare(self, items: Sequence[ScoreItem]) -> None: ...

    def load(self, device: str = "cpu", dtype: str | None = None) -> None: ...

    def unload(self) -> None: ...

    def preprocess(self, image: Any) -> Any: ...

    def pixel_spec(self) -> Any: ...

    def truncated_prompts(self, prompts: Sequence[str]) -> list[bool]: ...

    def score_batch(self, items: Sequence[ScoreItem],
                    images: Sequence[Any]) -> Sequence[Sequence[float]] | Sequence[float]: ...

    # -- after the run --------------------------------------------------------------------------
    def run_info(self) -> dict[str, Any]: ...

    def finalize(self, frame: Any) -> Any: ...

    def finalize_directions(self) -> dict[str, bool]: ...
