"""The writer of an analysis folder: per_seg.csv without pandas' row writer, byte for byte."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.pipeline import analyze
from analysis.report.outputs import per_seg_csv, write_outputs


def _awkward() -> pd.DataFrame:
    """SEG ids and subsets the csv writer must quote: a comma, a quote, a line break, spaces."""
    ids = ["plain", "a,b", 'say "x"', "two\nlines", " lead", "7"]
    rng = np.random.default_rng(0)
    rows = [(s, str(lv), f"{j}-{s}-{lv}-{k}", ["x,y", 'q"', "A"][j % 3])
            for j, s in enumerate(ids) for lv in range(3) for k in range(2)]
    df = pd.DataFrame(rows, columns=["seg_id", "node", "file_name", "subset"])
    lv = df["node"].astype(float).to_numpy()
    return df.assign(good=-lv + rng.normal(0, 0.5, len(df)), const=1.0)


def test_per_seg_csv_is_pandas_to_csv_byte_for_byte(tmp_path):
    r = analyze(_awkward(), protocols=["paper", "graph"], bootstrap=0)
    want = r.per_seg_frame().to_csv(index=False)
    assert per_seg_csv(r) == want
    # values to_csv writes in other forms: NaN empty, -0.0, exponents, integral floats, infinities
    v = r.get("graph").seg_values.values
    v.flat[:9] = [np.nan, -0.0, 0.0, 1e-05, 1.5e16, 123.0, np.inf, -np.inf, 0.1 + 0.2]
    assert per_seg_csv(r) == r.per_seg_frame().to_csv(index=False)
    write_outputs(r, tmp_path / "out")
    assert (tmp_path / "out" / "per_seg.csv").read_bytes() == r.per_seg_frame().to_csv(index=False).encode()
