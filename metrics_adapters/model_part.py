"""The interface every swappable model part of a metric shares (VQA backends, question-generating
LMs, chat models): what it reports for the cache key, ``run.json`` and the FLOPs estimate, and its
optional load/unload hooks. One place for the defaults, so the parts cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from .identity import code_identity

__all__ = ["ModelPart"]


class ModelPart:
    """Defaults of a model part; subclasses override what they know.

    ``fingerprint_key`` names the part's kind in :meth:`fingerprint` (``{key: "module:Class",
    **settings()}``), e.g. ``backend`` for VQA backends, ``lm`` for question-generating LMs.
    """

    fingerprint_key = "part"
    #: Bumped whenever what the part computes changes (see :mod:`metrics_adapters.identity`).
    version = "1"

    def settings(self) -> dict[str, Any]:
        """Everything that changes an output (model, revision, decoding, templates); no secrets."""
        return {}

    def fingerprint(self) -> dict[str, Any]:
        cls = type(self)
        return {self.fingerprint_key: f"{cls.__module__}:{cls.__qualname__}", **code_identity(cls),
                **self.settings()}

    def model_ids(self) -> dict[str, Any]:
        """Model ids and revisions, for ``run.json``."""
        return {}

    def hub_models(self) -> tuple[Any, ...]:
        """The hub repositories :meth:`load` reads (:class:`metrics_adapters.hub.HubModel`, keys
        relative to the part's config); the metric holding the part prefixes them. Default: none."""
        return ()

    def n_params(self) -> float | None:
        """Parameter count (for the FLOPs estimate), when known."""
        return None

    def usage(self) -> dict[str, Any]:
        """Calls, tokens and cost so far (API backends); an empty dict when the part counts none."""
        return {}

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:  # noqa: B027 - optional hook
        """Build the client / load the weights (idempotent)."""

    def unload(self) -> None:  # noqa: B027 - optional hook
        """Free the weights."""
