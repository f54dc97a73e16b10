"""The bundled synthetic SEG set: structure, determinism, pixel-level ablations, caching."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage

import seg_data.synthetic as syn
from seg_data import load_seg_file, parse_label, validate_dataset, walks
from seg_data.synthetic import (
    BACKGROUND,
    PALETTE,
    apply_ablations,
    expected_objects,
    load_boxes,
    load_mini,
    make_synthetic,
    mini_cache_dir,
    render_scene,
)

EIGHT = np.ones((3, 3), dtype=int)  # 8-connectivity: thin star/triangle tips stay one blob


@pytest.fixture(autouse=True)
def _no_home_cache(tmp_path, monkeypatch):
    # Nothing in this file may write to the real ~/.cache/ts2.
    monkeypatch.setenv("TS2_CACHE_DIR", str(tmp_path / "env-cache"))


@pytest.fixture(scope="module")
def default_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("syn") / "default"
    make_synthetic(out, n_segs=30, seed=0)
    return out


@pytest.fixture(scope="module")
def ds(default_dir):
    return load_seg_file(default_dir / "dataset.yaml", check_images=True)


def _tree_hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _codes(img: np.ndarray) -> np.ndarray:
    """One int per pixel (0xRRGGBB), so colour tests are plain integer comparisons."""
    img = img.astype(np.int64)
    return (img[..., 0] << 16) | (img[..., 1] << 8) | img[..., 2]


def _code(rgb) -> int:
    return (rgb[0] << 16) | (rgb[1] << 8) | rgb[2]


def _colour_counts(img: np.ndarray) -> dict[str, int]:
    codes = _codes(img)
    return {name: int((codes == _code(rgb)).sum()) for name, rgb in PALETTE.items()}


def _blobs(img: np.ndarray) -> dict[str, list[tuple[slice, slice, int]]]:
    """Colour name -> [(row slice, col slice, pixel count)] of its 8-connected components."""
    out = {}
    codes = _codes(img)
    present = set(np.unique(codes).tolist())
    for name, rgb in PALETTE.items():
        if _code(rgb) not in present:
            continue
        mask = codes == _code(rgb)
        lab, n = ndimage.label(mask, structure=EIGHT)
        if n:
            sizes = ndimage.sum_labels(mask, lab, index=range(1, n + 1))
            out[name] = [(sl[0], sl[1], int(sz)) for sl, sz in zip(ndimage.find_objects(lab), sizes, strict=True)]
    return out


def _shape_of(rows: slice, cols: slice, area: int) -> str:
    # Fill ratio of the blob's bounding box: square 1, circle pi/4, triangle 1/2, star ~0.4.
    ratio = area / ((rows.stop - rows.start) * (cols.stop - cols.start))
    return "square" if ratio > 0.9 else "circle" if ratio > 0.65 else "triangle" if ratio > 0.46 else "star"


def _pixels(path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


# ------------------------------------------------------------------------------------------
# Structure of the default set
# ------------------------------------------------------------------------------------------
def test_default_counts_within_spec(ds):
    assert len(ds) == 30
    assert 150 <= ds.n_images < 600
    assert Counter(s.subset for s in ds) == {"Colour": 10, "Count": 10, "Position": 10}
    # Depths are stratified per kind: of each kind's 10 SEGs, 5 reach level 3, 3 level 2, 2 level 1.
    depth = Counter((s.subset, max(s.level(n) for n in s.graph)) for s in ds)
    assert depth == {(k, d): c for k in ("Colour", "Count", "Position") for d, c in ((3, 5), (2, 3), (1, 2))}
    # Some SEGs branch (two level-1 nodes, labelled 1a/1b).
    assert sum({"1a", "1b"} <= set(s.graph) for s in ds) >= 5
    for s in ds:
        assert s.graph.has_node("0") and s.prompt.strip()
        for n in s.graph:
            level, variant = parse_label(n)
            errors = s.graph.nodes[n]["errors"]
            assert level == s.level(n) == len(errors) == len(s.metadata["nodes"][n]["ablations"])
            assert 2 <= len(s.images(n)) <= 4
            assert all(img.path.is_file() for img in s.images(n))


def test_default_validates_clean(ds):
    assert validate_dataset(ds, check_images=True) == []


def test_walks_start_at_zero_and_strictly_increase(ds):
    for s in ds:
        ws = walks(s)
        assert ws, f"SEG {s.seg_id} has no walk"
        on_walk = {n for w in ws for n in w}
        assert on_walk == set(s.graph)
        for w in ws:
            assert w[0] == "0"
            levels = [s.level(n) for n in w]
            # neighbouring pairs: the [1:] slice is one shorter by design
            assert all(b > a for a, b in zip(levels, levels[1:], strict=False)), (s.seg_id, w)


def test_edges_add_exactly_the_child_errors(ds):
    for s in ds:
        g = s.graph
        for u, v, d in g.edges(data=True):
            eu, ev = set(g.nodes[u]["errors"]), set(g.nodes[v]["errors"])
            assert eu < ev
            assert set(d["errors"]) == ev - eu and len(d["errors"]) == s.level(v) - s.level(u)
        # Every pair in strict inclusion is connected by a path (the edges are a covering relation).
        import networkx as nx

        for u in g:
            for v in g:
                if set(g.nodes[u]["errors"]) < set(g.nodes[v]["errors"]):
                    assert nx.has_path(g, u, v), (s.seg_id, u, v)


def test_node_scene_is_prompt_scene_with_ablations(ds):
    for s in ds:
        for n in s.graph:
            meta = s.metadata["nodes"][n]
            assert meta["scene"] == apply_ablations(s.metadata["scene"], meta["ablations"])
        assert s.metadata["nodes"]["0"]["scene"] == s.metadata["scene"]
        kinds = {a["type"] for n in s.graph for a in s.metadata["nodes"][n]["ablations"]}
        own = {"Colour": "wrong_colour", "Count": "wrong_count", "Position": "swapped_position"}[s.subset]
        assert own in kinds


# ------------------------------------------------------------------------------------------
# Pixels: every image shows what its node's scene says
# ------------------------------------------------------------------------------------------
def test_every_image_matches_its_node_scene(ds):
    allowed = [_code(c) for c in (BACKGROUND, *PALETTE.values())]
    boxes = load_boxes(ds)
    for s in ds:
        for n, img in s.iter_images():
            scene = s.metadata["nodes"][n]["scene"]
            px = _pixels(img.path)
            assert np.isin(_codes(px), allowed).all(), f"{img.image_id}: off-palette pixel"
            blobs = _blobs(px)
            want = {g["colour"]: g for g in scene["groups"] if g["count"] > 0}
            assert set(blobs) == set(want), (img.image_id, set(blobs), set(want))
            for colour, g in want.items():
                assert len(blobs[colour]) == g["count"], (img.image_id, colour)
                assert {_shape_of(*b) for b in blobs[colour]} == {g["shape"]}, (img.image_id, colour)
            if scene["relation"] and all(g["count"] > 0 for g in scene["groups"]):
                a, b = (blobs[g["colour"]] for g in scene["groups"])
                axis, before = {"left of": (1, True), "right of": (1, False),
                                "above": (0, True), "below": (0, False)}[scene["relation"]]
                first, second = (a, b) if before else (b, a)
                assert max(x[axis].stop for x in first) <= min(x[axis].start for x in second), img.image_id
            # The recorded boxes hold one object per blob, with the right colour and shape.
            objs = boxes[img.image_id]
            recorded = Counter((shape, colour) for shape, colour, *_ in objs)
            assert recorded == Counter(expected_objects(scene)), img.image_id
            for colour, found in blobs.items():
                for rows, cols, _ in found:
                    assert any(c == colour and x0 <= cols.start and cols.stop - 1 <= x1 and y0 <= rows.start
                               and rows.stop - 1 <= y1 for _, c, x0, y0, x1, y1 in objs), img.image_id
            # At least 2 background pixels between any two boxes, so objects never touch.
            for i, (_, _, ax0, ay0, ax1, ay1) in enumerate(objs):
                assert 0 <= ax0 <= ax1 < px.shape[1] and 0 <= ay0 <= ay1 < px.shape[0]
                for _, _, bx0, by0, bx1, by1 in objs[i + 1:]:
                    assert bx0 - ax1 > 2 or ax0 - bx1 > 2 or by0 - ay1 > 2 or ay0 - by1 > 2, img.image_id


def test_wrong_colour_node_changes_the_pixels(ds):
    """A level-1 wrong-colour node: the prompt's colour is gone, the new one is there."""
    checked = 0
    for s in ds:
        for n in s.graph:
            abl = s.metadata["nodes"][n]["ablations"]
            if len(abl) == 1 and abl[0]["type"] == "wrong_colour":
                old = s.metadata["scene"]["groups"][abl[0]["group"]]["colour"]
                new = abl[0]["value"]
                c0 = _colour_counts(_pixels(s.images("0")[0].path))
                c1 = _colour_counts(_pixels(s.images(n)[0].path))
                assert c0[old] > 0 and c0[new] == 0
                assert c1[new] > 0 and c1[old] == 0
                checked += 1
    assert checked >= 3


