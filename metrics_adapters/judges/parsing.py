"""Strict parsing of judge replies, with a narrow tolerant fallback.

A judge's reply is accepted only when its numbers can be read without guessing:

1. **JSON** (preferred): the first JSON object in the reply (code fences allowed, text around it
   ignored). For a rating, key ``score`` (or ``rating``), a number, numeric string or a
   one-element list (VIEScore writes ``"score": [7]``); the reason under ``reason``,
   ``reasoning`` or ``rationale``.
2. **Bare number** (fallback): the whole reply is one number, optionally labelled and scaled,
   e.g. ``"7"``, ``"Score: 7"``, ``"7/10"``, ``"7 out of 10."``.

Anything else (prose with numbers in it, two candidate numbers, a score outside the scale) is
a :class:`ParseError`: the judge metric retries with a reminder of the format and finally
records the failure; it never turns an unreadable reply into a score.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["ParseError", "Rating", "Judgement", "parse_rating", "parse_judgement", "first_json_object"]


class ParseError(ValueError):
    """A reply that does not contain a readable answer in the expected format."""


@dataclass(frozen=True)
class Rating:
    """A parsed rating: ``score`` on the judge's scale, the model's ``reason`` and how it was read."""

    score: float
    reason: str = ""
    mode: str = "json"  # "json" | "number"


@dataclass(frozen=True)
class Judgement:
    """An LLMScore-style verdict: ``error_count`` (>= 0) and overall ``rating`` on its scale."""

    error_count: float
    rating: float
    reason: str = ""
    mode: str = "json"


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_NUM = r"[-+]?\d+(?:\.\d+)?"


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (inside code fences or not), or ``None``.

    Examples
    --------
    >>> first_json_object('Sure! {"score": 7, "reason": "ok"} Hope it helps.')
    {'score': 7, 'reason': 'ok'}
    >>> first_json_object("no json here") is None
    True
    """
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    dec = json.JSONDecoder()
    for cand in candidates:
        for i, ch in enumerate(cand):
            if ch != "{":
                continue
            try:
                obj, _ = dec.raw_decode(cand[i:])
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


def _number(value: Any, what: str) -> float:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool):
        raise ParseError(f"expected a number for {what}, got the boolean {value!r}")
    if isinstance(value, (int, float)):
        x = float(value)
    elif isinstance(value, str) and re.fullmatch(rf"\s*{_NUM}\s*", value):
        x = float(value)
    else:
        raise ParseError(f"expected a number for {what}, got {value!r}")
    if not math.isfinite(x):
        raise ParseError(f"expected a finite number for {what}, got {value!r}")
    return x


def _pick(obj: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, Any] | None:
    lower = {str(k).strip().lower(): k for k in obj}
    for k in keys:
        if k in lower:
            return lower[k], obj[lower[k]]
    return None


def _reason(obj: dict[str, Any]) -> str:
    hit = _pick(obj, ("reason", "reasoning", "rationale", "explanation"))
    return "" if hit is None or hit[1] is None else str(hit[1])


def _in_range(x: float, lo: float, hi: float, what: str) -> float:
    if not lo <= x <= hi:
        raise ParseError(f"expected {what} in [{lo:g}, {hi:g}], got {x:g}")
    return x


