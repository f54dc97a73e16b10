"""Prompt -> required objects, counts, colours and relative position (GenEval task types).

:func:`parse_prompt` reads the prompt forms of GenEval's six task templates (Table 1 of the
paper) and their natural generalisation used by the bundled synthetic set:

=================  =====================================================  ============================
task               GenEval template                                       also read
=================  =====================================================  ============================
single_object      a photo of a/an [OBJECT]                               a red circle
two_object         a photo of a/an [A] and a/an [B]                       a X, a Y and a Z (``multi``)
counting           a photo of [NUMBER] [OBJECT]s                          one X and three Ys
colors             a photo of a/an [COLOR] [OBJECT]
position           a photo of a/an [A] [RELATIVE POSITION] a/an [B]       two red Xs left of a blue Y
color_attr         a photo of a/an [COLOR A] [A] and a/an [COLOR B] [B]
=================  =====================================================  ============================

Relative positions: ``left of``, ``right of``, ``above``, ``below`` (``to the left of``,
``on the right of``, ... accepted). Plurals follow GenEval's rule (an ``s`` appended), so a
plural noun loses one trailing ``s``. Anything else (free-form captions) is a
:class:`PromptParseError` naming the prompt; use the LM parser (:class:`LMPromptParser`) for
those.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .colours import normalise_colour

__all__ = ["ObjectSpec", "PromptSpec", "PromptParseError", "parse_prompt", "TemplateParser", "LMPromptParser",
           "RELATIONS", "NUMBER_WORDS", "spec_from_dict"]

log = logging.getLogger(__name__)

RELATIONS = ("left of", "right of", "above", "below")
NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                "nine": 9, "ten": 10}
_ARTICLES = {"a", "an"}
_PREFIX = re.compile(r"^(?:a|an)\s+(?:photo|picture|image|painting|drawing|render(?:ing)?)\s+of\s+", re.I)
_REL = re.compile(r"\s+(?:(?:to|on)\s+the\s+)?(left\s+of|right\s+of|above|below)\s+", re.I)
_MAX_NOUN_WORDS = 2  # GenEval object names (COCO classes) have at most two words


class PromptParseError(ValueError):
    """A prompt that is not of a supported form (or an LM parse that could not be read)."""


@dataclass(frozen=True)
class ObjectSpec:
    """``count`` objects ``name`` (singular), of ``colour`` if given; ``count_explicit`` when the
    prompt states the number in words or digits (``"two"``), not just an article (``"a"``)."""

    name: str
    count: int = 1
    colour: str | None = None
    count_explicit: bool = False

    def phrase(self) -> str:
        c = f"{self.colour} " if self.colour else ""
        return f"{self.count} {c}{self.name}{'' if self.count == 1 else '(s)'}"


@dataclass(frozen=True)
class PromptSpec:
    """What a prompt requires: objects, and ``relation`` of object 0 to object 1 (or ``None``)."""

    objects: tuple[ObjectSpec, ...]
    relation: str | None = None
    task: str = "multi"

    def to_dict(self) -> dict[str, Any]:
        return {"objects": [asdict(o) for o in self.objects], "relation": self.relation, "task": self.task}


def _task(objects: Sequence[ObjectSpec], relation: str | None) -> str:
    if relation is not None:
        return "position"
    if len(objects) == 1:
        o = objects[0]
        if o.count_explicit and o.count > 1:
            return "counting"
        return "colors" if o.colour else "single_object"
    if len(objects) == 2:
        return "color_attr" if all(o.colour for o in objects) else "two_object"
    return "multi"


def _singular(noun: str) -> str:
    # GenEval pluralises by appending "s"; undo exactly that (not "glass" -> "glas": only plurals).
    return noun[:-1] if noun.endswith("s") and len(noun) > 2 else noun


def _phrase(text: str, prompt: str) -> ObjectSpec:
    words = text.strip().lower().split()
    if not words:
        raise PromptParseError(f"expected an object phrase, got an empty one in {prompt!r}")
    count, explicit = 1, False
    if words[0] in _ARTICLES:
        words = words[1:]
    elif words[0] in NUMBER_WORDS or words[0].isdigit():
        count, explicit = (NUMBER_WORDS[words[0]] if words[0] in NUMBER_WORDS else int(words[0])), True
        words = words[1:]
        if count < 1:
            raise PromptParseError(f"expected a positive count, got {count} in {prompt!r}")
    else:
        raise PromptParseError(f"expected an object phrase starting with a/an or a number, got {text.strip()!r} "
                               f"in {prompt!r}")
    colour = normalise_colour(words[0]) if words else None
    if colour is not None:
        words = words[1:]
    if not words or len(words) > _MAX_NOUN_WORDS or not all(re.fullmatch(r"[a-z][a-z\-']*", w) for w in words):
        raise PromptParseError(f"expected '<a|number> [colour] <object of 1-{_MAX_NOUN_WORDS} words>', got "
                               f"{text.strip()!r} in {prompt!r}")
    noun = " ".join(words)
    if count > 1:
        noun = _singular(noun)
    return ObjectSpec(noun, count, colour, explicit)


def parse_prompt(prompt: str) -> PromptSpec:
    """Parse a GenEval-style prompt.

    Raises
    ------
    PromptParseError
        The prompt is not of a supported form; the message quotes it.

    Examples
    --------
    >>> s = parse_prompt("two red circles left of a blue square")
    >>> s.relation, [(o.name, o.count, o.colour) for o in s.objects]
    ('left of', [('circle', 2, 'red'), ('square', 1, 'blue')])
    >>> parse_prompt("a photo of four dogs").task
    'counting'
    """
    text = re.sub(r"\s+", " ", str(prompt)).strip().rstrip(".").strip()
    body = _PREFIX.sub("", text)
    rels = list(_REL.finditer(body))
    if len(rels) > 1:
        raise PromptParseError(f"expected at most one relative position, got {len(rels)} in {prompt!r}")
    if rels:
        m = rels[0]
        rel = re.sub(r"\s+", " ", m.group(1).lower())
        objects = (_phrase(body[:m.start()], prompt), _phrase(body[m.end():], prompt))
        return PromptSpec(objects, rel, _task(objects, rel))
    parts = [p for p in re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", body) if p.strip()]
    if not parts:
        raise PromptParseError(f"expected a prompt naming at least one object, got {prompt!r}")
    objects = tuple(_phrase(p, prompt) for p in parts)
    return PromptSpec(objects, None, _task(objects, None))


def spec_from_dict(d: Any, prompt: str = "") -> PromptSpec:
    """Validate an LM's JSON (``{"objects": [{"name", "count", "colour"}], "relation": ...}``).

    ``relation`` is ``null`` or one of :data:`RELATIONS` (object 0 relative to object 1).

    Raises
    ------
    PromptParseError
        Missing/ill-typed fields, unknown colour or relation, a relation without two objects.
    """
    if not isinstance(d, dict) or not isinstance(d.get("objects"), list) or not d["objects"]:
        raise PromptParseError(f"expected a JSON object with a non-empty 'objects' list for {prompt!r}, got {d!r}")
    objs = tuple(_object_from_dict(o, prompt) for o in d["objects"])
    rel = _relation_from_dict(d.get("relation"), prompt)
    if rel is not None and len(objs) != 2:
        raise PromptParseError(f"expected exactly two objects with a relation for {prompt!r}, got {len(objs)}")
    return PromptSpec(objs, rel, _task(objs, rel))


def _object_from_dict(o: Any, prompt: str) -> ObjectSpec:
    """One object of an LM's JSON: a non-empty name, a positive integer count (default 1) and a
    basic colour term or none (``colour`` or ``color``)."""
    if not isinstance(o, dict) or not isinstance(o.get("name"), str) or not o["name"].strip():
        raise PromptParseError(f"expected objects like {{'name': str, 'count': int, 'colour': str|null}} for {prompt!r}, got {o!r}")
    count = o.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise PromptParseError(f"expected a positive integer count for {o['name']!r} in {prompt!r}, got {count!r}")
    raw_col = o.get("colour", o.get("color"))
    colour = None
    if raw_col not in (None, "", "null", "none"):
        colour = normalise_colour(str(raw_col))
        if colour is None:
            raise PromptParseError(f"expected a basic colour term for {o['name']!r} in {prompt!r}, got {raw_col!r}")
    return ObjectSpec(o["name"].strip().lower(), int(count), colour, bool(o.get("count_explicit", count != 1)))


def _relation_from_dict(raw: Any, prompt: str) -> str | None:
    """An LM's relation: ``None`` for none, else one of :data:`RELATIONS` ("to the left of" -> "left of")."""
    if raw in (None, "", "none", "null"):
        return None
    rel = re.sub(r"^(?:to|on) the ", "", str(raw).strip().lower())
    if rel not in RELATIONS:
        raise PromptParseError(f"expected relation null or one of {RELATIONS} for {prompt!r}, got {raw!r}")
    return rel


