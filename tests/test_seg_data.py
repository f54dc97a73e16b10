"""seg_data: model, TS2 release loader, explicit-edge format, walks, validation."""

from __future__ import annotations

import json
import textwrap

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seg_data
from seg_data import (
    SEG,
    ImageRecord,
    SEGDataset,
    SEGValidationError,
    build_graph,
    load_path,
    load_seg_file,
    load_ts2_release,
    parse_label,
    save_seg_file,
    ts2_convention_edges,
    validate_seg,
    walks,
)
from seg_data.summary import summarize

pytestmark = pytest.mark.light  # torch-free: .ci/run also runs it on the light install


# ---------------------------------------------------------------------------------------------
# The real TS2 release (../shared)
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ts2(ts2_dir):
    return load_ts2_release(ts2_dir)


def test_ts2_counts(ts2):
    info = summarize(ts2)
    assert info["n_segs"] == 165
    assert info["n_images"] == 2840
    assert info["n_nodes"] == 835
    assert info["nodes_per_level"] == {"0": 189, "1": 331, "2": 211, "3": 75, "4": 25, "5": 4}
    assert info["segs_per_subset"] == {"Synth": 111, "Nat": 25, "Real": 29}
    assert not [p for p in info["problems"] if p["severity"] == "error"]


def test_ts2_structure_special_segs(ts2):
    assert len(ts2["103"].graph) == 1 and walks(ts2["103"]) == []
    for w in walks(ts2["25"]):
        assert [ts2["25"].level(n) for n in w] == [0, 2, 3, 4]
    # 18 SEGs have several level-0 nodes (README of the release)
    assert sum(len([n for n in s.graph if s.level(n) == 0]) > 1 for s in ts2) == 18


def test_ts2_prompt_glitch_is_a_warning(ts2, caplog):
    warn = [p for p in ts2.metadata["problems"] if p.code == "prompt_mismatch"]
    assert [(p.seg_id, p.severity) for p in warn] == [("3", "warning")]
    assert "images/003-08.jpg" in warn[0].message
    assert ts2["3"].prompt.startswith("A large motorcycle")


def test_ts2_walks_equal_cartesian_product(ts2):
    """The convention graph's walks are one node per present level, every combination."""
    import itertools

    for s in ts2:
        levels = sorted({s.level(n) for n in s.graph})
        by = [[n for n in s.nodes if s.level(n) == lv] for lv in levels]
        expect = sorted(itertools.product(*by)) if len(levels) > 1 else []
        assert sorted(walks(s)) == expect, s.seg_id


def test_ts2_image_table_and_paths(ts2, ts2_dir):
    t = ts2.image_table()
    assert len(t) == 2840 and t["file_name"].is_unique
    row = t[t.file_name == "images/000-01.jpg"].iloc[0]
    assert (row.seg_id, row.node, row.level, row.subset) == ("0", "1a", 1, "Synth")
    assert row.image_path == str(ts2_dir / "images/000-01.jpg")


def test_ts2_missing_images_reported_when_needed(ts2_dir):
    with pytest.raises(SEGValidationError) as e:
        load_ts2_release(ts2_dir, check_images=True)
    assert sum(p.code == "missing_image" for p in e.value.problems) == 2840


# ---------------------------------------------------------------------------------------------
# Labels and graphs
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("label,expect", [("0", (0, "")), ("1a", (1, "a")), ("12b", (12, "b")), (" 3 ", (3, ""))])
def test_parse_label(label, expect):
    assert parse_label(label) == expect


@pytest.mark.parametrize("label", ["x1", "", "a", "1-a", "1.5"])
def test_parse_label_rejects(label):
    with pytest.raises(ValueError, match="expected a node label"):
        parse_label(label)


def test_convention_skips_missing_levels():
    assert ts2_convention_edges(["0", "2", "3a", "3b"]) == [("0", "2"), ("2", "3a"), ("2", "3b")]
    assert ts2_convention_edges(["0a", "0b", "1"]) == [("0a", "1"), ("0b", "1")]
    assert ts2_convention_edges(["0"]) == []


def test_walks_explicit_dag_stable_order():
    # 0 -> 1b -> 3 ; 0 -> 1a -> 2 ; 1a -> 3 (a two-error edge)
    g = build_graph({n: [] for n in ["0", "1a", "1b", "2", "3"]},
                    edges=[("0", "1b"), ("0", "1a"), ("1a", "2"), ("1a", "3"), ("1b", "3")])
    assert walks(g) == [("0", "1a", "2"), ("0", "1a", "3"), ("0", "1b", "3")]