def parse_rating(text: str | None, lo: float = 0.0, hi: float = 10.0, allow_bare_number: bool = True) -> Rating:
    """Read a rating on ``[lo, hi]`` from a judge's reply.

    Parameters
    ----------
    text : str
        The model's reply.
    lo, hi : float
        The rubric's scale; a score outside it is an error (never clipped).
    allow_bare_number : bool
        Accept the fallback forms (``"7"``, ``"Score: 7/10"``) when no JSON object is found.

    Returns
    -------
    Rating

    Raises
    ------
    ParseError
        No JSON object with a usable score and no acceptable bare number; or out of range.

    Examples
    --------
    >>> parse_rating('{"score": [8], "reasoning": "all objects present"}')
    Rating(score=8.0, reason='all objects present', mode='json')
    >>> parse_rating("Score: 6/10").score
    6.0
    """
    if text is None or not str(text).strip():
        raise ParseError("expected a reply, got an empty one")
    text = str(text)
    obj = first_json_object(text)
    if obj is not None:
        hit = _pick(obj, ("score", "rating", "sc", "overall"))
        if hit is None:
            raise ParseError(f"expected a 'score' key in the JSON reply, got keys {sorted(map(str, obj))}")
        x = _number(hit[1], f"'{hit[0]}'")
        return Rating(_in_range(x, lo, hi, "the score"), _reason(obj), "json")
    if allow_bare_number:
        m = re.fullmatch(rf"\s*(?:(?:score|rating)\s*[:=]?\s*)?({_NUM})\s*(?:(?:/|out\s+of)\s*({_NUM}))?\s*\.?\s*",
                         text, flags=re.I)
        if m:
            if m.group(2) is not None and float(m.group(2)) != float(hi):
                raise ParseError(f"expected a score out of {hi:g}, got one out of {m.group(2)}")
            return Rating(_in_range(float(m.group(1)), lo, hi, "the score"), "", "number")
    short = text.strip().replace("\n", " ")
    raise ParseError(f"expected JSON like {{\"score\": <{lo:g}-{hi:g}>, \"reason\": \"...\"}} or a bare number, "
                     f"got {short[:200]!r}")


_EC_KEYS = ("error_count", "errors", "error count", "num_errors", "n_errors", "error_counting")
_RATING_KEYS = ("rating", "overall", "overall_rating", "score")


def parse_judgement(text: str | None, rating_range: tuple[float, float] = (0.0, 100.0)) -> Judgement:
    """Read an error count and an overall rating from an LLM judge's reply.

    JSON first (``{"error_count": 2, "rating": 65, "rationale": "..."}``); otherwise exactly one
    ``error count: N`` and one ``rating: R`` (or ``overall: R`` / ``score: R``) line each.

    Raises
    ------
    ParseError
        A value is missing, not a number, the count is negative or not whole, or the rating is
        outside ``rating_range``.

    Examples
    --------
    >>> parse_judgement('{"error_count": 1, "rating": 80, "rationale": "one colour wrong"}')
    Judgement(error_count=1.0, rating=80.0, reason='one colour wrong', mode='json')
    >>> parse_judgement("Error count: 2\\nRating: 55/100").rating
    55.0
    """
    lo, hi = float(rating_range[0]), float(rating_range[1])
    if text is None or not str(text).strip():
        raise ParseError("expected a reply, got an empty one")
    text = str(text)
    obj = first_json_object(text)
    mode = "json"
    if obj is not None:
        ec, rt = _pick(obj, _EC_KEYS), _pick(obj, _RATING_KEYS)
        if ec is None or rt is None:
            raise ParseError(f"expected keys 'error_count' and 'rating' in the JSON reply, got {sorted(map(str, obj))}")
        ec_v, rt_v, reason = _number(ec[1], "the error count"), _number(rt[1], "the rating"), _reason(obj)
    else:
        mode = "lines"
        ecs = re.findall(rf"(?im)^\s*(?:number\s+of\s+errors|error[\s_]*count(?:ing)?|errors)\s*[:=]\s*({_NUM})\s*$", text)
        rts = re.findall(rf"(?im)^\s*(?:overall\s+rating|rating|overall|score)\s*[:=]\s*({_NUM})\s*(?:/\s*{_NUM})?\s*$", text)
        if len(ecs) != 1 or len(rts) != 1:
            short = text.strip().replace("\n", " ")
            raise ParseError('expected JSON like {"error_count": <int>, "rating": <number>, "rationale": "..."} '
                             f"or one 'Error count:' and one 'Rating:' line, got {short[:200]!r}")
        ec_v, rt_v, reason = float(ecs[0]), float(rts[0]), ""
    if ec_v < 0 or ec_v != int(ec_v):
        raise ParseError(f"expected a whole, non-negative error count, got {ec_v:g}")
    return Judgement(ec_v, _in_range(rt_v, lo, hi, "the rating"), reason, mode)
