"""Unit checks of the hostile-input defences against independent references: walk counts
against enumeration, expanded YAML node counts against the built document, JSON depth against a
recursive measure, the identifier rule on a table of forms."""

from __future__ import annotations

import json
import random

import networkx as nx
import numpy as np
import pytest

from seg_data import SEG, ImageRecord, build_graph, walks
from seg_data.graph import WalkLimitError, count_walks
from seg_data.ids import IdentifierError, normalize_id, normalize_label
from seg_data.untrusted import UnsafeInputError, json_depth, load_untrusted, plain


def _random_dag(rng: random.Random, n: int) -> nx.DiGraph:
    labels = ["0"] + [f"{1 + i // 3}{'abc'[i % 3]}" for i in range(n - 1)]
    edges = [(labels[i], labels[j]) for i in range(n) for j in range(i + 1, n)
             if labels[j][0] != labels[i][0] and rng.random() < 0.4]
    return build_graph({lbl: [ImageRecord(lbl)] for lbl in labels}, edges=edges)


@pytest.mark.parametrize("seed", range(25))
def test_count_walks_equals_enumeration(seed):
    g = _random_dag(random.Random(seed), 2 + seed % 9)
    assert count_walks(g) == len(walks(g, max_walks=None))


def test_walks_refuses_over_max_walks_naming_the_seg():
    nodes = {"0": []} | {f"{lv}{c}": [] for lv in range(1, 5) for c in "abcde"}
    seg = SEG("big", "p", build_graph(nodes))
    assert count_walks(seg) == 5 ** 4
    with pytest.raises(WalkLimitError, match=r"SEG big: expected at most max_walks=100 walks, got 625"):
        walks(seg, max_walks=100)
    assert len(walks(seg, max_walks=625)) == 625


@pytest.mark.parametrize("protocol", [("levels", False), ("levels", True), ("dag", False), ("dag", True)])
@pytest.mark.parametrize("seed", range(10))
def test_protocol_walk_count_equals_enumeration(protocol, seed):
    from analysis.walks import SegNodes, protocol_walks, walk_count

    rng = random.Random(seed)
    g = _random_dag(rng, 3 + seed % 7)
    g.add_edges_from(("0", n) for n in list(g) if n != "0" and g.in_degree(n) == 0)  # one root, as validation wants
    labels = tuple(sorted(g))
    seg = SEG(str(seed), "p", g)
    rows = tuple(np.arange(rng.randint(0, 2)) for _ in labels)  # some nodes without a scored image
    s = SegNodes(str(seed), None, labels, tuple(seg.level(n) for n in labels), rows, seg)
    walks_, dup = protocol
    assert walk_count(s, walks_, dup) == len(protocol_walks(s, walks_, dup))


def _expanded_size(obj) -> int:
    if isinstance(obj, dict):
        return 1 + sum(_expanded_size(k) + _expanded_size(v) for k, v in obj.items())
    if isinstance(obj, list):
        return 1 + sum(_expanded_size(v) for v in obj)
    return 1


def test_alias_expansion_is_counted_exactly(tmp_path):
    import yaml

    text = "a: &a [1, 2, {x: 3}]\nb: &b [*a, *a, *a]\nc: [*b, *b]\n"
    n = _expanded_size(yaml.safe_load(text))  # the built document, node by node
    p = tmp_path / "d.yaml"
    p.write_text(text)
    assert plain(load_untrusted(p, max_nodes=n)) == yaml.safe_load(text)
    with pytest.raises(UnsafeInputError, match=rf"expected at most {n - 1} YAML nodes once aliases are expanded"):
        load_untrusted(p, max_nodes=n - 1)


def _depth(obj) -> int:
    if isinstance(obj, dict):
        return 1 + max((_depth(v) for v in obj.values()), default=0)
    if isinstance(obj, list):
        return 1 + max((_depth(v) for v in obj), default=0)
    return 0


@pytest.mark.parametrize("seed", range(20))
def test_json_depth_equals_recursive_depth(seed):
    rng = random.Random(seed)

    def make(d):
        if d == 0 or rng.random() < 0.2:
            return rng.choice(["[", "}", '"\\"]', 1, None])
        return rng.choice([lambda: [make(d - 1) for _ in range(rng.randint(0, 3))],
                           lambda: {f"k{i}[": make(d - 1) for i in range(rng.randint(0, 3))}])()
    doc = make(8)
    assert json_depth(json.dumps(doc)) == _depth(doc)