class TemplateParser:
    """The rule-based parser (:func:`parse_prompt`) behind the parser interface."""

    def settings(self) -> dict[str, Any]:
        return {"parser": "template", "version": 1}

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        pass

    def parse(self, prompts: Sequence[str]) -> list[PromptSpec | PromptParseError]:
        out: list[PromptSpec | PromptParseError] = []
        for p in prompts:
            try:
                out.append(parse_prompt(p))
            except PromptParseError as e:
                out.append(e)
        return out

    def usage(self) -> dict[str, Any]:
        return {}


LM_PARSER_TEMPLATE = """Extract what this text-to-image prompt requires, as JSON.

Prompt: {prompt}

List each kind of object (singular noun), how many are asked for (1 for "a"/"an"), and its colour
if the prompt gives one (a basic colour word, else null). If the prompt places the first object
relative to the second, give the relation as one of "left of", "right of", "above", "below";
otherwise null.

Answer with JSON only, in this form:
{"objects": [{"name": "dog", "count": 2, "colour": "brown"}, {"name": "bench", "count": 1, "colour": null}], "relation": "left of"}"""


class LMPromptParser:
    """Prompt parsing by a language model (any :class:`~metrics_adapters.judges.backends.ChatBackend`).

    The reply is parsed strictly (:func:`spec_from_dict` on the first JSON object); a malformed
    reply is retried with a reminder, up to ``max_attempts``; then the prompt's failure is
    recorded (its images fail with the reason, never score 0). Parses are memoised per prompt.
    """

    def __init__(self, backend: Any, template: str | None = None, max_attempts: int = 3) -> None:
        from ..judges.templates import load_template

        self.backend = backend
        self.template = load_template(template, LM_PARSER_TEMPLATE)
        self.max_attempts = int(max_attempts)
        if self.max_attempts < 1:
            raise ValueError(f"expected max_attempts >= 1, got {max_attempts}")
        self._memo: dict[str, PromptSpec | PromptParseError] = {}

    def settings(self) -> dict[str, Any]:
        return {"parser": "lm", "backend": self.backend.settings(), "template": self.template,
                "max_attempts": self.max_attempts}

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.backend.load(device, dtype)

    def usage(self) -> dict[str, Any]:
        return self.backend.usage()

    def parse(self, prompts: Sequence[str]) -> list[PromptSpec | PromptParseError]:
        from ..judges.backends import ChatRequest
        from ..judges.parsing import first_json_object
        from ..judges.templates import render

        todo = [p for p in dict.fromkeys(prompts) if p not in self._memo]
        last: dict[str, str] = {}
        for attempt in range(self.max_attempts):
            if not todo:
                break
            suffix = "" if attempt == 0 else "\n\nYour previous answer could not be read. Reply with the JSON object only."
            results = self.backend.generate([ChatRequest(render(self.template, prompt=p) + suffix) for p in todo])
            still = []
            for p, r in zip(todo, results, strict=True):
                if not r.ok:
                    last[p] = f"model call failed: {r.error}"
                    still.append(p)
                    continue
                try:
                    obj = first_json_object(r.text or "")
                    if obj is None:
                        raise PromptParseError(f"expected a JSON object, got {(r.text or '')[:160]!r}")
                    self._memo[p] = spec_from_dict(obj, p)
                except PromptParseError as e:
                    last[p] = str(e)
                    still.append(p)
            todo = still
        for p in todo:
            self._memo[p] = PromptParseError(f"LM parser gave no readable parse of {p!r} after {self.max_attempts} "
                                             f"attempts: {last.get(p, '?')}")
            log.warning("%s", self._memo[p])
        return [self._memo[p] for p in prompts]

