"""Reading YAML/JSON that comes with a third-party dataset, with bounds.

A dataset file is untrusted input: a 1 KB YAML "alias bomb" expands to a billion nodes, 30,000
nested brackets overflow PyYAML's C composer (a segfault), a duplicated key silently keeps the
last value. :func:`load_untrusted` refuses all of these with a :class:`UnsafeInputError` naming
the file, before anything big is built:

- size: at most :data:`MAX_BYTES` (checked with ``stat`` before reading);
- nesting: at most :data:`MAX_DEPTH` levels. JSON is measured by a bracket scan outside strings,
  YAML on PyYAML's event stream (which needs no recursion), stopping at the first event too deep;
  only then is the document composed;
- aliases: at most :data:`MAX_ALIASES` alias uses, and at most :data:`MAX_NODES` nodes once
  every alias is expanded (counted on the event stream from the anchored subtrees' sizes);
- duplicated mapping keys are refused (YAML and JSON alike);
- YAML scalars that YAML 1.1 would type (``010`` -> 8, ``1e3``, ``yes``, ``2024-01-01``) are kept
  as :class:`TypedScalar` (text as written + typed value), so a reader that expects a string (a
  node label, an id) takes the text as written, and one that wants data takes the value
  (:func:`plain`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["UnsafeInputError", "TypedScalar", "load_untrusted", "plain", "json_depth",
           "MAX_BYTES", "MAX_DEPTH", "MAX_ALIASES", "MAX_NODES"]

MAX_BYTES = 512 * 2**20
MAX_DEPTH = 64  # a ts2-seg file nests 6 deep (segs > seg > nodes > node > images > image)
MAX_ALIASES = 1000
MAX_NODES = 20_000_000  # after alias expansion; a 100k-image dataset has ~1M

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


class UnsafeInputError(ValueError):
    """An input file over a safety bound (size, nesting, aliases) or with duplicated keys."""


class TypedScalar:
    """A plain YAML scalar that YAML 1.1 resolves to a non-string (int, float, bool, date).

    ``text`` is the scalar as written (``"010"``), ``value`` what YAML makes of it (``8``).
    """

    __slots__ = ("text", "value")

    def __init__(self, text: str, value: Any) -> None:
        self.text, self.value = text, value

    def __repr__(self) -> str:
        return f"TypedScalar({self.text!r}, {self.value!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypedScalar) and (self.text, self.value) == (other.text, other.value)

    def __hash__(self) -> int:
        return hash(self.text)


def plain(obj: Any) -> Any:
    """``obj`` with every :class:`TypedScalar` replaced by its typed value (for free metadata)."""
    if isinstance(obj, TypedScalar):
        return obj.value
    if isinstance(obj, dict):
        return {plain(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [plain(v) for v in obj]
    return obj


def json_depth(text: str) -> int:
    """Deepest bracket nesting of JSON ``text`` (brackets inside strings do not count).

    >>> json_depth('{"a": [1, {"b": "[[["}]}')
    3
    """
    fast = _json_depth_vectorised(text)
    if fast is not None:
        return fast
    skeleton = re.sub(r"[^\[\]{}]", "", _JSON_STRING.sub("", text))
    if not skeleton:
        return 0
    steps = np.frombuffer(skeleton.encode("ascii"), dtype=np.uint8)
    delta = np.where((steps == ord("[")) | (steps == ord("{")), 1, -1)
    return int(np.cumsum(delta).max())


def _json_depth_vectorised(text: str) -> int | None:
    """:func:`json_depth` by array operations (the regex scan takes ~1 s on a 15 MB dataset), or
    None when the text is one the scan could read differently: then the regex decides.

    The scan pairs the quotes not escaped by an odd run of backslashes into strings. That is the
    regex's reading exactly when every backslash lies inside a string and the last string is
    closed, as in any valid JSON; otherwise (a stray backslash, an unterminated string) the regex
    skips an unmatched quote where the pairing would not, so None is returned.
    """
    # UTF-8 multi-byte sequences hold no ASCII byte, so the quotes, backslashes and brackets of the
    # bytes are those of the text; surrogatepass keeps lone surrogates (not in decoded files) encodable.
    b = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    quotes = np.flatnonzero(b == ord('"'))
    slashes = np.flatnonzero(b == ord("\\"))
    if len(slashes):
        # A quote right after a backslash is escaped when the run of backslashes before it is odd;
        # runs before different quotes never overlap, so this loop is linear in the text.
        keep = np.ones(len(quotes), dtype=bool)
        for k in np.flatnonzero(b[np.maximum(quotes - 1, 0)] == ord("\\")):
            q = int(quotes[k])
            if q == 0:
                continue
            j = q - 1
            while j >= 0 and b[j] == ord("\\"):
                j -= 1
            keep[k] = (q - 1 - j) % 2 == 0
        quotes = quotes[keep]
        # Inside a string: an odd number of unescaped quotes at or before the position.
        if len(quotes) % 2 or np.any(np.searchsorted(quotes, slashes) % 2 == 0):
            return None
    elif len(quotes) % 2:
        return None
    is_open = (b == ord("[")) | (b == ord("{"))
    brackets = np.flatnonzero(is_open | (b == ord("]")) | (b == ord("}")))
    brackets = brackets[np.searchsorted(quotes, brackets) % 2 == 0]
    if not len(brackets):
        return 0
    delta = np.where(is_open[brackets], 1, -1)
    return int(np.cumsum(delta).max())


def _read_bounded(path: Path, max_bytes: int) -> str:
    size = path.stat().st_size
    if size > max_bytes:
        raise UnsafeInputError(f"{path}: expected at most {max_bytes} bytes, got {size} (raise max_bytes to read it)")
    with open(path, "rb") as f:  # bounded read: a file that grows meanwhile is cut, then refused below
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafeInputError(f"{path}: expected at most {max_bytes} bytes, got more")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnsafeInputError(f"{path}: expected UTF-8 text, got an undecodable byte at offset {e.start}") from e


def _no_duplicates(source: str):
    def hook(pairs):
        out = {}
        for k, v in pairs:
            if k in out:
                raise UnsafeInputError(f"{source}: key {k!r} appears twice in one mapping")
            out[k] = v
        return out
    return hook


def _load_json(text: str, source: str, max_depth: int) -> Any:
    depth = json_depth(text)
    if depth > max_depth:
        raise UnsafeInputError(f"{source}: expected nesting of at most {max_depth} levels, got {depth}")
    return json.loads(text, object_pairs_hook=_no_duplicates(source))


def _yaml_loader():
    """A SafeLoader subclass (C-accelerated when libyaml is there): typed scalars kept as written,
    duplicated keys refused. Built lazily so that ``import seg_data`` does not import yaml."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):  # type: ignore[misc, valid-type]
        source = "<yaml>"

        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                self.flatten_mapping(node)
                seen: dict[Any, Any] = {}
                for k, _ in node.value:
                    key = self.construct_object(k, deep=deep)
                    hashable = key.text if isinstance(key, TypedScalar) else key
                    try:
                        if hashable in seen:
                            line = k.start_mark.line + 1 if k.start_mark else "?"
                            raise UnsafeInputError(f"{self.source}, line {line}: key {hashable!r} appears twice in one mapping")
                        seen[hashable] = True
                    except TypeError:  # unhashable keys: PyYAML reports them itself
                        pass
            return super().construct_mapping(node, deep=deep)

    def typed(method):
        def construct(self, node):
            return TypedScalar(node.value, method(self, node))
        return construct

    for tag, method in (("int", base.construct_yaml_int), ("float", base.construct_yaml_float),
                        ("bool", base.construct_yaml_bool), ("timestamp", base.construct_yaml_timestamp)):
        StrictLoader.add_constructor(f"tag:yaml.org,2002:{tag}", typed(method))
    return StrictLoader


