"""Size and load time of the SEG explorer on TS2-sized data (165 SEGs, 2,840 images), run by hand.

    python benchmarks/explorer_speed.py [--ts2 ../shared/ts2] [--side 512] [--workdir DIR] [--no-browser]

The release has no images here, so each of its 2,840 ``file_name`` entries gets a seeded
noise JPEG of ``--side`` pixels (noise is JPEG's worst case: the largest thumbnails). The
released scores (``released/scores_subset.csv``) are analysed without a bootstrap, then
:func:`analysis.report.explorer.write_explorer` builds the page.

Reported: thumbnail/page build time, page size (target: < 50 MB), and, in headless Chromium
(selenium + chromedriver), the time from navigation start to the page's ``load`` event and to
the first view drawn (target: < 2 s), and the time to open the worst SEG's view.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _images(ts2: Path, work: Path, side: int) -> Path:
    from PIL import Image

    root = work / "ts2"
    (root / "images").mkdir(parents=True, exist_ok=True)
    shutil.copy(ts2 / "metadata.csv", root / "metadata.csv")
    rng = np.random.default_rng(0)
    names = pd.read_csv(ts2 / "metadata.csv")["file_name"]
    for name in names:
        p = root / name
        if not p.exists():
            px = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
            Image.fromarray(px).save(p, "JPEG", quality=90)
    return root


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ts2", default=str(REPO.parent / "shared" / "ts2"))
    ap.add_argument("--side", type=int, default=512)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--no-browser", action="store_true")
    a = ap.parse_args()
    from analysis.pipeline import analyze
    from analysis.report.explorer import write_explorer
    from analysis.report.merged import MergedResults
    from seg_data import load_path

    ts2 = Path(a.ts2)
    work = Path(a.workdir or tempfile.mkdtemp(prefix="ts2-explorer-bench-"))
    t = time.perf_counter()
    root = _images(ts2, work, a.side)
    print(f"images: 2840 noise JPEGs of {a.side} px in {root} ({time.perf_counter() - t:.1f} s)")
    ds = load_path(root)
    scores = pd.read_csv(ts2 / "released" / "scores_subset.csv", dtype={"seg_id": str, "node": str})
    res = analyze(scores, dataset=ds, protocols=["paper", "graph"], bootstrap=0)
    merged = MergedResults(scores=scores, metametrics=res.metametrics_frame(), per_seg=res.per_seg_frame(),
                           flops={}, lower_is_better=frozenset(), runs=(), dataset="ts2")
    t = time.perf_counter()
    out = write_explorer(merged, work / "explorer.html", ds, progress=False)
    build = time.perf_counter() - t
    print(f"page: {out.size_bytes / 2**20:.1f} MB (target < 50), {out.n_segs} SEGs, {out.n_images} images, "
          f"{out.n_thumbnails} thumbnails, built in {build:.1f} s")
    if a.no_browser:
        return 0
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        opts.add_argument(arg)
    d = webdriver.Chrome(options=opts, service=Service(executable_path=shutil.which("chromedriver")))
    try:
        loads, opens = [], []
        for _ in range(3):
            d.get(out.html.as_uri())
            nav = d.execute_script("const t = performance.getEntriesByType('navigation')[0]; "
                                   "return [t.loadEventEnd, t.domContentLoadedEventEnd];")
            loads.append(max(nav) / 1000)
            t = time.perf_counter()
            d.find_elements(By.CSS_SELECTOR, "#seg-list tbody tr.seg-row")[0].click()
            d.find_element(By.ID, "seg-view")
            opens.append(time.perf_counter() - t)
        print(f"load (navigation start to load event): best {min(loads):.2f} s, worst {max(loads):.2f} s "
              f"(target < 2); worst SEG's view: {min(opens):.2f} s")
    finally:
        d.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