def test_walks_rejects_cycle():
    g = build_graph({n: [] for n in ["0", "1", "2"]}, edges=[("0", "1"), ("1", "2"), ("2", "1")])
    with pytest.raises(nx.NetworkXUnfeasible, match="cycle"):
        walks(g)


# ---------------------------------------------------------------------------------------------
# Validation: one hand-made broken input per error kind
# ---------------------------------------------------------------------------------------------
def _seg(nodes, edges=None, prompt="a red cube", sid="s1"):
    imgs = {n: [ImageRecord(f"{sid}/{n}-{i}.png") for i in range(k)] for n, k in nodes.items()}
    return SEG(sid, prompt, build_graph(imgs, edges=edges))


def _codes(seg, **kw):
    return sorted((p.code, p.node) for p in validate_seg(seg, **kw) if p.severity == "error")


def test_valid_seg_has_no_problems():
    assert validate_seg(_seg({"0": 2, "1a": 1, "1b": 1, "2": 3})) == []


def test_cycle_reported():
    s = _seg({"0": 1, "1": 1, "2": 1}, edges=[("0", "1"), ("1", "2"), ("2", "1")])
    codes = _codes(s)
    assert ("cycle", "1") in codes or ("cycle", "2") in codes
    # the back edge 2 -> 1 also goes down in errors
    assert ("level_order", "1") in codes


def test_unreachable_node_reported():
    s = _seg({"0": 1, "1a": 1, "1b": 1, "2": 1}, edges=[("0", "1a"), ("1b", "2")])
    assert _codes(s) == [("unreachable", "1b"), ("unreachable", "2")]


def test_child_not_worse_than_parent_reported():
    s = _seg({"0": 1, "2": 1, "1": 1}, edges=[("0", "2"), ("2", "1")])
    assert _codes(s) == [("level_order", "1")]
    p = next(p for p in validate_seg(s) if p.code == "level_order")
    assert "SEG s1, node 1" in str(p) and "expected the child to have more errors" in p.message


def test_bad_label_reported_with_node():
    s = _seg({"0": 1, "x1": 1, "1": 1})
    assert ("bad_label", "x1") in _codes(s)


def test_duplicate_image_ids_reported():
    g = build_graph({"0": [ImageRecord("a.png")], "1": [ImageRecord("a.png")]})
    assert _codes(SEG("s", "p", g)) == [("duplicate_image", "0"), ("duplicate_image", "1")]
    ds = [SEG("s1", "p", build_graph({"0": [ImageRecord("a.png")]})), SEG("s2", "p", build_graph({"0": [ImageRecord("a.png")]}))]
    probs = seg_data.validate_dataset(ds)
    assert [(p.code, p.seg_id) for p in probs] == [("duplicate_image", "s2")]


def test_missing_image_file_reported(tmp_path):
    (tmp_path / "ok.png").write_bytes(b"x")
    g = build_graph({"0": [ImageRecord("ok", tmp_path / "ok.png")], "1": [ImageRecord("gone", tmp_path / "gone.png")]})
    s = SEG("s", "p", g)
    assert _codes(s) == []
    assert _codes(s, check_images=True) == [("missing_image", "1")]


def test_empty_prompt_and_no_root_and_unknown_node():
    assert _codes(_seg({"0": 1, "1": 1}, prompt="  ")) == [("empty_prompt", None)]
    assert _codes(_seg({"1": 1, "2": 1})) == [("no_root", None)]
    s = _seg({"0": 1, "1": 1}, edges=[("0", "1"), ("1", "7")])
    assert ("unknown_node", "7") in _codes(s)


def test_all_problems_reported_not_just_first(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(textwrap.dedent("""
        format: ts2-seg/1
        segs:
          - id: A
            prompt: ""
            nodes: [{label: "0", images: [{id: a}]}, {label: x1, images: [{id: b}]}]
          - id: B
            prompt: two cats
            nodes: [{label: "0", images: [{id: c}]}, {label: "1", images: [{id: d}]}]
            edges: [{from: "1", to: "0"}]
    """))
    with pytest.raises(SEGValidationError) as e:
        load_seg_file(f)
    found = {(p.seg_id, p.code) for p in e.value.problems if p.severity == "error"}
    # B's edge 1 -> 0 leaves node 1 unreachable from the root 0 and goes down in errors
    assert found == {("A", "empty_prompt"), ("A", "bad_label"), ("B", "level_order"), ("B", "unreachable")}
    assert "SEG A" in str(e.value) and "SEG B" in str(e.value)


def test_ts2_loader_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="metadata.csv"):
        load_ts2_release(tmp_path)
    (tmp_path / "metadata.csv").write_text("id,file_name,rank\n0,a.jpg,0\n")
    with pytest.raises(ValueError, match=r"missing \['target_prompt'\]"):
        load_ts2_release(tmp_path)
    (tmp_path / "metadata.csv").write_text("id,target_prompt,file_name,rank\n0,p,a.jpg,0\nseven,p,b.jpg,1\n")
    with pytest.raises(ValueError, match=r"row 3, column 'id': expected an integer SEG id.*'seven'"):
        load_ts2_release(tmp_path)
    (tmp_path / "metadata.csv").write_text("id,target_prompt,file_name,rank\n0,p,a.jpg,0\n0,p,b.jpg,x1\n")
    with pytest.raises(SEGValidationError, match="SEG 0, node x1"):
        load_ts2_release(tmp_path)


