"""TIFA and DSG accumulation on hand-made and random dependency graphs."""

from __future__ import annotations

import math
import random

import networkx as nx
import numpy as np
import pytest

from metrics_adapters.qa.accumulate import accumulate, dsg_accumulate, dsg_gate, tifa_accumulate
from metrics_adapters.qa.questions import Question, build_dependency_graph, parse_parents


def _graph(parents: dict[str, str]) -> nx.DiGraph:
    """Graph from released-style parent cells: {"2": "0-1"} means 2 depends on 0 and 1."""
    qs = [Question(q, f"q{q}?", ("yes", "no"), "yes", parse_parents(p)) for q, p in parents.items()]
    return build_dependency_graph(qs)


def _reference_gate(correct: dict[str, bool], parents: dict[str, str]) -> dict[str, bool]:
    """Independent reference: recursive walk up the parent lists, no networkx."""
    def ok(q: str) -> bool:
        return correct[q] and all(ok(p) for p in parse_parents(parents[q]))
    return {q: ok(q) for q in correct}


def test_tifa_is_the_fraction_correct():
    assert tifa_accumulate([True, False, True, True]) == 0.75
    assert tifa_accumulate({"a": False, "b": False}) == 0.0
    assert tifa_accumulate(np.array([True, True, True])) == 1.0
    assert math.isnan(tifa_accumulate([]))


def test_tifa_rejects_unanswered_questions():
    with pytest.raises(ValueError, match="expected True/False for question 1"):
        tifa_accumulate([True, None])
    with pytest.raises(ValueError):
        tifa_accumulate([True, 0.5])


def test_dsg_multi_parent_needs_every_parent():
    # 0, 1 roots; 2 depends on both ("0-1"); 3 depends on 2 (so transitively on 0 and 1).
    parents = {"0": "-1", "1": "-1", "2": "0-1", "3": "2"}
    g = _graph(parents)
    assert sorted(g.edges) == [("0", "2"), ("1", "2"), ("2", "3")]
    correct = {"0": True, "1": False, "2": True, "3": True}
    # 1 fails -> 2 fails although answered right -> 3 fails through its grandparent.
    assert dsg_gate(correct, g) == {"0": True, "1": False, "2": False, "3": False}
    assert dsg_accumulate(correct, g) == 0.25
    # TIFA accumulation on the same answers ignores the graph: 3 of 4.
    assert accumulate("tifa", correct, g) == 0.75
    correct["1"] = True
    assert dsg_accumulate(correct, g) == 1.0


def test_dsg_gating_is_transitive_not_only_direct_parents():
    # Chain 0 -> 1 -> 2: 1 answered wrong but 2 answered right: 2 still fails.
    g = _graph({"0": "-1", "1": "0", "2": "1"})
    assert dsg_gate({"0": True, "1": False, "2": True}, g) == {"0": True, "1": False, "2": False}
    # A failing root fails the whole chain, even with both children answered right.
    assert dsg_accumulate({"0": False, "1": True, "2": True}, g) == 0.0


def test_dsg_on_a_set_without_dependencies_equals_tifa():
    correct = {"0": True, "1": False, "2": True}
    assert accumulate("dsg", correct) == accumulate("tifa", correct) == pytest.approx(2 / 3)


@pytest.mark.parametrize("seed", range(5))
def test_dsg_gate_matches_a_plain_recursive_reference_on_random_dags(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 12)
    parents = {}
    for q in range(n):
        k = rng.choice([0, 0, 1, 1, 2, 3]) if q else 0
        ps = rng.sample(range(q), min(k, q))
        parents[str(q)] = "-".join(map(str, ps)) if ps else "-1"
    # Tie-heavy answers: mostly right, as in real data.
    correct = {str(q): rng.random() < 0.7 for q in range(n)}
    g = _graph(parents)
    ref = _reference_gate(correct, parents)
    assert dsg_gate(correct, g) == ref
    assert dsg_accumulate(correct, g) == pytest.approx(sum(ref.values()) / n)


def test_dsg_gate_rejects_mismatched_ids_and_cycles():
    g = _graph({"0": "-1", "1": "0"})
    with pytest.raises(ValueError, match="exactly the graph's questions"):
        dsg_gate({"0": True}, g)
    cyc = nx.DiGraph([("0", "1"), ("1", "0")])
    with pytest.raises(ValueError, match="acyclic"):
        dsg_gate({"0": True, "1": True}, cyc)


def test_unknown_accumulation_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"\['dsg', 'tifa'\]"):
        accumulate("mean", {"0": True})