def test_missing_object_node_has_fewer_blobs(ds):
    checked = 0
    for s in ds:
        n_root = sum(len(v) for v in _blobs(_pixels(s.images("0")[0].path)).values())
        for n in s.graph:
            abl = s.metadata["nodes"][n]["ablations"]
            if len(abl) == 1 and abl[0]["type"] == "missing_object":
                gone = s.metadata["scene"]["groups"][abl[0]["group"]]["count"]
                for img in s.images(n):
                    assert sum(len(v) for v in _blobs(_pixels(img.path)).values()) == n_root - gone
                checked += 1
    assert checked >= 2


def test_hand_made_scene_and_ablations():
    scene = {"groups": [{"shape": "circle", "colour": "red", "count": 2},
                        {"shape": "square", "colour": "blue", "count": 1}], "relation": "left of"}
    seg_scene = syn.Scene.from_dict(scene)
    assert syn._prompt(seg_scene, "Position") == "two red circles left of a blue square"

    def blobs(sc, seed=3):
        img, objects = render_scene(sc, seed)
        return _blobs(np.asarray(img)), objects

    b, objects = blobs(scene)
    assert {k: len(v) for k, v in b.items()} == {"red": 2, "blue": 1}
    assert max(x[1].stop for x in b["red"]) <= b["blue"][0][1].start  # circles left of the square
    assert [o[:2] for o in objects] == [("circle", "red"), ("circle", "red"), ("square", "blue")]

    cases = {
        ("wrong_colour", 1, "green"): ({"red": 2, "green": 1}, "wrong colour: the blue square is green, not blue"),
        ("wrong_count", 0, 3): ({"red": 3, "blue": 1}, "wrong count: 3 red circles, not 2"),
        ("missing_object", 1, None): ({"red": 2}, "missing object: no blue square"),
        ("swapped_position", None, None): (
            {"red": 2, "blue": 1}, "swapped position: the red circles are right of the blue square, not left of it"),
        ("wrong_shape", 0, "star"): ({"red": 2, "blue": 1}, "wrong shape: the red circles are stars"),
    }
    for (kind, group, value), (counts, text) in cases.items():
        abl = {"type": kind, "group": group, "value": value}
        assert syn.Ablation.from_dict(abl).describe(seg_scene) == text
        b, _ = blobs(apply_ablations(scene, [abl]))
        assert {k: len(v) for k, v in b.items()} == counts, kind
    b, _ = blobs(apply_ablations(scene, [{"type": "swapped_position"}]))
    assert min(x[1].start for x in b["red"]) >= b["blue"][0][1].stop  # now right of the square
    b, _ = blobs(apply_ablations(scene, [{"type": "wrong_shape", "group": 0, "value": "star"}]))
    assert {_shape_of(*x) for x in b["red"]} == {"star"}