_LOADER = None


def _check_yaml_events(text: str, source: str, max_depth: int, max_aliases: int, max_nodes: int) -> None:
    """Walk the event stream (no recursion, no document built) and stop at the first bound crossed.

    libyaml 0.2.5 (in PyYAML >= 6.0.4 wheels) refuses more than 1000 levels itself, before our own
    count could; our bound is far below that, so its refusal is ours and gets our one message
    (file, line, bound) whatever the installed PyYAML says.
    """
    import yaml

    try:
        _walk_yaml_events(yaml, text, source, max_depth, max_aliases, max_nodes)
    except yaml.MarkedYAMLError as e:
        if "nesting depth" not in str(e.problem or ""):
            raise
        line = e.problem_mark.line + 1 if e.problem_mark else "?"
        raise UnsafeInputError(f"{source}, line {line}: expected nesting of at most {max_depth} levels, "
                               "got deeper") from e


def _walk_yaml_events(yaml, text: str, source: str, max_depth: int, max_aliases: int, max_nodes: int) -> None:

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    sizes: dict[str, int] = {}  # anchor -> expanded node count of its subtree
    stack: list[list] = []  # open collections: [anchor, node count so far]
    total = aliases = 0
    for ev in yaml.parse(text, Loader=base):
        if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            stack.append([ev.anchor, 1])
            if len(stack) > max_depth:
                line = ev.start_mark.line + 1 if ev.start_mark else "?"
                raise UnsafeInputError(f"{source}, line {line}: expected nesting of at most {max_depth} levels, got deeper")
            continue
        if isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, n = stack.pop()
        elif isinstance(ev, yaml.ScalarEvent):
            anchor, n = ev.anchor, 1
        elif isinstance(ev, yaml.AliasEvent):
            aliases += 1
            if aliases > max_aliases:
                raise UnsafeInputError(f"{source}: expected at most {max_aliases} YAML aliases (*name), got more")
            anchor, n = None, sizes.get(ev.anchor, 1)
        else:
            continue
        if anchor is not None:
            sizes[anchor] = n
        if stack:
            stack[-1][1] += n
        else:
            total += n
        if n > 1 and total + sum(s[1] for s in stack) > max_nodes:  # only an alias or a closed collection adds > 1
            raise UnsafeInputError(f"{source}: expected at most {max_nodes} YAML nodes once aliases are expanded, got "
                                   "more (an alias bomb?)")


