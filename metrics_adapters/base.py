"""The one interface every faithfulness metric implements.

A metric turns (prompt, image) pairs into scores. Metadata that decides how a score is read
(direction, range) lives on the class; everything that changes a score goes into
:meth:`Metric.fingerprint`, which keys the score cache.

This module must stay importable without torch: subclasses import heavy packages in
:meth:`Metric.load`. :meth:`Metric.__call__` runs the scoring engine, which this module imports;
the engine takes a metric as a :class:`~metrics_adapters.scorer.Scorer` and never imports this one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from .engine import score_direct
from .identity import code_identity, fingerprint_hash
from .items import MetricError, ScoreItem

__all__ = ["Metric", "ScoreItem", "MetricError", "check_prompt_template"]


class Metric(ABC):
    """Base class of all metrics.

    Class attributes (metadata)
    ---------------------------
    higher_is_better : bool
        Direction of the score (error counts are lower-is-better).
    score_range : tuple[float, float] | None
        Theoretical range of the score, ``None`` if unbounded.
    needs_images : bool
        False for metrics that never look at pixels (replayed answers, text-only controls); the
        engine then scores items whose image files are absent.
    columns : tuple[str, ...] | None
        Names of the score columns when a metric gives more than one (e.g. an LLM judge's
        error count and rating); ``None`` means one column named by ``name``.
    version : str
        Bumped whenever what the class computes changes; it enters :meth:`fingerprint`, so old
        cached scores are not returned for new code. A class defined outside the ts2 packages is
        also keyed by its module file's bytes (:func:`metrics_adapters.identity.code_identity`).
    role : str
        ``"metric"`` (evaluated), or ``"control"`` for a metric built to fail (random scores,
        shuffled inputs, answers without looking, prompt-blind image measures): reports draw
        controls as a floor, never as competitors (see :data:`seg_data.results.ROLES`).

    Parameters
    ----------
    name : str
        Column name of the metric's score in ``scores.csv``.
    """

    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float] | None] = None
    needs_images: ClassVar[bool] = True
    columns: ClassVar[tuple[str, ...] | None] = None
    role: ClassVar[str] = "metric"
    version: ClassVar[str] = "1"
    # Where the metric's config sits in the command's config, for messages naming a key
    # (`metrics.NAME` for an extra metric of `ts2 score`; set by ts2.metric_configs.metrics_from_config).
    config_key: str = "metric"

    def __init__(self, name: str) -> None:
        self.name = str(name)

    # -- identity --------------------------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        """Every setting that changes a score (model id, revision, template, decoding, ...).

        Subclasses extend this; the default has only the class.
        """
        return {}

    def fingerprint(self) -> dict[str, Any]:
        """Class path + code identity + :meth:`settings`: equal fingerprints give equal scores.

        The code identity is the class's :attr:`version` and, for a class defined outside the
        ts2 packages, the hash of its source (:func:`metrics_adapters.identity.code_identity`).
        """
        cls = type(self)
        return {"metric": f"{cls.__module__}:{cls.__qualname__}", **code_identity(cls),
                **self.settings()}

    def fingerprint_hash(self) -> str:
        return fingerprint_hash(self.fingerprint())

    def output_columns(self) -> tuple[str, ...]:
        return tuple(f"{self.name}_{c}" for c in self.columns) if self.columns else (self.name,)

    def directions(self) -> dict[str, bool]:
        """Column -> higher_is_better; multi-column metrics override to declare each."""
        return {c: self.higher_is_better for c in self.output_columns()}

    def roles(self) -> dict[str, str]:
        """Column -> role (:attr:`role` for every column), written into ``run.json``."""
        return {c: self.role for c in (*self.output_columns(), *self.finalize_directions())}

    # -- cost ------------------------------------------------------------------------------------
    def flops_per_image(self) -> float | None:
        """Analytic FLOPs to score one image (``2 x parameters x tokens`` per forward, TS2 A.3)."""
        return None

    def model_ids(self) -> dict[str, Any]:
        """The models behind the scores (hub ids, tags, revisions), for ``run.json``.

        Optional; the default reports none.
        """
        return {}

    def hub_models(self) -> tuple[Any, ...]:
        """The hub repositories :meth:`load` will read, as :class:`metrics_adapters.hub.HubModel`
        (each with the config key that points it at a local copy instead).

        The engine checks them before :meth:`load` imports anything
        (:func:`metrics_adapters.hub.require_models`): an uncached model on an offline machine
        stops the run at once with one line naming the model and the key. Optional; the default
        declares none (a metric without hub weights, or one whose loader checks by itself).
        """
        return ()

    # -- work ------------------------------------------------------------------------------------
    def load(self, device: str = "cpu", dtype: str | None = None) -> None:  # noqa: B027 - optional hook
        """Load models onto ``device``; called once by the engine before the first batch."""

    def unload(self) -> None:  # noqa: B027 - optional hook
        """Free the models (the engine calls this after the metric's last batch). Optional."""

    def preprocess(self, image: Any) -> Any:
        """Per-image work the engine may run in background DataLoader workers. Optional.

        Receives a decoded RGB ``PIL.Image.Image`` and returns what :meth:`score_batch` gets in
        ``images`` (the default: the image itself). Metrics that override it must still accept
        plain PIL images in :meth:`score_batch`, so direct callers need not know about it.
        Called only after :meth:`load`.
        """
        return image

    def pixel_spec(self) -> Any:
        """The model's preprocessing split for the engine's fast path, or ``None``. Optional.

        A :class:`~metrics_adapters.pipeline.PixelSpec`: the engine's workers then resize the
        decoded image to the model's input size (uint8), and the main process converts a whole
        batch to float and normalises it on the device; :meth:`score_batch` receives that float
        tensor ``[B, 3, H, W]``. Return one only if the result matches :meth:`preprocess`
        (within float rounding). Called after :meth:`load`.
        """
        return None

    def truncated_prompts(self, prompts: Sequence[str]) -> list[bool]:
        """For each prompt, whether the text encoder's context cuts it. Optional.

        Metrics with a bounded text context override this (after :meth:`load`) so that the
        engine can count truncated prompts instead of losing them silently.
        """
        return [False] * len(prompts)

    @abstractmethod
    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> Sequence[Sequence[float]] | Sequence[float]:
        """Scores of a batch.

        ``images`` are decoded ``PIL.Image.Image`` objects in RGB (``None`` when the metric does
        not need images). Returns one float per item, or one row of floats per item when
        :attr:`columns` is set. Raise :class:`MetricError` (or any exception) to fail the batch;
        the engine then retries item by item to isolate the bad one.
        """

    # -- optional hooks the engine calls --------------------------------------------------------
    def prepare(self, items: Sequence[ScoreItem]) -> None:  # noqa: B027 - optional hook
        """Called with all the items before :meth:`fingerprint` is taken, so settings that depend
        on the data (e.g. a question file found beside the dataset) enter the cache key."""

    def run_info(self) -> dict[str, Any]:
        """Counters of this run for ``run.json`` (tokens used, API cost, answer-cache hits, ...)."""
        return {}

    def finalize(self, frame):
        """The finished score table (a DataFrame, one row per item) with columns added.

        For scores that need the whole run, e.g. a composite normalised over all images; the
        default adds nothing. Columns added here are declared by :meth:`finalize_directions`.
        """
        return frame

    def finalize_directions(self) -> dict[str, bool]:
        """Column -> higher_is_better of the columns :meth:`finalize` adds."""
        return {}

    # -- direct use -------------------------------------------------------------------------------
    def __call__(self, images: Sequence[Any], prompts: Sequence[str], *, device: str = "auto",
                 batch_size: int | str = "auto", progress: bool = False, max_image_side: int | None = None):
        """Score ``(image, prompt)`` pairs directly, outside any dataset: ``m(images=[...], prompts=[...])``.

        Runs the scoring engine (:func:`metrics_adapters.engine.score_direct`, which runs
        :func:`~metrics_adapters.engine.score_metric`: the same decode
        policy, precision, batching and failure isolation as ``ts2 score``) with an in-memory
        cache, and keeps the model loaded for the next call on the same device (the first call
        loads it).

        Parameters
        ----------
        images : sequence of PIL.Image.Image or paths
            In-memory images are written to a temporary folder as PNG (lossless) and read back
            through the engine's decoder, so they score as the same image file would.
        prompts : sequence of str
            One per image.
        device, batch_size, progress, max_image_side
            As in :class:`metrics_adapters.engine.EngineSettings` (``max_image_side`` None: its default).

        Returns
        -------
        numpy.ndarray
            Shape ``(n,)``, or ``(n, len(columns))`` for a metric with several columns.

        Raises
        ------
        ValueError
            Images and prompts of different lengths, or an item the metric could not score
            (the failed items and the first reason named).
        """
        return score_direct(self, images, prompts, device=device, batch_size=batch_size, progress=progress,
                            max_image_side=max_image_side)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, {self.settings()})"


def check_prompt_template(name: str, template: str) -> str:
    """``template`` as a string if it formats with ``{prompt}`` alone (text templates of metrics).

    Raises
    ------
    ValueError
        If ``{prompt}`` is missing or the template has other fields, naming the metric ``name``.
    """
    template = str(template)
    if "{prompt}" not in template:
        raise ValueError(f"{name}: expected a template containing '{{prompt}}', got {template!r}")
    try:
        template.format(prompt="x")
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(f"{name}: template {template!r} has fields other than {{prompt}}: {e}") from e
    return template
