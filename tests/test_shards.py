"""``shard=i/n``: deterministic, disjoint and complete split of image ids (seg_data.shards)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seg_data.shards import Shard, parse_shard, shard_index, shard_indices, shard_mask, split_ids

ids_strategy = st.lists(st.text(min_size=1, max_size=30), min_size=0, max_size=60, unique=True)


@settings(max_examples=60, deadline=None)
@given(ids=ids_strategy, n=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_split_is_disjoint_complete_and_order_independent(ids, n, seed):
    parts = [Shard(i, n).select(ids) for i in range(n)]
    flat = [x for p in parts for x in p]
    assert sorted(flat) == sorted(ids)  # complete, and no id twice (ids are unique)
    assert len(flat) == len(set(flat))
    assert split_ids(ids, n) == parts
    # The same ids in another order land in the same shards.
    perm = list(np.random.default_rng(seed).permutation(len(ids)))
    shuffled = [ids[k] for k in perm]
    assert [set(Shard(i, n).select(shuffled)) for i in range(n)] == [set(p) for p in parts]
    # A dataset grown by extra rows keeps the old images where they were.
    grown = shuffled + ["__extra_%d" % k for k in range(5)]
    for i in range(n):
        assert set(parts[i]) <= set(Shard(i, n).select(grown))


def test_known_values_pin_the_hash():
    # Changing the hash would move images between shards of a half-finished sweep; these values
    # are the BLAKE2b-64 digest mod n, computed here independently of the module.
    for image_id, n in [("images/000-01.jpg", 7), ("images/164-03.jpg", 4), ("a", 2), ("ü/ñ.png", 5)]:
        ref = int.from_bytes(hashlib.blake2b(image_id.encode("utf-8"), digest_size=8).digest(), "big") % n
        assert shard_index(image_id, n) == ref
    assert (shard_index("images/000-01.jpg", 7), shard_index("images/164-03.jpg", 4), shard_index("a", 2)) == (5, 3, 1)
    assert shard_index("anything", 1) == 0


def test_independent_of_python_hash_seed():
    code = "from seg_data.shards import shard_indices; print(list(shard_indices([f'img{i}' for i in range(40)], 3)))"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1 and outs.pop().strip() == str(list(shard_indices([f"img{i}" for i in range(40)], 3)))


def test_balanced_on_ts2_sized_ids():
    ids = [f"images/{s:03d}-{k:02d}.jpg" for s in range(165) for k in range(17)]  # 2805 ids
    counts = np.bincount(shard_indices(ids, 4), minlength=4)
    assert counts.sum() == len(ids)
    # binomial sd is ~23 images; 4 sd either side of 701
    assert np.all(np.abs(counts - len(ids) / 4) < 95), counts


@pytest.mark.parametrize("spec,expected", [("0/4", Shard(0, 4)), (" 3 / 4 ", Shard(3, 4)), ("0/1", Shard(0, 1)),
                                           ((1, 2), Shard(1, 2)), ([1, 2], Shard(1, 2)), (None, None), ("", None),
                                           ("none", None), ("null", None), (Shard(2, 3), Shard(2, 3))])
def test_parse_shard_accepts(spec, expected):
    assert parse_shard(spec) == expected


@pytest.mark.parametrize("spec,exc,match", [
    ("4/4", ValueError, r"0 <= i < n.*got 4/4.*0/4 \.\.\. 3/4"),
    ("-1/4", ValueError, "got -1/4"),
    ("1/0", ValueError, "n >= 1 in shard=i/n, got n=0"),
    ("1-4", ValueError, "expected shard=i/n.*got '1-4'"),
    ("a/b", ValueError, "got 'a/b'"),
    ("1/2/3", ValueError, "got '1/2/3'"),
    (3, TypeError, "got 3 \\(int\\)"),
    (1.5, TypeError, "float"),
    ((1.0, 2), TypeError, "integer shard"),
])
def test_parse_shard_errors(spec, exc, match):
    with pytest.raises(exc, match=match):
        parse_shard(spec)


def test_mask_and_errors():
    ids = ["a", "b", "c", "d", "e", "f"]
    assert shard_mask(ids, None).all()
    m0, m1 = shard_mask(ids, "0/2"), shard_mask(ids, "1/2")
    assert (m0 ^ m1).all()  # exactly one shard holds each id
    assert [x for x, k in zip(ids, m1, strict=True) if k] == Shard(1, 2).select(ids)
    with pytest.raises(TypeError, match="expected an image id of type str, got nan"):
        shard_index(float("nan"), 2)
    with pytest.raises(ValueError, match="n >= 1"):
        split_ids(ids, 0)
    assert str(Shard(1, 4)) == "1/4"