def test_seg_file_malformed_entries(tmp_path):
    f = tmp_path / "d.json"
    f.write_text("{not json")
    with pytest.raises(ValueError, match="could not parse as JSON"):
        load_seg_file(f)
    f.write_text(json.dumps({"segs": [{"id": "q", "prompt": "p", "nodes": [{"images": []}]}]}))
    with pytest.raises(ValueError, match=r"SEG q, nodes\[0\]: expected key 'label' in a node"):
        load_seg_file(f)
    f.write_text(json.dumps({"format": "other/2", "segs": []}))
    with pytest.raises(ValueError, match="expected format 'ts2-seg/1', got 'other/2'"):
        load_seg_file(f)


# ---------------------------------------------------------------------------------------------
# Round trip (explicit-edge format) and walk properties on random DAGs
# ---------------------------------------------------------------------------------------------
@st.composite
def random_seg_dataset(draw):
    segs = []
    for k in range(draw(st.integers(1, 4))):
        n_levels = draw(st.integers(1, 4))
        labels_by_level = []
        for lv in range(n_levels):
            width = draw(st.integers(1, 3))
            labels_by_level.append([str(lv) if width == 1 else f"{lv}{'abc'[i]}" for i in range(width)])
        edges = []
        # every non-root node gets >= 1 parent from some lower level (keeps all reachable)
        for lv in range(1, n_levels):
            for v in labels_by_level[lv]:
                parents = draw(st.lists(st.sampled_from([u for lo in range(lv) for u in labels_by_level[lo]]),
                                        min_size=1, max_size=3, unique=True))
                edges += [(u, v) for u in parents]
        nodes = {lbl: [ImageRecord(f"s{k}/{lbl}/{i}.png", source=draw(st.sampled_from([None, "render"])))
                       for i in range(draw(st.integers(1, 3)))] for lvl in labels_by_level for lbl in lvl}
        err = {e: draw(st.lists(st.text("abc xyz", min_size=1, max_size=8), max_size=2)) for e in edges}
        segs.append(SEG(f"seg{k}", draw(st.text("abcdefgh ", min_size=1, max_size=20)).strip() or "p",
                        build_graph(nodes, edges=edges, edge_errors=err), subset=draw(st.sampled_from(["A", "B", None]))))
    return SEGDataset(segs, name="rand")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ds=random_seg_dataset(), suffix=st.sampled_from([".yaml", ".json"]))
def test_round_trip_and_walk_properties(tmp_path, ds, suffix):
    path = save_seg_file(ds, tmp_path / f"d{suffix}")
    back = load_seg_file(path)
    assert back.seg_ids == ds.seg_ids
    for a, b in zip(ds, back, strict=True):
        assert (a.prompt, a.subset) == (b.prompt, b.subset)
        assert sorted(a.graph.edges) == sorted(b.graph.edges)
        for u, v in a.graph.edges:
            assert tuple(a.graph.edges[u, v]["errors"]) == tuple(b.graph.edges[u, v]["errors"])
        for n in a.graph:
            assert [i.image_id for i in a.images(n)] == [i.image_id for i in b.images(n)]
            assert [i.source for i in a.images(n)] == [i.source for i in b.images(n)]
        assert walks(a) == walks(b)
        for w in walks(b):
            levels = [b.level(n) for n in w]
            assert levels[0] == 0
            # neighbouring pairs: the [1:] slice is one shorter by design
            assert all(x < y for x, y in zip(levels, levels[1:], strict=False))
            assert b.graph.out_degree(w[-1]) == 0


def test_load_path_dispatch(tmp_path, ts2_dir):
    assert len(load_path(ts2_dir)) == 165
    ds = SEGDataset([_seg({"0": 1, "1": 2})])
    save_seg_file(ds, tmp_path / "dataset.yaml")
    assert load_path(tmp_path).seg_ids == ["s1"]
    with pytest.raises(FileNotFoundError, match="expected metadata.csv"):
        load_path(tmp_path / "sub" if (tmp_path / "sub").mkdir() is None else tmp_path)
