"""The SEG explorer (`ts2 explore`, analysis/report/explorer.py), in a real headless browser.

The browser tests drive Debian's ``chromium`` through ``chromedriver`` with selenium (the test
extra); ``.ci/run`` installs both when missing. Without them those tests skip with the reason; the
data tests (explorer values against ``per_seg.csv`` and an independent Spearman) always run.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from analysis.units import pct


def _ts2(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ts2", *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def _page_data(html_path: Path) -> dict:
    text = html_path.read_text(encoding="utf-8")
    m = re.search(r"<script type='application/json' id='ts2-data'>(.*?)</script>", text, re.S)
    assert m, "no data block in the page"
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def mini_run(tmp_path_factory) -> Path:
    """`ts2 run` on mini (the default line-up: geneval_shapes and three controls), no bootstrap."""
    tmp = tmp_path_factory.mktemp("explore")
    out = tmp / "run"
    r = _ts2("run", f"output_dir={out}", "bootstrap=0", "chance=0", "progress=false", cwd=tmp)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def mini_page(mini_run) -> Path:
    """`ts2 explore` of that run, written to out=FILE (the dataset comes from the run's run.json)."""
    page = mini_run.parent / "page" / "explorer.html"
    r = _ts2("explore", f"results={mini_run}", f"out={page}", f"output_dir={mini_run.parent / 'ex'}",
             "progress=false", cwd=mini_run.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"explorer: {page} (30 SEGs, 397 images, 397 thumbnails" in r.stdout
    return page


def _per_seg(run: Path, metric: str, meta: str = "rank", protocol: str = "graph") -> pd.Series:
    ps = pd.read_csv(run / "per_seg.csv", dtype={"seg_id": str})
    d = ps[(ps.metric == metric) & (ps.protocol == protocol) & (ps.meta_metric == meta)]
    return d.set_index("seg_id")["value"].astype(float)


# -- no browser ------------------------------------------------------------------------------------------
def test_worst_and_best_seg_agree_with_per_seg_csv(mini_run, mini_page):
    data = _page_data(mini_page)
    assert data["protocol"] == "graph" and data["dataset"] == "mini" and len(data["segs"]) == 30
    for metric, pick in (("random", min), ("geneval_shapes", max)):
        mine = {s["id"]: s["metrics"][metric]["values"]["rank"] for s in data["segs"]}
        ref = _per_seg(mini_run, metric)
        target = pick(ref)
        expected = set(ref.index[np.isclose(ref, target)])
        got = {k for k, v in mine.items() if np.isclose(v, pick(mine.values()))}
        assert got == expected, (metric, got, expected)
    # random's worst SEG is one SEG (no ties), and it is the one per_seg.csv ranks last
    assert len({k for k, v in _per_seg(mini_run, "random").items()
                if v == _per_seg(mini_run, "random").min()}) == 1


def test_walk_values_are_spearman_and_average_to_per_seg(mini_run, mini_page):
    """Each walk's value is -spearman(errors, scores) over its images, computed here with scipy from
    scores.csv; under the graph protocol (plain mean over walks) they average to per_seg.csv's value."""
    data = _page_data(mini_page)
    scores = pd.read_csv(mini_run / "scores.csv", dtype={"seg_id": str, "node": str}).set_index("file_name")
    names = [m["name"] for m in data["metrics"]]
    checked = 0
    for seg in data["segs"]:
        for j, metric in enumerate(names):
            m = seg["metrics"][metric]
            ref = _per_seg(mini_run, metric)[seg["id"]]
            vals = [np.nan if v is None else v for v in m["walks"]]
            assert np.isclose(np.nanmean(vals), ref), (seg["id"], metric)
            if metric != "random":
                continue
            for w, value in zip(seg["walks"], m["walks"], strict=True):
                imgs = [(seg["nodes"][i]["level"], scores.at[im["f"], metric]) for i in w for im in seg["nodes"][i]["images"]]
                lv, sc = zip(*imgs, strict=True)
                assert value == pytest.approx(-spearmanr(lv, sc).statistic, abs=1e-12)
                checked += 1
            assert m["worst"] == int(np.nanargmin(vals))
            for node in seg["nodes"]:  # the page shows each image's score from scores.csv
                for im in node["images"]:
                    assert im["s"][j] == pytest.approx(scores.at[im["f"], metric])
    assert checked > 30


def test_report_links_the_explorer(mini_run):
    html = (mini_run / "report.html").read_text()
    assert "<a href='explorer.html'>explorer.html</a>: 30 SEGs, 397 images (397 thumbnails" in html
    manifest = json.loads((mini_run / "manifest.json").read_text())
    assert "explorer.html" in json.dumps(manifest)
    assert _page_data(mini_run / "explorer.html")["protocol"] == "graph"


def test_script_block_escapes_markup():
    from analysis.report.explorer import explorer_html, json_for_script

    payload = "</script><script>alert(1)</script>&amp;"
    block = json_for_script({"prompt": payload})
    assert "<" not in block and ">" not in block and "&" not in block
    assert json.loads(block) == {"prompt": payload}
    page = explorer_html({"title": payload, "segs": []}, {})
    assert page.count("<script") == 3 and page.count("</script>") == 3  # data, thumbnails, our script


def test_explore_bad_input_is_one_clear_error(mini_run, tmp_path):
    r = _ts2("explore", f"results={mini_run}", "metrics=[nope]", f"output_dir={tmp_path / 'x'}", cwd=tmp_path)
    assert r.returncode == 2
    assert "expected metrics among the score columns" in r.stderr and "'nope'" in r.stderr
    r = _ts2("explore", f"results={tmp_path / 'missing'}", f"output_dir={tmp_path / 'y'}", cwd=tmp_path)
    assert r.returncode == 2 and "does not exist" in r.stderr


# -- headless Chromium -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("needs selenium (the test extra: pip install -e '.[test]')")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver; "
                    ".ci/run installs them when it runs as root with apt-get)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000"):
        opts.add_argument(a)
    d = webdriver.Chrome(options=opts, service=Service(executable_path=driver))
    yield d
    d.quit()


def _wait(driver, css: str):
    """The element ``css`` once drawn: a click changes the URL fragment, and the page redraws on
    the ``hashchange`` event, after the click returns."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 10).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def _no_alert(driver) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        text = driver.switch_to.alert.text
    except NoAlertPresentException:
        return
    pytest.fail(f"a script ran: an alert with {text!r} is open")


def test_browser_worst_seg_shows_worst_walk_thumbnails_and_scores(browser, mini_run, mini_page):
    from selenium.webdriver.common.by import By

    browser.get(mini_page.as_uri())
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1"
    rows = browser.find_elements(By.CSS_SELECTOR, "#seg-list tbody tr.seg-row")
    assert len(rows) == 30
    ref = _per_seg(mini_run, "geneval_shapes")
    worst = rows[0].get_attribute("data-seg")
    assert ref[worst] == ref.min()
    head = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#seg-list thead th")]
    assert head[4] == "A: geneval_shapes rank_m (%)", head
    assert rows[0].find_elements(By.TAG_NAME, "td")[4].text == pct(ref[worst])  # per_seg.csv keeps the fraction
    rows[0].click()
    view = _wait(browser, "#seg-view")
    data = next(s for s in _page_data(mini_page)["segs"] if s["id"] == worst)
    n_images = sum(len(n["images"]) for n in data["nodes"])
    cards = view.find_element(By.CSS_SELECTOR, ".nodes")
    assert len(cards.find_elements(By.CSS_SELECTOR, "img.thumb")) == n_images
    scores = cards.find_elements(By.CSS_SELECTOR, "figcaption.score")
    assert len(scores) == n_images
    expected = sorted(f"{im['s'][0]:.3f}" for n in data["nodes"] for im in n["images"])
    assert sorted(s.text for s in scores) == expected
    # the worst walk: highlighted in the walk list and on the graph
    m = data["metrics"]["geneval_shapes"]
    walk = data["walks"][m["worst"]]
    row = view.find_element(By.CSS_SELECTOR, "tr.walk.worst")
    assert row.find_elements(By.TAG_NAME, "td")[0].text == " → ".join(data["nodes"][i]["label"] for i in walk)
    # meta-metric values in % (analysis/units.py), the unit in the header and the sentence, never mixed
    assert row.find_elements(By.TAG_NAME, "td")[1].text == pct(min(v for v in m["walks"] if v is not None))
    assert view.find_element(By.CSS_SELECTOR, ".walks-table th:nth-child(2)").text == "rank_m (%)"
    sentence = view.find_element(By.CSS_SELECTOR, ".panel p.sub").text
    assert sentence.startswith(f"This SEG, in %: rank_m {pct(m['values']['rank'])}, sep_m {pct(m['values']['sep'])} ")
    assert f"(rank_m {pct(m['walks'][m['worst']])})" in sentence and sentence.count("%") == 1
    marked = {e.get_attribute("data-node") for e in view.find_elements(By.CSS_SELECTOR, "svg g.node.worst")}
    assert marked == {data["nodes"][i]["label"] for i in walk}
    assert len(view.find_elements(By.CSS_SELECTOR, "svg path.edge.worst")) == len(walk) - 1
    # view 3: both metrics side by side on this SEG
    browser.find_element(By.ID, "compare").click()
    _wait(browser, "#compare-view")
    panels = browser.find_elements(By.CSS_SELECTOR, "#compare-view .panel")
    assert [p.get_attribute("data-metric") for p in panels] == ["geneval_shapes", "random"]
    assert all(len(p.find_elements(By.CSS_SELECTOR, ".nodes img.thumb")) == n_images for p in panels)


def test_browser_report_table_in_percent_with_the_unit_in_the_header(browser, mini_run):
    """report.html's meta-metric table as a person sees it: percent, the unit in the header, the
    delta_m note exactly when a delta_m number of metametrics.csv (fractions) is above 1."""
    from selenium.webdriver.common.by import By

    from analysis.units import DELTA_NOTE

    browser.get((mini_run / "report.html").as_uri())
    table = browser.find_elements(By.CSS_SELECTOR, "table.mm")[0]
    head = [th.text for th in table.find_elements(By.CSS_SELECTOR, "tr:first-child th")]
    assert head[0] == "meta-metric (values in %)"
    mm = pd.read_csv(mini_run / "metametrics.csv")
    first = mm[mm["protocol"] == mm["protocol"].iloc[0]]
    rank = first[(first.meta_metric == "rank") & (first.subset == "Avg")].set_index("metric")["value"]
    col = next(i for i, h in enumerate(head) if h.split("\n")[0] == "geneval_shapes")
    row = table.find_elements(By.CSS_SELECTOR, "tr")[1].find_elements(By.TAG_NAME, "td")
    assert [row[0].text, row[1].text] == ["rank", "Avg"]
    assert row[col].text.split("\n")[0] == pct(rank["geneval_shapes"])
    delta = mm.loc[mm.meta_metric == "delta", ["value", "ci_low", "ci_high"]].to_numpy(float)
    assert (DELTA_NOTE in browser.find_element(By.TAG_NAME, "body").text) is bool((delta[np.isfinite(delta)] > 1).any())


PAYLOAD_PROMPT = "<script>window.__pwned = 1; alert(1)</script>"
PAYLOAD_ERROR = "<img src=x onerror=\"window.__pwned = 2; alert(2)\">"
PAYLOAD_METRIC = "<svg onload=alert(3)>"


@pytest.fixture(scope="module")
def hostile_page(tmp_path_factory) -> Path:
    """A one-SEG dataset whose prompt, node error and metric name are HTML with scripts."""
    import yaml
    from PIL import Image

    tmp = tmp_path_factory.mktemp("hostile")
    (tmp / "images").mkdir()
    nodes, rows = [], []
    for k, (label, errors) in enumerate((("0", []), ("1", [PAYLOAD_ERROR]), ("2", [PAYLOAD_ERROR, "<b>two</b>"]))):
        imgs = []
        for i in range(2):
            name = f"images/{label}-{i}.png"
            Image.new("RGB", (40, 30), (50 * k, 80, 200 - 60 * i)).save(tmp / name)
            imgs.append({"id": name, "path": name})
            rows.append({"seg_id": "7", "node": label, "file_name": name, PAYLOAD_METRIC: 1.0 - 0.3 * k + 0.05 * i,
                         "plain": 0.1 * k + 0.01 * i})
        nodes.append({"label": label, "errors": errors, "images": imgs})
    doc = {"format": "ts2-seg/1", "name": "hostile", "segs": [{"id": "7", "prompt": PAYLOAD_PROMPT, "nodes": nodes}]}
    (tmp / "dataset.yaml").write_text(yaml.safe_dump(doc))
    (tmp / "scores").mkdir()
    pd.DataFrame(rows).to_csv(tmp / "scores" / "scores.csv", index=False)
    page = tmp / "explorer.html"
    r = _ts2("explore", f"results={tmp / 'scores'}", f"path={tmp / 'dataset.yaml'}", f"out={page}",
             f"output_dir={tmp / 'ex'}", "progress=false", cwd=tmp)
    assert r.returncode == 0, r.stderr[-3000:]
    text = page.read_text()
    assert "<script>window" not in text and "<img src=x" not in text and "<svg onload" not in text
    return page


def test_browser_injected_strings_run_no_script_and_show_as_text(browser, hostile_page):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(hostile_page.as_uri())
    _no_alert(browser)
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1"
    row = browser.find_element(By.CSS_SELECTOR, "#seg-list tbody tr.seg-row")
    assert row.find_elements(By.TAG_NAME, "td")[3].text == PAYLOAD_PROMPT
    options = [o.text for o in Select(browser.find_element(By.ID, "metric-a")).options]
    assert PAYLOAD_METRIC in options
    row.click()
    view = _wait(browser, "#seg-view")
    _no_alert(browser)
    assert PAYLOAD_PROMPT in view.find_element(By.CSS_SELECTOR, "p.prompt").text
    errors = [e.text for e in view.find_elements(By.CSS_SELECTOR, "li.error")]
    assert errors.count(PAYLOAD_ERROR) == 2 and "<b>two</b>" in errors
    assert view.find_element(By.CSS_SELECTOR, ".panel h3").text == PAYLOAD_METRIC
    assert len(view.find_elements(By.CSS_SELECTOR, ".nodes img.thumb")) == 6
    browser.find_element(By.ID, "compare").click()
    _wait(browser, "#compare-view")
    _no_alert(browser)
    # nothing the payloads carry became an element, and none of their handlers ran
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.execute_script("return document.querySelectorAll('#app script, #app img[src=x], "
                                  "#app svg[onload]').length") == 0
    assert browser.execute_script("return Array.from(document.querySelectorAll('b')).map(b => b.textContent)") \
        == ["Prompt: "]  # our own label only: the error's <b>two</b> stayed text


@pytest.mark.shared
def test_release_scores_without_images_give_the_structure_only_view(ts2_dir, tmp_path, request):
    """The released scores (no images/ folder): 165 SEGs, 2,840 images, no thumbnail; each image
    is shown by its file name with its score."""
    an = tmp_path / "an"
    r = _ts2("analyze", f"scores={ts2_dir / 'released' / 'scores_subset.csv'}", f"path={ts2_dir}", "protocols=[graph]",
             "bootstrap=0", "chance=0", "reference=null", f"output_dir={an}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    page = tmp_path / "ts2.html"
    r = _ts2("explore", f"results={an}", f"path={ts2_dir}", f"out={page}", f"output_dir={tmp_path / 'ex'}",
             "progress=false", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"explorer: {page} (165 SEGs, 2840 images, 0 thumbnails" in r.stdout
    data = _page_data(page)
    assert any("2840 of 2840 image(s) have no file on disk" in n for n in data["notes"])
    ref = _per_seg(an, "clipscore")
    mine = {s["id"]: s["metrics"]["clipscore"]["values"]["rank"] for s in data["segs"]}
    assert min(mine, key=lambda k: np.inf if mine[k] is None else mine[k]) == ref.idxmin()
    try:
        driver = request.getfixturevalue("browser")
    except pytest.skip.Exception:
        return  # the data checks above stand without a browser
    from selenium.webdriver.common.by import By

    driver.get(page.as_uri() + "#a=clipscore")
    first = driver.find_element(By.CSS_SELECTOR, "#seg-list tbody tr.seg-row")
    assert first.get_attribute("data-seg") == ref.idxmin()
    first.click()
    _wait(driver, "#seg-view")
    seg = next(s for s in data["segs"] if s["id"] == ref.idxmin())
    n = sum(len(x["images"]) for x in seg["nodes"])
    cards = driver.find_element(By.CSS_SELECTOR, "#seg-view .nodes")
    assert len(cards.find_elements(By.CSS_SELECTOR, "img")) == 0
    names = [e.get_attribute("textContent") for e in cards.find_elements(By.CSS_SELECTOR, ".nothumb")]
    assert sorted(names) == sorted(im["f"] for x in seg["nodes"] for im in x["images"]) and len(names) == n
    assert len(cards.find_elements(By.CSS_SELECTOR, "figcaption.score")) == n
