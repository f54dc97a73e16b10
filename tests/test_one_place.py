"""One concept, one place (issue 32): each shared definition exists once in the library, and no
inline copy of it has grown back.

Read from the syntax trees of the four packages (not by importing them), so a second definition
anywhere, even in a module nothing imports, fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.light

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ts2", "seg_data", "metrics_adapters", "analysis")

# name -> the one module that defines it (a def, a class, or a module-level assignment)
HOMES = {
    "KEY_COLUMNS": "seg_data/results.py",                # the score-table key columns
    "METAMETRICS_COLUMNS": "seg_data/results.py",        # the columns ts2 analyze writes ...
    "PER_SEG_COLUMNS": "seg_data/results.py",
    "METAMETRICS_REQUIRED": "seg_data/results.py",       # ... and those a reader requires
    "PER_SEG_REQUIRED": "seg_data/results.py",
    "HUMAN_REQUIRED": "seg_data/results.py",
    "result_set": "seg_data/result_sets.py",             # a result folder written as one set
    "folder_lock": "seg_data/result_sets.py",            # its one-writer lock
    "atomic_write_text": "seg_data/result_sets.py",      # the atomic writer
    "sign_flip_pvalues": "analysis/stats/significance.py",  # the paired sign-flip test
    "Interval": "analysis/stats/intervals.py",           # the interval result type
    "is_ts2_release": "analysis/release.py",             # "is this the TS2 release?"
    "TS2_N_SEGS": "seg_data/ts2_release.py",             # the release constants
    "TS2_LAST_SEG": "seg_data/ts2_release.py",
    "TS2_SUBSETS": "seg_data/ts2_release.py",
    "seg_id_sort_key": "seg_data/model.py",              # the id sort key
    "label_sort_key": "seg_data/model.py",               # the node-label sort key
    "group_means": "analysis/stats/resampling.py",       # the (weighted) group mean
}


@pytest.fixture(scope="module")
def trees() -> dict[str, ast.Module]:
    out = {}
    for pkg in PACKAGES:
        for f in sorted((REPO / pkg).rglob("*.py")):
            out[f.relative_to(REPO).as_posix()] = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
    return out


def definitions(trees: dict[str, ast.Module], name: str) -> list[str]:
    """Modules that define ``name``: def, class, or an assignment to it (imports do not count)."""
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                hit = node.name == name
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                hit = any(isinstance(t, ast.Name) and t.id == name for t in targets)
            else:
                continue
            if hit:
                found.append(path)
    return found


def test_the_trees_are_read(trees):
    # A broken walk (wrong root, no files) would let every test below pass on nothing.
    assert len(trees) > 100 and "analysis/stats/resampling.py" in trees


@pytest.mark.parametrize("name, home", HOMES.items())
def test_one_definition(trees, name, home):
    assert definitions(trees, name) == [home]


def test_the_scan_sees_a_second_definition(trees):
    # The detector finds a copy when there is one (so the test above can fail).
    extra = ast.parse("KEY_COLUMNS = ('seg_id',)\ndef group_means(v, g):\n    return v\nclass Interval:\n    pass\n")
    both = {**trees, "analysis/copy.py": extra}
    for name in ("KEY_COLUMNS", "group_means", "Interval"):
        assert definitions(both, name) == [HOMES[name], "analysis/copy.py"]


def _is_id_sort_key(node: ast.AST) -> bool:
    """``(…, int(x), …) if x.isdigit() else …``: the shape of an id sort key."""
    return (isinstance(node, ast.IfExp) and isinstance(node.test, ast.Call)
            and isinstance(node.test.func, ast.Attribute) and node.test.func.attr == "isdigit"
            and isinstance(node.body, ast.Tuple)
            and any(isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "int"
                    for e in node.body.elts))


def test_no_inline_copy_of_the_id_sort_key(trees):
    where = [f"{path}:{node.lineno}" for path, tree in trees.items() for node in ast.walk(tree)
             if _is_id_sort_key(node)]
    assert len(where) == 1 and where[0].startswith(HOMES["seg_id_sort_key"] + ":"), where
    # the copies this replaced had the shape the scan looks for
    for copy in ('key=lambda k: (0, int(k.name), "") if k.name.isdigit() else (1, 0, k.name)',
                 '(int(x), "") if x.isdigit() else (1 << 30, x)'):
        assert any(_is_id_sort_key(n) for n in ast.walk(ast.parse(copy.removeprefix("key="))))


def test_release_numbers_only_in_seg_data(trees):
    # The release's SEG count and last id are read from seg_data.ts2_release by name everywhere
    # else (metrics_adapters is left out: a hue edge of 165 degrees is not the release).
    where = [f"{path}:{node.lineno} {node.value!r}" for path, tree in trees.items()
             if not path.startswith("metrics_adapters/") and path != HOMES["TS2_N_SEGS"]
             for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and not isinstance(node.value, bool)
             and node.value in (164, 165, "164", "165")]
    assert where == []


def test_every_interval_type_is_an_interval(trees):
    # Result types named like an interval extend the one Interval (BootstrapCI adds value, n_boot).
    named = [(path, node) for path, tree in trees.items() for node in ast.walk(tree)
             if isinstance(node, ast.ClassDef) and node.name != "Interval"
             and (node.name.endswith("CI") or node.name.endswith("Interval"))]
    assert named, "expected at least BootstrapCI"
    for path, node in named:
        bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
        assert "Interval" in bases, f"{path}: class {node.name} does not extend analysis.stats.Interval"


def test_one_group_mean_behind_every_name():
    from analysis import aggregate, stats
    from analysis.stats import resampling

    assert aggregate.group_means is stats.group_means is resampling.group_means
    # The bootstrap's replicates are the weighted call, value for value.
    rng = np.random.default_rng(0)
    values = rng.random((4, 12))
    values[1, :3] = np.nan
    groups = [("Avg", np.arange(12)), ("A", np.arange(6))]
    counts = resampling.stratified_counts(["A"] * 6 + ["B"] * 6, 30, rng)
    np.testing.assert_array_equal(resampling.bootstrap_group_means(values, counts, groups),
                                  resampling.group_means(values, groups, counts)[0])


def test_the_shared_statistics_are_used(trees):
    """The human view calls the shared sign-flip test and group mean (no local copies)."""
    def calls(path: str) -> set[str]:
        return {n.func.id for n in ast.walk(trees[path]) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}

    assert "sign_flip_pvalues" in calls("analysis/human/paired.py")
    assert "sign_flip_pvalues" in calls("analysis/compare.py")
    assert "group_means" in calls("analysis/human/bootstrap.py")
    assert "group_means" in calls("analysis/pipeline.py") and "bootstrap_group_means" in calls("analysis/pipeline.py")
