"""Checking a prompt's requirements against detections (pure functions, no models).

For each object ``i`` of the :class:`~metrics_adapters.geneval.parser.PromptSpec`
(name ``n``, colour ``c``, count ``k``) the requirements are

``present``   at least one detection labelled ``n``;
``colour``    (when ``c`` is given) at least one detection labelled ``n`` of colour ``c``;
``count``     the number of detections labelled ``n`` (and of colour ``c`` when given) is
              exactly ``k`` -- when the prompt states the number, or always with
              ``article_count="exact"`` (so "a red circle" asks for one); with
              ``article_count="at_least"`` (GenEval's reading of "a"), an unstated count asks for
              at least ``k`` (no requirement when ``k = 1``);

and for a relation between objects 0 and 1, ``position``: every pair (a, b) of their matching
detections satisfies it by GenEval's rule (appendix C.3) with margin ``c``: "a left of b" iff
``x_a < x_b - c (w_a + w_b)`` on box centres (likewise right/above/below with y growing down).
With no matching detection on either side the position fails.

The score is the fraction of requirements met (GenEval itself reports all-or-nothing; that is
``score == 1``). Detections below ``count_threshold`` are ignored for counting, as GenEval raises
the detector threshold for its counting task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .detectors import Detection
from .parser import ObjectSpec, PromptSpec

__all__ = ["Check", "check_requirements", "fraction_met", "relation_holds"]


@dataclass(frozen=True)
class Check:
    """One requirement and whether it was met, with what was found (for answers.csv)."""

    kind: str       # present | colour | count | position
    target: str     # e.g. "2 red circle(s)" or "circle left of square"
    ok: bool
    found: str = ""


def relation_holds(a: Detection, b: Detection, relation: str, margin: float = 0.1) -> bool:
    """Whether ``a`` is ``relation`` ``b`` (GenEval's offset rule on box centres).

    Examples
    --------
    >>> a = Detection("x", (0, 0, 10, 10)); b = Detection("y", (20, 0, 30, 10))
    >>> relation_holds(a, b, "left of"), relation_holds(a, b, "right of"), relation_holds(a, b, "above")
    (True, False, False)
    """
    (xa, ya), (xb, yb) = a.centre, b.centre
    (wa, ha), (wb, hb) = a.size, b.size
    if relation == "left of":
        return xa < xb - margin * (wa + wb)
    if relation == "right of":
        return xa > xb + margin * (wa + wb)
    if relation == "above":
        return ya < yb - margin * (ha + hb)
    if relation == "below":
        return ya > yb + margin * (ha + hb)
    raise ValueError(f"expected a relation in ('left of', 'right of', 'above', 'below'), got {relation!r}")


def check_requirements(spec: PromptSpec, detections: Sequence[Detection], article_count: str = "exact",
                       position_margin: float = 0.1, count_threshold: float = 0.0) -> list[Check]:
    """All requirements of ``spec`` checked against ``detections`` (see the module docstring)."""
    if article_count not in ("exact", "at_least"):
        raise ValueError(f"expected article_count 'exact' or 'at_least', got {article_count!r}")
    checks: list[Check] = []
    matching: list[list[Detection]] = []
    for o in spec.objects:
        bound, object_checks = _object_checks(o, detections, article_count, count_threshold)
        matching.append(bound)
        checks.extend(object_checks)
    if spec.relation is not None:
        checks.append(_position_check(spec, matching[0], matching[1], position_margin))
    return checks


def _object_checks(o: ObjectSpec, detections: Sequence[Detection], article_count: str,
                   count_threshold: float) -> tuple[list[Detection], list[Check]]:
    """One object's detections of its kind and colour, and its checks: present, colour (when the
    prompt names one), count (exact when the prompt says a number or ``article_count`` is
    ``exact``; else at least, for plurals)."""
    of_kind = [d for d in detections if d.label == o.name]
    bound = [d for d in of_kind if o.colour is None or d.colour == o.colour]
    checks = [Check("present", o.name, bool(of_kind), f"{len(of_kind)} found")]
    if o.colour is not None:
        cols = sorted({str(d.colour) for d in of_kind})
        checks.append(Check("colour", f"{o.colour} {o.name}", bool(bound), "colours: " + (",".join(cols) or "-")))
    counted = sum(1 for d in bound if d.score >= count_threshold)
    if o.count_explicit or article_count == "exact":
        checks.append(Check("count", o.phrase(), counted == o.count, f"{counted} found"))
    elif o.count > 1:
        checks.append(Check("count", f">= {o.phrase()}", counted >= o.count, f"{counted} found"))
    return bound, checks


def _position_check(spec: PromptSpec, a_set: Sequence[Detection], b_set: Sequence[Detection],
                    margin: float) -> Check:
    """The relation check: met when both objects are found and every pair of their boxes holds it."""
    ok = bool(a_set) and bool(b_set) and all(relation_holds(a, b, spec.relation, margin)
                                            for a in a_set for b in b_set)
    target = f"{spec.objects[0].name} {spec.relation} {spec.objects[1].name}"
    found = "missing object" if not (a_set and b_set) else ("holds" if ok else "violated")
    return Check("position", target, ok, found)


def fraction_met(checks: Sequence[Check]) -> float:
    """Share of ``checks`` met (``nan`` for none: a prompt with no requirement has no score)."""
    return sum(c.ok for c in checks) / len(checks) if checks else float("nan")
