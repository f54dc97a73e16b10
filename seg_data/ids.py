"""The one normalisation of identifiers: SEG ids and node labels are compared as written.

Every loader (``metadata.csv``, ts2-seg YAML/JSON, score tables with or without a dataset) passes
each SEG id and node label through :func:`normalize_id` / :func:`normalize_label`. The rule:

1. Surrounding whitespace is removed (CSV cells are often padded); nothing else is changed:
   no case folding, no number parsing, so two ids are the same SEG only if they are the same text.
2. Forms that a reader could take for another id are refused, with the place they came from:

   - a SEG id that reads as a number must be a plain non-negative decimal integer with no
     leading zero, at most ``2**63 - 1``: ``01``, ``007``, ``+1``, ``-0``, ``1.0``, ``1e0``,
     ``1_000``, ``0x1F``, ``0o17``, ``inf``, ``nan``, non-ASCII digits and
     ``99999999999999999999`` are refused
     (``01`` and ``1`` would otherwise be one SEG in one tool and two in another);
   - an empty id, or a missing one (``None``, NaN) is refused; in YAML, an unquoted id that
     YAML itself types as a number (``1:30`` is 90 in YAML 1.1, ``.nan``) must be written as a
     canonical integer too;
   - a node label is digits (the error count, no leading zero) then lower-case ASCII letters:
     ``0``, ``1a``, ``12b``. ``01``, ``1A``, ``1 a``, ``١`` (non-ASCII digits) are refused.

``metadata.csv`` further needs integer SEG ids (the TS2 subsets are id ranges): ``integer=True``.
"""

from __future__ import annotations

import math
import re

__all__ = ["IdentifierError", "normalize_id", "normalize_label", "LABEL_RE", "MAX_INT_ID"]

MAX_INT_ID = 2**63 - 1
_CANON_INT = re.compile(r"0|[1-9][0-9]*")
LABEL_RE = re.compile(r"(0|[1-9][0-9]*)([a-z]*)")
_LOOSE_LABEL = re.compile(r"(\d+)\s*([A-Za-z]*)")


class IdentifierError(ValueError):
    """An id or label that is missing or could be read as another one."""


def _where(where: str) -> str:
    return f"{where}: " if where else ""


def _looks_numeric(text: str) -> bool:
    """Would some reader take ``text`` for a number (Python, YAML 1.1/1.2, C: 1.0, 1e0, inf, 0x1F, 0o17)?"""
    try:
        float(text)
        return True
    except ValueError:
        pass
    try:
        int(text, 0)
        return True
    except ValueError:
        return text.isdecimal()


def normalize_id(value: object, where: str = "", what: str = "SEG id", integer: bool = False) -> str:
    """The canonical text of a SEG id (or an image id when ``what`` says so).

    Parameters
    ----------
    value : object
        The id as read: a string (preferred) or an int; floats, bools and None are refused.
    where : str
        The place, for messages: ``"metadata.csv, row 7"``.
    what : str
        What the value is, for messages.
    integer : bool
        Also require a plain decimal integer (``metadata.csv`` ids).

    Raises
    ------
    IdentifierError
        Empty or missing; a non-canonical number (see the module docstring); not an integer
        when ``integer``.

    Examples
    --------
    >>> normalize_id(" 7 "), normalize_id("loop"), normalize_id(12)
    ('7', 'loop', '12')
    >>> normalize_id("007", "scores.csv, row 3")
    Traceback (most recent call last):
    ...
    seg_data.ids.IdentifierError: scores.csv, row 3: expected a SEG id written as a plain integer without leading zeros (e.g. '7'), got '007'
    """
    text = _id_text(value, where, what)
    numeric = _looks_numeric(text)
    if numeric or integer:
        _check_canonical_integer(text, where, what, numeric, integer)
    return text


def _id_text(value: object, where: str, what: str) -> str:
    """The stripped, non-empty text of an id given as a string or an int (bools, floats, None, NaN refused)."""
    if isinstance(value, bool) or value is None or (isinstance(value, float) and math.isnan(value)):
        raise IdentifierError(f"{_where(where)}expected a {what}, got {value!r}")
    if isinstance(value, float):
        raise IdentifierError(f"{_where(where)}expected a {what} written as text or an integer, got the float {value!r}")
    if not isinstance(value, (str, int)):
        raise IdentifierError(f"{_where(where)}expected a {what} (text), got a {type(value).__name__}: {value!r:.60}")
    text = str(value).strip()
    if not text:
        raise IdentifierError(f"{_where(where)}expected a {what}, got an empty value")
    return text


def _check_canonical_integer(text: str, where: str, what: str, numeric: bool, integer: bool) -> None:
    """Refuse an id that must be an integer (it reads as a number, or ``integer``) unless it is a plain ASCII
    decimal without leading zeros, at most :data:`MAX_INT_ID`; a signed or zero-padded one is shown its
    canonical form."""
    if not (text.isascii() and _CANON_INT.fullmatch(text)):
        example = ""
        if text.isascii() and re.fullmatch(r"[+-]?[0-9]+", text):
            example = f" (e.g. {str(int(text)).lstrip('-')!r})"
        kind = "an integer" if integer else "a plain integer"
        raise IdentifierError(f"{_where(where)}expected a {what} written as {kind} without leading zeros, sign, "
                              f"decimal point or exponent{example}, got {text!r}" if numeric else
                              f"{_where(where)}expected an integer {what}, got {text!r}")
    if int(text) > MAX_INT_ID:
        raise IdentifierError(f"{_where(where)}expected a {what} of at most {MAX_INT_ID}, got {text!r}")


def normalize_label(value: object, where: str = "", strict: bool = True) -> str:
    """The canonical text of a node label: ``<error count><lower-case letters>``.

    With ``strict=False`` text that is no label at all (``x1``) is returned stripped, for
    validation to report with every other problem of the SEG; ambiguous near-labels (``01``,
    ``1A``) are refused either way.

    Raises
    ------
    IdentifierError
        Not a string/int; a leading zero (``01``), upper-case letters (``1A``), inner spaces,
        non-ASCII digits, or anything else that is not digits then letters.

    Examples
    --------
    >>> normalize_label(" 1a "), normalize_label(2)
    ('1a', '2')
    """
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise IdentifierError(f"{_where(where)}expected a node label like '0', '1a' or '2b', got {value!r:.60}")
    text = str(value).strip()
    if LABEL_RE.fullmatch(text):
        return text
    loose = _LOOSE_LABEL.fullmatch(text)
    if loose and text.isascii():
        digits, letters = loose.groups()
        fixed = f"{int(digits)}{letters.lower()}"
        raise IdentifierError(f"{_where(where)}expected a node label written as digits without leading zeros, then "
                              f"lower-case letters (e.g. {fixed!r}), got {text!r}: forms like '01' or '1A' are refused "
                              "because they could mean another node")
    if not strict:
        return text
    raise IdentifierError(f"{_where(where)}expected a node label like '0', '1a' or '2b' (digits then optional "
                          f"lower-case letters), got {text!r}")
