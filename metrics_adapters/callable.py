"""A plain Python function as a metric: ``f(images, prompts) -> scores`` through the scoring engine.

A notebook user's metric is a function, not a package with a config::

    def my_metric(images: list[PIL.Image.Image], prompts: list[str]) -> list[float]: ...

:class:`CallableMetric` wraps it so the engine batches it, shows a progress bar, caches its scores
(keyed by ``name``, ``version``, the function's source and, per score, the image's content hash
and the prompt), resumes a killed run from the cache and records the images it fails on.

The function must return one finite float per image, in order. A function that breaks that
contract (a different number of scores, NaN or inf) is a bug, not a failed image: the wrapper
records it (:attr:`CallableMetric.contract_errors`) and :func:`check_contract` turns it into one
``ValueError`` after the run. To fail an image on purpose, raise an exception for it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from .base import Metric, MetricError, ScoreItem
from .identity import callable_identity

__all__ = ["CallableMetric", "CallableContractError", "as_metric", "check_contract"]

log = logging.getLogger(__name__)


class CallableContractError(MetricError):
    """The wrapped function returned something other than one finite float per image."""


class CallableMetric(Metric):
    """A function ``fn(images, prompts) -> sequence of floats`` as a :class:`Metric`.

    Parameters
    ----------
    fn : callable
        Receives a list of RGB ``PIL.Image.Image`` (decoded and size-capped by the engine) and
        the list of their prompts; returns one float per image.
    name : str
        The score column, and part of the cache key.
    version : str
        Part of the cache key: change it to rescore after changing what ``fn`` computes in a way
        its source does not show (a model file it loads, a global it reads).
    higher_is_better : bool
        Direction of the score.
    role : str
        ``metric`` or ``control``.

    Examples
    --------
    >>> m = CallableMetric(lambda images, prompts: [len(p) for p in prompts], name="length")
    >>> m.score_batch([ScoreItem("0", "0", "a.png", "a cat")], [None])
    [5.0]
    """

    version = "1"

    def __init__(self, fn: Callable[[list, list[str]], Sequence[float]], name: str, version: str | int = "0",
                 higher_is_better: bool = True, role: str = "metric") -> None:
        if not callable(fn):
            raise TypeError(f"expected a callable f(images, prompts) -> scores, got {type(fn).__name__}")
        if role not in ("metric", "control"):
            raise ValueError(f"{name}: expected role 'metric' or 'control', got {role!r}")
        super().__init__(name)
        self.fn = fn
        self.function_version = str(version)
        self.higher_is_better = bool(higher_is_better)
        self.role = role
        self._identity = callable_identity(fn)
        self.contract_errors: list[str] = []
        self.calls = 0

    def settings(self) -> dict[str, Any]:
        # The name is in the key too: for a function whose source Python does not keep, name and
        # version are all that tell two functions apart.
        return {**self._identity, "function_name": self.name, "function_version": self.function_version}

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> list[float]:
        if self.contract_errors:
            # A function that broke the contract once is broken: fail the rest of the run at once
            # instead of calling it again item by item (check_contract reports the first error).
            raise CallableContractError(f"{self.name}: not called after an earlier call broke the contract")
        self.calls += 1
        out = self.fn(list(images), [it.prompt for it in items])
        n = len(items)
        try:
            values = [float(v) for v in out]
        except TypeError as e:
            raise self._broken(f"expected a sequence of {n} floats, got {type(out).__name__}") from e
        except ValueError as e:
            raise self._broken(f"expected {n} numbers, got a value that is not one: {e}") from e
        if len(values) != n:
            raise self._broken(f"expected {n} scores for {n} images, got {len(values)}")
        bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
        if bad:
            raise self._broken(f"expected finite scores, got {values[bad[0]]} for the image of prompt "
                               f"{items[bad[0]].prompt!r} ({items[bad[0]].file_name})")
        return values

    def _broken(self, what: str) -> CallableContractError:
        msg = f"{self.name}: {what}"
        self.contract_errors.append(msg)
        return CallableContractError(msg)

    def __repr__(self) -> str:
        return f"CallableMetric({self._identity['function']}, name={self.name!r}, version={self.function_version!r})"


def as_metric(metric: Metric | Callable, *, name: str | None = None, version: str | int | None = None,
              cache: bool = True, higher_is_better: bool = True) -> Metric:
    """``metric`` itself when it is a :class:`Metric`, else the function wrapped in a
    :class:`CallableMetric`.

    Raises
    ------
    ValueError
        A function to be cached without a ``name``: the name keys its cached scores, and a default
        (the function's ``__name__``) would mix two notebooks' ``score`` functions.
    TypeError
        ``metric`` is neither a Metric nor callable.
    """
    if isinstance(metric, Metric):
        if version is not None:
            raise ValueError(f"{metric.name}: version= is for a function; a Metric class keys its code with its "
                             "`version` attribute")
        if name is not None:
            metric.name = str(name)
        return metric
    if not callable(metric):
        raise TypeError(f"expected a Metric or a callable f(images, prompts) -> scores, got {type(metric).__name__}")
    if name is None:
        if cache:
            raise ValueError("expected name='...' to cache the scores of a function (the name and version key "
                             "them), got none; or pass cache=False")
        name = getattr(metric, "__name__", None) or type(metric).__name__
        name = "metric" if name == "<lambda>" else name
    return CallableMetric(metric, name=str(name), version="0" if version is None else version,
                          higher_is_better=higher_is_better)


def check_contract(metric: Metric) -> None:
    """Raise the first contract error of a :class:`CallableMetric` run (no-op for other metrics).

    Raises
    ------
    ValueError
        The function returned the wrong number of scores, or NaN/inf (the first such call named).
    """
    errors = getattr(metric, "contract_errors", None)
    if errors:
        raise ValueError(f"{errors[0]}; a function scored as a metric must return one finite float per "
                         "image, in order (raise an exception for an image it cannot score)")