def load_untrusted(path: str | Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH,
                   max_aliases: int = MAX_ALIASES, max_nodes: int = MAX_NODES) -> Any:
    """Parse a ``.json`` or YAML file within the bounds above.

    A ``.yaml`` file whose body is a JSON object (how big ts2-seg datasets are saved) is read by
    the json parser, ~30x faster; YAML flow mappings that are not strict JSON fall back to YAML.

    Raises
    ------
    UnsafeInputError
        Over a bound, duplicated keys, not UTF-8 (the message names the file).
    ValueError
        Not parseable as JSON/YAML (the message names the file).
    """
    global _LOADER
    path = Path(path)
    source = str(path)
    text = _read_bounded(path, max_bytes)
    kind = "JSON" if path.suffix.lower() == ".json" else "YAML"
    try:
        if kind == "JSON":
            return _load_json(text, source, max_depth)
        body = _json_body(text)
        if body is not None:
            try:
                return _load_json(body, source, max_depth)
            except json.JSONDecodeError:
                pass
        _check_yaml_events(text, source, max_depth, max_aliases, max_nodes)
        if _LOADER is None:
            _LOADER = _yaml_loader()
        loader = _LOADER(text)
        loader.source = source
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except UnsafeInputError:
        raise
    except (RecursionError, MemoryError) as e:  # belt and braces: the bounds above should prevent these
        raise UnsafeInputError(f"{source}: too deeply nested or too large to read ({type(e).__name__})") from e
    except Exception as e:  # yaml and json raise different classes; both mean "not parseable"
        raise ValueError(f"{source}: could not parse as {kind}: {e}") from e


def _json_body(text: str) -> str | None:
    """The text after leading comment lines if it is a JSON object (JSON is YAML), else None."""
    i = 0
    while True:
        while i < len(text) and text[i] in " \t\r\n\ufeff":
            i += 1
        if text.startswith("#", i):
            j = text.find("\n", i)
            i = len(text) if j < 0 else j + 1
            continue
        return text[i:] if text.startswith("{", i) else None