def test_incompatible_ablations_are_rejected():
    missing = syn.Ablation("missing_object", 0)
    assert not syn._compatible([missing, syn.Ablation("wrong_colour", 0, "green")], 2)
    assert not syn._compatible([missing, syn.Ablation("swapped_position")], 2)
    assert not syn._compatible([missing, syn.Ablation("missing_object", 1)], 2)  # nothing left
    assert syn._compatible([missing, syn.Ablation("missing_object", 1)], 3)
    assert syn._compatible([missing, syn.Ablation("wrong_colour", 1, "green")], 2)


def test_bad_scene_is_a_clear_error():
    with pytest.raises(ValueError, match="expected shape in"):
        render_scene({"groups": [{"shape": "hexagon", "colour": "red", "count": 1}], "relation": None})
    with pytest.raises(ValueError, match="relation"):
        apply_ablations({"groups": [{"shape": "circle", "colour": "red", "count": 1}], "relation": "left of"}, [])
    with pytest.raises(ValueError, match="ablation type"):
        apply_ablations({"groups": [{"shape": "circle", "colour": "red", "count": 1}], "relation": None},
                        [{"type": "blur"}])


# ------------------------------------------------------------------------------------------
# Determinism and modes
# ------------------------------------------------------------------------------------------
def test_same_seed_gives_identical_files(default_dir, tmp_path):
    again = make_synthetic(tmp_path / "again", n_segs=30, seed=0)
    assert again == tmp_path / "again" / "dataset.yaml"
    first, second = _tree_hashes(default_dir), _tree_hashes(tmp_path / "again")
    assert len(first) > 300 and first == second