def test_size_bound_checked_before_reading(tmp_path):
    p = tmp_path / "d.json"
    p.write_text(json.dumps({"segs": [], "pad": "x" * 1000}))
    with pytest.raises(UnsafeInputError, match=r"d\.json: expected at most 100 bytes, got 10\d\d"):
        load_untrusted(p, max_bytes=100)


@pytest.mark.parametrize(("value", "kwargs", "expected"), [
    ("7", {}, "7"), (" 7 ", {}, "7"), (7, {}, "7"), ("loop", {}, "loop"), ("seg-01", {}, "seg-01"), ("0", {}, "0"),
    ("9223372036854775807", {"integer": True}, "9223372036854775807"),
])
def test_normalize_id_accepts(value, kwargs, expected):
    assert normalize_id(value, **kwargs) == expected


@pytest.mark.parametrize("value", ["01", "007", "1.0", "1e0", "+1", "-1", "-0", "1_0", "0x1F", "0o17", "inf", "nan", "NaN",
                                   "\u0661", "99999999999999999999", "9223372036854775808", "", "  ", None, 1.0,
                                   float("nan"), True, [1]])
def test_normalize_id_refuses(value):
    with pytest.raises(IdentifierError):
        normalize_id(value, "f, row 2")


def test_normalize_id_integer_mode():
    with pytest.raises(IdentifierError, match=r"f, row 2: expected an integer SEG id, got 'seven'"):
        normalize_id("seven", "f, row 2", integer=True)


@pytest.mark.parametrize(("value", "ok"), [("0", True), ("1a", True), ("12bc", True), (" 2 ", True), ("01", False),
                                           ("1A", False), ("1 a", False), ("x1", False), ("", False), ("\u0661", False)])
def test_normalize_label(value, ok):
    if ok:
        assert normalize_label(value) == value.strip()
    else:
        with pytest.raises(IdentifierError):
            normalize_label(value)


@pytest.mark.parametrize("loader", ["CSafeLoader", "SafeLoader"])
@pytest.mark.parametrize("text, line", [
    ("format: ts2-seg/1\nmetadata: {x: " + "[" * 2000 + "]" * 2000 + "}\n", 2),  # flow: libyaml >= 0.2.5 refuses itself
    ("- " * 3000 + "x\n", 1),  # block
    ("a: 1\nb: " + "[" * 65 + "]" * 65 + "\n", 2),  # just over our bound, far under libyaml's
])
def test_deep_yaml_refused_in_our_words_whatever_the_parser(tmp_path, monkeypatch, loader, text, line):
    # ts2's contract, not PyYAML's wording: refused, file and line named, the bound stated, for the
    # C and the pure-Python event parser alike (PyYAML 6.0.4's libyaml stops at 1000 levels itself).
    yaml = pytest.importorskip("yaml")
    if not hasattr(yaml, loader):
        pytest.skip(f"this PyYAML has no {loader}")
    monkeypatch.setattr(yaml, "CSafeLoader", getattr(yaml, loader), raising=False)
    p = tmp_path / "deep.yaml"
    p.write_text(text)
    with pytest.raises(UnsafeInputError) as e:
        load_untrusted(p)
    assert str(e.value) == f"{p}, line {line}: expected nesting of at most 64 levels, got deeper"


def test_a_yaml_error_that_is_not_about_depth_is_still_a_parse_error(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(ValueError, match=r"bad\.yaml: could not parse as YAML") as e:
        load_untrusted(p)
    assert not isinstance(e.value, UnsafeInputError)


def _regex_json_depth(text: str) -> int:
    """The regex scan json_depth falls back to, as a reference for the vectorised one."""
    import re

    from seg_data.untrusted import _JSON_STRING

    skeleton = re.sub(r"[^\[\]{}]", "", _JSON_STRING.sub("", text))
    return int(np.cumsum([1 if c in "[{" else -1 for c in skeleton]).max()) if skeleton else 0


@pytest.mark.parametrize("seed", range(300))
def test_json_depth_equals_the_regex_scan_on_any_text(seed):
    # Valid JSON and broken text alike (stray backslashes, unterminated strings, escaped quotes,
    # non-ASCII): the vectorised scan either agrees with the regex or hands over to it.
    rng = random.Random(seed)
    alphabet = ['"', "\\", "[", "]", "{", "}", "a", " ", ",", ":", "é", "\u2028", "\n"]
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
    assert json_depth(text) == _regex_json_depth(text)
    doc = json.dumps({"k\\\"[": [rng.choice(['x"]', "\\", "{[\\\\", "é"]) for _ in range(5)], "d": [[{"e": []}]]})
    assert json_depth(doc) == _regex_json_depth(doc) == 5
