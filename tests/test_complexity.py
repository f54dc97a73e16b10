"""Complexity, counted the way a reader pays for it: radon's cyclomatic complexity (which counts boolean operators and
inline conditionals, unlike ruff's mccabe check) and the number of parameters, for every function of the four
packages. New code stays within the bounds; the functions over them when this check was added are listed with their
values in ``tests/complexity_baseline.json`` and may only get simpler (a ratchet: a listed function that is now
within the bounds, or simpler than listed, must be taken off or lowered, so the list only shrinks)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

radon = pytest.importorskip("radon.complexity", reason="radon is in the test extra")

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ts2", "seg_data", "metrics_adapters", "analysis")
MAX_COMPLEXITY = 15
MAX_PARAMETERS = 8  # self/cls not counted; *args/**kwargs count one each
MAX_OVER_COMPLEXITY = 30  # issue 43: at most this many functions over MAX_COMPLEXITY in the four packages
MAX_MODULE_LINES = 700  # issue 43: no library module longer
BASELINE = Path(__file__).with_name("complexity_baseline.json")


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    n = len(names) - (1 if names and names[0] in ("self", "cls") else 0)
    return n + (a.vararg is not None) + (a.kwarg is not None)


def measure() -> dict[str, dict[str, int]]:
    """``path:qualname`` -> ``{"cc": radon complexity, "params": parameters}`` of every function over a bound."""
    out: dict[str, dict[str, int]] = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            src = path.read_text(encoding="utf-8")
            rel = path.relative_to(REPO).as_posix()
            cc = {}
            for block in radon.cc_visit(src):
                for b in [block, *getattr(block, "methods", []), *getattr(block, "closures", [])]:
                    if b.__class__.__name__ in ("Function",):
                        name = f"{b.classname}.{b.name}" if getattr(b, "classname", None) else b.name
                        cc[(name, b.lineno)] = b.complexity
            params = {}
            for node in ast.walk(ast.parse(src)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    params[node.lineno] = (node.name, _parameters(node))
            for (name, line), c in cc.items():
                p = params.get(line, (name, 0))[1]
                if c > MAX_COMPLEXITY or p > MAX_PARAMETERS:
                    key = f"{rel}:{name}"
                    prev = out.get(key, {"cc": 0, "params": 0})
                    out[key] = {"cc": max(c, prev["cc"]), "params": max(p, prev["params"])}
            for line, (name, p) in params.items():  # functions radon does not list (nested ones) by parameters
                if p > MAX_PARAMETERS and not any(line == ln for (_, ln) in cc):
                    key = f"{rel}:{name}"
                    out.setdefault(key, {"cc": 0, "params": p})
    return out


def test_no_function_grows_past_the_bounds():
    found = measure()
    baseline = json.loads(BASELINE.read_text()) if BASELINE.is_file() else {}
    new = {k: v for k, v in found.items() if k not in baseline}
    worse = {k: (baseline[k], v) for k, v in found.items() if k in baseline
             and (v["cc"] > baseline[k]["cc"] or v["params"] > baseline[k]["params"])}
    assert not new, (f"functions over radon complexity {MAX_COMPLEXITY} or {MAX_PARAMETERS} parameters (split them "
                     f"into named concepts, or pass a settings object): {new}")
    assert not worse, f"listed functions got more complex (listed, now): {worse}"


def test_the_baseline_only_shrinks():
    found = measure()
    baseline = json.loads(BASELINE.read_text())
    stale = sorted(k for k in baseline if k not in found)
    simpler = sorted(k for k, v in baseline.items() if k in found and found[k] != v)
    assert not stale and not simpler, (f"update tests/complexity_baseline.json (python tests/test_complexity.py): "
                                       f"now within bounds {stale}; simpler than listed {simpler}")


def test_at_most_30_functions_over_complexity_15_and_no_module_over_700_lines():
    over = sorted(k for k, v in measure().items() if v["cc"] > MAX_COMPLEXITY)
    assert len(over) <= MAX_OVER_COMPLEXITY, f"{len(over)} functions over radon {MAX_COMPLEXITY}: {over}"
    long = {p.relative_to(REPO).as_posix(): n for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by meaning): {long}"


if __name__ == "__main__":  # rewrite the baseline from the tree as it is
    BASELINE.write_text(json.dumps(measure(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {BASELINE}")