def test_other_seed_differs_and_smaller_set_is_a_prefix(ds, tmp_path):
    other = load_seg_file(make_synthetic(tmp_path / "s1", n_segs=6, seed=1, images=False))
    assert [s.prompt for s in other] != [s.prompt for s in ds][:6]
    prefix = load_seg_file(make_synthetic(tmp_path / "s0", n_segs=6, seed=0))
    # the 6-SEG set is compared with the first 6 of the 30: shorter by design
    for a, b in zip(prefix, ds, strict=False):
        assert (a.prompt, a.nodes, sorted(a.graph.edges)) == (b.prompt, b.nodes, sorted(b.graph.edges))
        assert [_tree_hash(i.path) for _, i in a.iter_images()] == [_tree_hash(i.path) for _, i in b.iter_images()]


def _tree_hash(p: Path) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def test_structure_only_writes_no_images_and_same_structure(ds, tmp_path):
    out = tmp_path / "structure"
    path = make_synthetic(out, n_segs=30, seed=0, images=False)
    assert sorted(p.name for p in out.iterdir()) == ["dataset.yaml"]
    st = load_seg_file(path)
    assert validate_dataset(st) == []
    assert st.metadata["images"] is False
    for a, b in zip(st, ds, strict=True):
        assert (a.seg_id, a.prompt, a.subset, a.nodes) == (b.seg_id, b.prompt, b.subset, b.nodes)
        assert sorted(a.graph.edges(data="errors")) == sorted(b.graph.edges(data="errors"))
        assert [(n, i.image_id) for n, i in a.iter_images()] == [(n, i.image_id) for n, i in b.iter_images()]
        assert a.metadata["scene"] == b.metadata["scene"]
    # Paths are recorded, so asking for the files reports each one missing.
    missing = validate_dataset(st, check_images=True)
    assert len(missing) == st.n_images and {p.code for p in missing} == {"missing_image"}
    with pytest.raises(ValueError, match="boxes_file"):
        load_boxes(st)


