"""The metric catalogue: every registered metric with its family, direction, range, role and paper.

Read from the classes' metadata (``higher_is_better``, ``score_range``, ``needs_images``,
``role``, ``paper``, ``family``), importing each metric's module (light: models load only in
:meth:`Metric.load`). A class without ``family`` gets its sub-package's name (``embedding``,
``qa``, ``judges``, ...); without ``role``, ``"metric"``; without ``paper``, none (controls and
ts2's own constructions). ``ts2 score list_metrics=true`` prints :func:`format_catalog`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .registry import METRICS, get_metric_class

__all__ = ["MetricInfo", "describe_metrics", "format_catalog"]


@dataclass(frozen=True)
class MetricInfo:
    """One registry entry. ``error`` is set (and the rest ``None``) when its class cannot be imported."""

    name: str
    target: str
    family: str | None = None
    higher_is_better: bool | None = None
    score_range: tuple[float, float] | None = None
    role: str | None = None
    paper: str | None = None
    needs_images: bool | None = None
    error: str | None = None

    @property
    def direction(self) -> str:
        return "?" if self.higher_is_better is None else ("higher" if self.higher_is_better else "lower")


def _family(cls: type) -> str:
    fam = getattr(cls, "family", None)
    if fam:
        return str(fam)
    parts = cls.__module__.split(".")
    # metrics_adapters.<family>.<module>; top-level modules (composite) name themselves
    return parts[1] if len(parts) > 2 else parts[-1]


def describe_metrics() -> list[MetricInfo]:
    """One :class:`MetricInfo` per registered metric, sorted by name."""
    out = []
    for name, target in METRICS.items():
        try:
            cls = get_metric_class(name)
        except (ImportError, TypeError) as e:
            out.append(MetricInfo(name=name, target=target, error=str(e)))
            continue
        rng = cls.score_range
        out.append(MetricInfo(
            name=name, target=target, family=_family(cls), higher_is_better=bool(cls.higher_is_better),
            score_range=None if rng is None else (float(rng[0]), float(rng[1])),
            role=str(getattr(cls, "role", "metric")), paper=getattr(cls, "paper", None),
            needs_images=bool(cls.needs_images)))
    return out


def format_catalog(infos: list[MetricInfo]) -> str:
    """A fixed-width table: name, family, role, direction, range, paper."""
    head = ("name", "family", "role", "better", "range", "paper")
    rows = []
    for i in infos:
        if i.error is not None:
            rows.append((i.name, "-", "-", "-", "-", f"unavailable: {i.error}"))
            continue
        rng = "unbounded" if i.score_range is None else f"[{i.score_range[0]:g}, {i.score_range[1]:g}]"
        rows.append((i.name, i.family, i.role, i.direction, rng, i.paper or "-"))
    widths = [max(len(r[k]) for r in [head, *rows]) for k in range(len(head) - 1)]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
                     for r in [head, *rows])
