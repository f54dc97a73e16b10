"""Rule-based TIFA/DSG questions for GenEval-style prompts (e.g. the bundled synthetic set).

The QG/A metrics need questions; the TS2 release ships them for its own prompts, and a
language model writes them for others. For prompts that :func:`~.parser.parse_prompt` reads
(GenEval's templates, ``dataset=mini``), the requirements are known exactly, so questions can be
written by rule, with no model:

- per object: "is there a <name>?" (yes/no), "is there a <colour> <name>?" (yes/no, when a colour
  is given) and "how many <colour> <name>s are there?" (choices one..four, expected first);
- per relation: "is the <a> <relation> the <b>?" (yes/no).

DSG questions are the same atoms with dependencies (colour and count depend on the object's
presence, the relation on both objects). The expected answer is always "yes" or the first choice
-- the very bias "What makes a good metric?" (3.4) finds in LM-written questions, so
``always_yes`` scores every image 1 on them.

:func:`tifa_lm` and :func:`dsg_lm` have the signature of
:class:`metrics_adapters.qa.generation.CallableLM` functions: they read the prompt from the
filled generation template (its last ``Description:`` line) and answer in the template's format,
so ``metric.questions=generate metric.lm=<CallableLM config>`` works unchanged.
"""

from __future__ import annotations

from .parser import NUMBER_WORDS, PromptSpec, parse_prompt

__all__ = ["tifa_text", "dsg_text", "tifa_lm", "dsg_lm", "prompt_from_template"]

_WORDS = {v: k for k, v in NUMBER_WORDS.items()}


def _plural(name: str, n: int) -> str:
    return name if n == 1 else name + "s"


def _count_choices(k: int) -> list[str]:
    others = [_WORDS[i] for i in (1, 2, 3, 4) if i != k]
    return [_WORDS.get(k, str(k))] + others[:3]


def tifa_text(spec: PromptSpec) -> str:
    """TIFA-format questions (``About ...: / Q: / Choices: / A:``) for a parsed prompt.

    Examples
    --------
    >>> print(tifa_text(parse_prompt("two red circles")).splitlines()[:4])
    ['About circle (object):', 'Q: is there a circle?', 'Choices: yes, no', 'A: yes']
    """
    lines: list[str] = []
    for o in spec.objects:
        lines += [f"About {o.name} (object):", f"Q: is there a {o.name}?", "Choices: yes, no", "A: yes"]
        what = f"{o.colour} {o.name}" if o.colour else o.name
        if o.colour:
            lines += [f"About {o.colour} (color):", f"Q: is there a {what}?", "Choices: yes, no", "A: yes"]
        choices = _count_choices(o.count)
        lines += [f"About {_WORDS.get(o.count, o.count)} (count):",
                  f"Q: how many {_plural(what, 2)} are there?", f"Choices: {', '.join(choices)}", f"A: {choices[0]}"]
    if spec.relation is not None:
        a, b = spec.objects
        lines += [f"About {spec.relation} (spatial):", f"Q: is the {a.name} {spec.relation} the {b.name}?",
                  "Choices: yes, no", "A: yes"]
    return "\n".join(lines)


def dsg_text(spec: PromptSpec) -> str:
    """DSG-format questions (``id | tuple | question | parents``) for a parsed prompt.

    Examples
    --------
    >>> print(dsg_text(parse_prompt("a red circle left of a blue square")).splitlines()[-1])
    7 | relation - spatial (circle, square, left of) | Is the circle left of the square? | 1,4
    """
    lines: list[str] = []
    roots: list[int] = []
    n = 0
    for o in spec.objects:
        n += 1
        root = n
        roots.append(root)
        lines.append(f"{n} | entity - whole ({o.name}) | Is there a {o.name}? | 0")
        if o.colour:
            n += 1
            lines.append(f"{n} | attribute - color ({o.name}, {o.colour}) | Is the {o.name} {o.colour}? | {root}")
        n += 1
        what = f"{o.colour} {o.name}" if o.colour else o.name
        be = "Is" if o.count == 1 else "Are"
        lines.append(f"{n} | other - count ({o.name}, =={o.count}) | {be} there exactly {_WORDS.get(o.count, o.count)} "
                     f"{_plural(what, o.count)}? | {root}")
    if spec.relation is not None:
        a, b = spec.objects
        n += 1
        lines.append(f"{n} | relation - spatial ({a.name}, {b.name}, {spec.relation}) | Is the {a.name} "
                     f"{spec.relation} the {b.name}? | {roots[0]},{roots[1]}")
    return "\n".join(lines)


def prompt_from_template(text: str) -> str:
    """The prompt in a filled generation template: the text of its last ``Description:`` line.

    Raises
    ------
    ValueError
        No ``Description:`` line.
    """
    found = [ln.split(":", 1)[1].strip() for ln in str(text).splitlines() if ln.strip().lower().startswith("description:")]
    if not found or not found[-1]:
        raise ValueError(f"expected a filled template ending in 'Description: <prompt>', got {str(text)[-200:]!r}")
    return found[-1]


def tifa_lm(text: str, attempt: int = 0) -> str:
    """CallableLM function: TIFA questions for the prompt in a filled TIFA template."""
    return tifa_text(parse_prompt(prompt_from_template(text)))


def dsg_lm(text: str, attempt: int = 0) -> str:
    """CallableLM function: DSG questions for the prompt in a filled DSG template."""
    return dsg_text(parse_prompt(prompt_from_template(text)))