def test_images_per_node_and_bad_arguments(tmp_path):
    ds1 = load_seg_file(make_synthetic(tmp_path / "one", n_segs=4, seed=0, images=False, images_per_node=1))
    assert all(len(s.images(n)) == 1 for s in ds1 for n in s.graph)
    with pytest.raises(FileExistsError, match="empty folder"):
        make_synthetic(tmp_path / "one", n_segs=4, seed=0, images=False)
    with pytest.raises(ValueError, match="n_segs >= 1"):
        make_synthetic(tmp_path / "zero", n_segs=0, seed=0)
    with pytest.raises(ValueError, match="images_per_node"):
        make_synthetic(tmp_path / "zero", n_segs=2, seed=0, images_per_node=0)


def test_cli_make_synthetic(tmp_path, capsys):
    from omegaconf import OmegaConf

    from ts2.commands.data import make_synthetic as cli

    cfg = OmegaConf.create({"action": "make-synthetic", "out": str(tmp_path / "cli"), "n_segs": 5, "seed": 2,
                            "images": False, "images_per_node": None})
    assert cli(cfg) == 0
    assert "dataset.yaml" in capsys.readouterr().out
    assert len(load_seg_file(tmp_path / "cli" / "dataset.yaml")) == 5


# ------------------------------------------------------------------------------------------
# The cached mini set
# ------------------------------------------------------------------------------------------
def _count_builds(monkeypatch) -> list:
    calls = []
    real = syn.make_synthetic

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(syn, "make_synthetic", spy)
    return calls


def test_load_mini_generates_once_then_reuses_cache(tmp_path, monkeypatch):
    calls = _count_builds(monkeypatch)
    first = load_mini(n_segs=4, seed=0, cache_dir=tmp_path / "c")
    folder = mini_cache_dir(4, 0, tmp_path / "c")
    assert folder.parent == tmp_path / "c" and folder.name.startswith("mini-4-0-")
    stamp = (folder / "dataset.yaml").stat().st_mtime_ns
    second = load_mini(n_segs=4, seed=0, cache_dir=tmp_path / "c", check_images=True)
    assert len(calls) == 1 and (folder / "dataset.yaml").stat().st_mtime_ns == stamp
    assert first.seg_ids == second.seg_ids == ["0", "1", "2", "3"] and first.name == "mini"
    assert [p.name for p in (tmp_path / "c").iterdir()] == [folder.name]  # no leftovers
    # A changed generator gets a new folder and regenerates.
    monkeypatch.setattr(syn, "GENERATOR_VERSION", syn.GENERATOR_VERSION + 1)
    assert mini_cache_dir(4, 0, tmp_path / "c") != folder
    load_mini(n_segs=4, seed=0, cache_dir=tmp_path / "c")
    assert len(calls) == 2


def test_load_mini_default_root_is_env_cache(tmp_path):
    ds = load_mini(n_segs=2, seed=5)
    assert mini_cache_dir(2, 5).parent == tmp_path / "env-cache"
    assert (mini_cache_dir(2, 5) / "dataset.yaml").is_file() and len(ds) == 2


def test_failed_generation_leaves_no_folder(tmp_path, monkeypatch):
    real = syn._render
    n = {"calls": 0}

    def flaky(objects):
        n["calls"] += 1
        if n["calls"] > 5:
            raise RuntimeError("disk on fire")
        return real(objects)

    monkeypatch.setattr(syn, "_render", flaky)
    with pytest.raises(RuntimeError, match="disk on fire"):
        load_mini(n_segs=4, seed=0, cache_dir=tmp_path / "c")
    assert n["calls"] == 6
    assert not mini_cache_dir(4, 0, tmp_path / "c").exists()
    assert list((tmp_path / "c").iterdir()) == []  # the partial folder is gone too
    monkeypatch.setattr(syn, "_render", real)
    assert len(load_mini(n_segs=4, seed=0, cache_dir=tmp_path / "c")) == 4


def test_hydra_dataset_config_instantiates(tmp_path):
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(Path(__file__).parents[1] / "conf" / "dataset" / "mini.yaml")
    cfg.n_segs, cfg.cache_dir = 3, str(tmp_path / "h")
    ds = instantiate(cfg, check_images=True)
    assert len(ds) == 3 and validate_dataset(ds, check_images=True) == []
