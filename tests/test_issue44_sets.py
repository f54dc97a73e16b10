"""Issue 44: every human-judgment set in one registry and one call (loaders, ROC AUC, ceiling, clusters, tables).

Hub-only sets are tested on files written here in their real formats (tests/issue44_fixtures.py); each format has a
malformed-record test whose error names the file and the record. SeeTRUE's AUROC is checked against scikit-learn.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import issue44_fixtures as fx
import numpy as np
import pandas as pd
import pytest
from conftest import shared_path
from omegaconf import OmegaConf
from scipy import stats as ss

from analysis import human as H
from analysis.human.view import KIND_STATISTICS
from analysis.stats import holm, significance_clusters
from seg_data import human as SH


# -- ROC AUC -----------------------------------------------------------------------------------------------
def test_roc_auc_equals_sklearn_on_random_and_tie_heavy_scores():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(4, 300))
        y = rng.integers(0, 2, n)
        if y.min() == y.max():
            y[0] = 1 - y[0]
        x = rng.normal(size=n) + y * rng.random()
        if rng.random() < 0.5:
            x = np.round(x, 0)  # tie-heavy
        assert H.roc_auc(x, y) == pytest.approx(sk.roc_auc_score(y, x), abs=1e-12)
    assert math.isnan(H.roc_auc([0.1, 0.2], [1, 1]))
    with pytest.raises(ValueError, match="expected 0/1 labels"):
        H.roc_auc([0.1, 0.2], [1, 2])


def test_auc_bootstrap_replicates_are_the_statistic_on_resampled_items():
    rng = np.random.default_rng(1)
    n, G = 60, 12
    codes = rng.integers(0, G, n)
    y = rng.integers(0, 2, n).astype(float)
    x = np.round(rng.normal(size=n) + y, 1)
    draws = H.draw_clusters(G, 25, 3)
    reps = H.bootstrap.bootstrap_replicates(x, y, codes, G, draws, "roc_auc", "global")
    for b in range(25):
        idx = np.concatenate([np.flatnonzero(codes == g) for g in draws[b]])
        assert reps[b] == pytest.approx(H.roc_auc(x[idx], y[idx]), abs=1e-12, nan_ok=True)


@pytest.mark.shared
def test_seetrue_auroc_global_and_per_source_equal_sklearn(tmp_path):
    """A known synthetic score on SeeTRUE's real labels: the CLI's AUROCs are scikit-learn's, with intervals."""
    sk = pytest.importorskip("sklearn.metrics")
    from ts2.commands.analyze_human import human_main

    src = shared_path("human", "SeeTRUE.csv")
    df = pd.read_csv(src)
    rng = np.random.default_rng(7)
    score = df["label"] * 0.8 + rng.normal(size=len(df))
    scores = tmp_path / "s.csv"
    pd.DataFrame({"image": df["image"], "synthetic": score, "rounded": np.round(score)}).to_csv(scores, index=False)
    out = tmp_path / "out"
    cfg = OmegaConf.create({"human": str(src), "human_scores": str(scores), "bootstrap": 40, "output_dir": str(out),
                            "human_permutations": 30, "progress": False})
    assert human_main(cfg) == 0
    res = pd.read_csv(out / "human_metametrics.csv").set_index(["metric", "statistic", "grouping", "subset"])
    for m in ("synthetic", "rounded"):
        assert res.loc[(m, "roc_auc", "global", "all"), "value"] == pytest.approx(
            sk.roc_auc_score(df["label"], pd.read_csv(scores)[m]), abs=1e-12)
        for source, part in df.groupby("dataset_source"):
            row = res.loc[(m, "roc_auc", "global", f"dataset_source={source}")]
            assert row["value"] == pytest.approx(sk.roc_auc_score(part["label"], pd.read_csv(scores)[m][part.index]),
                                                 abs=1e-12)
            assert row["ci_low"] <= row["value"] <= row["ci_high"]
            assert row["n"] == len(part)
    assert res.loc[("synthetic", "roc_auc", "global", "all"), "cluster"] == 1
    assert "rater_ceiling" not in res.index.get_level_values(0)  # one label per pair: no ceiling


# -- rater ceiling ---------------------------------------------------------------------------------------
def test_rater_ceiling_equals_a_plain_loop_and_shares_the_metrics_draws():
    rng = np.random.default_rng(2)
    n, R = 40, 4
    groups = np.repeat(np.arange(10), 4).astype(str)
    q = rng.normal(size=n)
    r = np.clip(np.round(3 + q[:, None] + rng.normal(scale=0.7, size=(n, R))), 1, 5)
    r[rng.random((n, R)) < 0.2] = np.nan
    for st, grouping in (("kendall_b", "global"), ("spearman", "prompt"), ("pairwise_acc", "global"),
                         ("pairwise_acc", "prompt")):
        vals = []
        for j in range(R):
            others = np.delete(r, j, axis=1)
            ok = np.isfinite(r[:, j]) & np.isfinite(others).any(axis=1)
            vals.append(H.human_statistic(r[ok, j], np.nanmean(others[ok], axis=1), groups[ok], st, grouping))
        c = H.rater_ceiling(r, groups, st, grouping, n_boot=30, seed=4)
        assert c.ci.value == pytest.approx(np.nanmean(vals), abs=1e-12)
        assert c.n_raters == R and c.ci.low <= c.ci.value <= c.ci.high
    # One rater: no ceiling.
    assert H.rater_ceiling(r[:, :1], groups, "pearson", n_boot=0) is None


# -- paired tests and clusters -------------------------------------------------------------------------------
def test_significance_clusters_follow_mt_metrics_eval_assign_ranks():
    def assign_ranks(sig, pval):  # transcription of mt_metrics_eval.data.AssignRanks (with <)
        ranks, current, start = [0] * len(sig), 1, 0
        for i in range(len(sig)):
            if any(v < pval for v in sig[:, i][start:i]):
                current += 1
                start = i
            ranks[i] = current
        return ranks

    rng = np.random.default_rng(5)
    for _ in range(50):
        n = int(rng.integers(1, 9))
        p = np.triu(rng.random((n, n)) ** 3, 1)
        assert significance_clusters(p, 0.05).tolist() == assign_ranks(p, 0.05)
    assert significance_clusters(np.zeros((0, 0))).tolist() == []


def test_pearson_prompt_swaps_vectorised_equal_the_loop():
    from analysis.human.vectorized import swapped_pearson_diffs

    rng = np.random.default_rng(6)
    n, G = 50, 9
    codes = rng.integers(0, G, n)
    a, b, h = rng.normal(size=n), rng.normal(size=n), np.round(rng.normal(size=n))
    flips = rng.random((20, G)) < 0.5
    got = swapped_pearson_diffs(a, b, h, codes, G, flips)
    for k in range(20):
        s = flips[k][codes]
        want = ss.pearsonr(np.where(s, b, a), h).statistic - ss.pearsonr(np.where(s, a, b), h).statistic
        assert got[k] == pytest.approx(want, abs=1e-12)


def test_pair_permutation_test_scores_each_pair_at_each_metrics_threshold():
    rng = np.random.default_rng(8)
    h = rng.integers(1, 6, 40).astype(float)
    a, b = h + rng.normal(scale=0.5, size=40), rng.normal(size=40)
    t = H.pairwise_acc_permutation_test(a, b, h, np.zeros(40), "global")
    assert t.value_a == pytest.approx(H.tie_calibrated_pairwise_accuracy(a, h).accuracy, abs=1e-12)
    assert t.value_b == pytest.approx(H.tie_calibrated_pairwise_accuracy(b, h).accuracy, abs=1e-12)
    assert 0 < t.p_value < 1e-3  # a tracks h, b does not
    same = H.pairwise_acc_permutation_test(a, a, h, np.zeros(40), "global")
    assert same.p_value == 1.0 and same.diff == 0


def test_clusters_in_the_view_come_from_holm_adjusted_tests(tmp_path):
    hj = SH.load_human(SH.make_synthetic_human(tmp_path / "h.csv", n_prompts=20, seed=1))
    res = H.run_human_view(hj, tmp_path / "o", n_boot=0, n_perm=200, progress=False)
    tests = res.tests
    for (st, g), cell in tests[tests.test != "williams"].groupby(["statistic", "grouping"]):
        assert np.allclose(cell.p_holm, holm(cell.p_value), equal_nan=True)
        rows = res.results[(res.results.statistic == st) & (res.results.grouping == g)
                           & res.results.metric.isin(hj.metrics)].sort_values("value", ascending=False)
        assert rows.cluster.iloc[0] == 1 and rows.cluster.is_monotonic_increasing
    best = res.results.set_index(["metric", "statistic", "grouping"]).loc[("oracle", "kendall_b", "global")]
    worst = res.results.set_index(["metric", "statistic", "grouping"]).loc[("random", "kendall_b", "global")]
    assert best.cluster == 1 and worst.cluster > 1


# -- hub-only sets in their real formats --------------------------------------------------------------------
def test_genai_bench_fixture_loads_with_skills(tmp_path):
    latent = fx.write_genai_bench(tmp_path / "genai")
    for spec in (tmp_path / "genai", tmp_path / "genai" / "genai_image.json", f"genai_bench:{tmp_path / 'genai'}"):
        hj = SH.load_human_set(spec)
        assert hj.name == "genai_bench" and hj.kind == "likert"
    assert hj.n_items == 8 * 6 and hj.n_prompts == 8 and hj.raters == ("r0", "r1", "r2")
    raw = json.loads((tmp_path / "genai" / "genai_image.json").read_text())
    assert hj.items.loc["Midjourney_6/00003", "human"] == pytest.approx(np.mean(raw["00003"]["models"]["Midjourney_6"]))
    assert hj.categories["skill=counting"].sum() == 3 * 6  # prompts 2, 4, 6
    assert bool(hj.categories.loc["DALLE_3/00008", "skill=negation"])
    assert set(latent) == set(hj.items.index)


def test_t2i_eval_bench_fixture_loads_three_annotators(tmp_path):
    fx.write_t2i_eval_bench(tmp_path / "t2i")
    hj = SH.load_human_set(tmp_path / "t2i")
    assert hj.name == "t2i_eval_bench" and hj.raters == ("annotator_1", "annotator_2", "annotator_3")
    raw = json.loads((tmp_path / "t2i" / "scores.json").read_text())
    assert hj.items.loc["4", "human"] == pytest.approx(np.mean(raw[4]["overall"]["overall"]["manual_score"][:3]))
    assert hj.metrics == ("t2i_eval_gpt4o",) and hj.scores("t2i_eval_gpt4o")[4] == raw[4]["overall"]["overall"]["score"]
    assert hj.n_prompts == 10 and hj.items.loc["4", "prompt"] == "caption 1"


def test_hpdv2_fixture_loads_ranks_and_annotators(tmp_path):
    fx.write_hpdv2(tmp_path / "hpd")
    hj = SH.load_human_set(tmp_path / "hpd" / "test.json")
    assert hj.name == "hpdv2" and hj.kind == "ranked" and hj.n_items == 40 and hj.n_prompts == 10
    raw = json.loads((tmp_path / "hpd" / "test.json").read_text())
    assert hj.items.loc["003_2.jpg", "human"] == -raw[3]["rank"][2]
    user = raw[3]["raw_annotations"][0]
    assert hj.ratings.loc["003_1.jpg", user["user_hash"]] == -user["rank"][1]


def test_imagereward_fixture_loads_from_parquet_and_json(tmp_path):
    pytest.importorskip("pyarrow")
    fx.write_imagereward(tmp_path / "ir")
    hj = SH.load_human_set(tmp_path / "ir")
    assert hj.name == "imagereward_db" and hj.kind == "ranked" and len(hj.raters) == 1
    rows, _ = fx.imagereward_records()
    assert hj.n_items == len(rows)
    assert hj.items.loc[rows[0]["image_path"], "human"] == -rows[0]["rank"]
    assert hj.categories[f"classification={rows[0]['classification']}"].sum() > 0
    (tmp_path / "ir.json").write_text(json.dumps(rows))
    from_json = SH.load_human_set(tmp_path / "ir.json")
    assert from_json.items["human"].equals(hj.items["human"])


@pytest.mark.parametrize("family, write, breaker, expected", [
    ("genai_bench", lambda d: fx.write_genai_bench(d), ("genai_image.json", lambda data: data["00003"]["models"].update(
        {"SDXL_Base": [4, "five", 3]})), r"genai_image\.json, record '00003': expected the ratings of model 'SDXL_Base'"),
    ("t2i_eval_bench", lambda d: fx.write_t2i_eval_bench(d), ("scores.json", lambda data: data[5]["overall"].pop(
        "overall")), r"scores\.json, record 5: expected overall\.overall\.manual_score"),
    ("hpdv2", lambda d: fx.write_hpdv2(d), ("test.json", lambda data: data[2].update({"rank": [1, 2]})),
     r"test\.json, record 2: expected 'rank' to be a list of 4 non-negative ranks"),
])
def test_a_malformed_record_names_the_file_and_record(tmp_path, family, write, breaker, expected):
    folder = tmp_path / family
    write(folder)
    name, edit = breaker
    data = json.loads((folder / name).read_text())
    edit(data)
    (folder / name).write_text(json.dumps(data))
    with pytest.raises(ValueError, match=expected):
        SH.load_human_set(f"{family}:{folder}")


def test_a_malformed_imagereward_row_names_the_file_and_row(tmp_path):
    pytest.importorskip("pyarrow")
    rows, _ = fx.imagereward_records()
    rows[4]["rank"] = rows[4]["image_amount_in_total"] + 3
    (tmp_path / "ir").mkdir()
    pd.DataFrame(rows).to_parquet(tmp_path / "ir" / "metadata-test.parquet", index=False)
    with pytest.raises(ValueError, match=r"metadata-test\.parquet, row 4: expected a rank from 1 to "
                                         r"image_amount_in_total"):
        SH.load_human_set(tmp_path / "ir")


def test_malformed_shared_formats_name_file_and_row(tmp_path):
    dsg = tmp_path / "dsg.csv"
    dsg.write_text("data_type,model_type,item_id,source_id,worker_id,question,answer\n"
                   "tifa160,sd2dot1,1,coco_1,3,q,5\ntifa160,sd9,2,coco_1,3,q,4\n")
    with pytest.raises(ValueError, match=r"dsg\.csv, row 3: expected model_type in"):
        SH.load_human(dsg)
    see = tmp_path / "see.csv"
    see.write_text("image,text,label,original_dataset_id,dataset_source\na.png,t,1,x,drawbench\nb.png,t,yes,y,drawbench\n")
    with pytest.raises(ValueError, match=r"see\.csv, row 3: expected label 0 or 1, got 'yes'"):
        SH.load_human(see)


def test_registry_answers_unknown_names_and_offline_hub_with_the_hint(monkeypatch, tmp_path):
    with pytest.raises(KeyError, match="unknown human-judgment set 'richhf'.*expected one of"):
        SH.load_human_set(f"richhf:{tmp_path}")
    with pytest.raises(FileNotFoundError, match="expected a human-judgment file .* at"):
        SH.load_human_set(tmp_path / "nope.csv")
    import huggingface_hub

    def offline(**kw):
        raise huggingface_hub.errors.LocalEntryNotFoundError("offline")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    for name in ("genai_bench", "t2i_eval_bench", "hpdv2", "imagereward_db", "seetrue", "evalmuse"):
        fam = SH.family(name)
        with pytest.raises(RuntimeError, match=rf"could not download {fam.hub_repo} .*hf download {fam.hub_repo} "
                                               rf".*--repo-type dataset --local-dir DIR\) and pass human={name}:DIR"):
            SH.load_human_set(name)
    assert [f.name for f in SH.families()] == list(SH.HUMAN_SETS)


def test_every_family_documents_itself():
    """The registry is the docs table's source: every family has its format, size, license and how to get it, and
    docs/human.md holds the table generated from it (regenerate with analysis.human.sets.families_markdown())."""
    from analysis.human.sets import families_markdown

    doc = Path(__file__).resolve().parents[1].joinpath("docs", "human.md").read_text()
    for f in SH.families():
        assert f.kind in SH.KINDS and f.file_format and f.size and f.license and f.get and f.raters
    assert families_markdown() in doc


# -- many sets in one call ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def many(tmp_path_factory):
    from ts2.commands.analyze_human import human_main

    d = tmp_path_factory.mktemp("many")
    lat_g = fx.write_genai_bench(d / "genai")
    lat_h = fx.write_hpdv2(d / "hpd")
    lat_t = fx.write_t2i_eval_bench(d / "t2i")
    entries = [f"genai_bench:{d / 'genai'}", str(d / "hpd" / "test.json"), str(d / "t2i")]
    scores = [str(fx.write_scores(d / f"s{i}.csv", lat)) for i, lat in enumerate((lat_g, lat_h, lat_t))]
    cfg = OmegaConf.create({"human": entries, "human_scores": scores, "bootstrap": 30, "human_permutations": 40,
                            "output_dir": str(d / "out"), "progress": False})
    assert human_main(cfg) == 0
    return d / "out"


def test_many_sets_write_one_long_table_and_a_summary(many):
    long = pd.read_csv(many / "human_sets.csv")
    assert list(long.columns) == ["set", "kind", "metric", "statistic", "grouping", "subset", "value", "ci_low",
                                  "ci_high", "n", "cluster"]
    assert set(long.set) == {"genai_bench", "hpdv2", "t2i_eval_bench"}
    for s in ("genai_bench", "hpdv2", "t2i_eval_bench"):
        per_set = pd.read_csv(many / s / "human_metametrics.csv")
        mine = long[long.set == s].drop(columns=["set", "kind"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, per_set, check_dtype=False)
    hpd = long[long.set == "hpdv2"]
    assert set(hpd[hpd.metric != "human"].grouping) == {"prompt"} and set(hpd[hpd.metric == "good"].statistic) == {
        *KIND_STATISTICS["ranked"][0], "pairwise_acc_epsilon"}
    assert (hpd.metric == "rater_ceiling").any()  # per-annotator ranks: a ceiling
    skills = long[(long.set == "genai_bench") & (long.subset == "skill=counting") & (long.metric == "good")]
    assert len(skills) > 0
    summary = pd.read_csv(many / "human_summary.csv")
    assert list(summary.metric[:1]) == ["rater_ceiling"] and {"good", "weak", "random"} <= set(summary.metric)
    good = summary.set_index("metric").loc["good"]
    assert good["genai_bench cluster"] == 1 and good["hpdv2 cluster"] == 1
    md = (many / "human_summary.md").read_text()
    assert "| metric | genai_bench | hpdv2 | t2i_eval_bench |" in md


def test_the_report_section_in_headless_chromium(many):
    """The page opens in real Chromium and shows the summary, the ceiling row and the per-skill table."""
    import shutil

    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
    except ImportError:
        pytest.skip("needs selenium (the test extra)")
    chromium, driver = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("needs Debian's chromium and chromium-driver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1300,1800"):
        opts.add_argument(a)
    d = webdriver.Chrome(options=opts, service=Service(executable_path=driver))
    try:
        d.get((many / "human_report.html").as_uri())
        tables = d.find_elements(By.TAG_NAME, "table")
        assert len(tables) >= 3
        summary = tables[1].text
        assert "rater ceiling" in summary and "good" in summary and "genai_bench" in summary
        assert d.find_elements(By.CSS_SELECTOR, "tr.ceiling") and d.find_elements(By.CSS_SELECTOR, "span.cl.c1")
        assert "By skill / category" in d.find_element(By.TAG_NAME, "body").text
        d.save_screenshot(str(many / "human_report.png"))
        assert (many / "human_report.png").stat().st_size > 10_000
    finally:
        d.quit()


def test_analyze_with_scores_and_human_sets_then_the_report_shows_both(tmp_path):
    """``ts2 analyze scores=... human=[A,B]``: the SEG view, and the sets in <out>/human; ``ts2 report human=`` puts
    the sets' section beside the SEG view."""
    pytest.importorskip("torch")
    from ts2.cli import main

    scores = tmp_path / "scores"
    assert main(["score", "dataset=mini", "metric=geneval_shapes", "+metric@metrics.random=random", "progress=false",
                 f"output_dir={scores}"]) == 0
    lat = fx.write_genai_bench(tmp_path / "genai")
    s = fx.write_scores(tmp_path / "s.csv", lat)
    pd.read_csv(s).rename(columns={"good": "geneval_shapes"}).to_csv(s, index=False)
    hp = fx.write_hpdv2(tmp_path / "hpd")
    s2 = fx.write_scores(tmp_path / "s2.csv", hp)
    pd.read_csv(s2).rename(columns={"good": "geneval_shapes"}).to_csv(s2, index=False)
    out = tmp_path / "an"
    assert main(["analyze", f"scores={scores / 'scores.csv'}", "dataset=mini", "bootstrap=0", "chance=0",
                 f"human=[genai_bench:{tmp_path / 'genai'},{tmp_path / 'hpd'}]", f"human_scores=[{s},{s2}]",
                 "human_permutations=20", "progress=false", f"output_dir={out}"]) == 0
    assert (out / "metametrics.csv").is_file() and (out / "human" / "human_sets.csv").is_file()
    report = tmp_path / "report"
    assert main(["report", f"results=[{scores}]", f"human={out / 'human'}", "dataset=mini", "bootstrap=0",
                 "protocols=[graph]", "figure_protocol=graph", f"output_dir={report}"]) == 0
    page = (report / "report.html").read_text()
    assert "Human-judgment sets" in page and "genai_bench" in page and "hpdv2" in page


def test_a_malformed_imagereward_json_record_names_the_file_and_record(tmp_path):
    rows, _ = fx.imagereward_records()
    rows[2]["rank"] = 0
    (tmp_path / "ir.json").write_text(json.dumps(rows))
    with pytest.raises(ValueError, match=r"ir\.json, record 2: expected a rank from 1 to image_amount_in_total"):
        SH.load_human_set(tmp_path / "ir.json")


def test_a_new_family_is_one_module_and_one_registry_line(tmp_path, monkeypatch):
    """How a family joins (EvalMuse-40K's did): a module with FAMILY, detect and load, and its line in HUMAN_SETS."""
    import sys

    from seg_data.human import registry

    (tmp_path / "toy_family.py").write_text(
        "import pandas as pd\n"
        "from seg_data.human.base import HumanJudgments\n"
        "from seg_data.human.registry import HumanSetFamily\n"
        "FAMILY = HumanSetFamily(name='toy', title='Toy', kind='likert', file_format='toy.tsv', size='2',\n"
        "                        license='none', get='here')\n"
        "def detect(sniff):\n"
        "    return sniff.suffix == '.tsv'\n"
        "def load(path):\n"
        "    idx = pd.Index(['a', 'b'], name='item_id')\n"
        "    items = pd.DataFrame({'prompt_id': ['p', 'p'], 'prompt': ['x', 'x'], 'image': ['', ''],\n"
        "                          'human': [1.0, 3.0], 'n_ratings': [1, 1]}, index=idx)\n"
        "    return HumanJudgments(items, pd.DataFrame({'r': [1.0, 3.0]}, index=idx), (), str(path))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "HUMAN_SETS", {**registry.HUMAN_SETS, "toy": "toy_family"})
    (tmp_path / "x.tsv").write_text("anything")
    hj = registry.load_human_set(tmp_path / "x.tsv")
    assert hj.name == "toy" and hj.n_items == 2 and registry.family("toy").title == "Toy"
    sys.modules.pop("toy_family", None)


# -- EvalMuse-40K: the label file from-labels reads, seen as overall ratings ---------------------------------
def test_evalmuse_fixture_loads_overall_scores_slots_and_element_categories(tmp_path):
    fx.write_evalmuse(tmp_path / "em")
    raw = json.loads((tmp_path / "em" / "train_list.json").read_text())
    for spec in (tmp_path / "em", tmp_path / "em" / "train_list.json", f"evalmuse:{tmp_path / 'em'}"):
        hj = SH.load_human_set(spec)
        assert hj.name == "evalmuse" and hj.kind == "likert"
    assert hj.n_items == 30 and hj.n_prompts == 6 and hj.raters == ("r0", "r1", "r2")
    two = next(r for r in raw if len(r["total_score"]) == 2)
    assert hj.items.loc[two["img_path"], "human"] == pytest.approx(np.mean(two["total_score"]))
    assert hj.items.loc[two["img_path"], "n_ratings"] == 2 and np.isnan(hj.ratings.loc[two["img_path"], "r2"])
    assert hj.ratings.loc[raw[7]["img_path"]].iloc[:2].tolist() == [float(v) for v in raw[7]["total_score"][:2]]
    # prompts 0-5 hold the first 2, 3, 4, 2, 3, 4 categories: counting in all, color in 4 of 6, spatial in 2 of 6
    cats = hj.categories.sum()
    assert cats["element=object"] == 30 and cats["element=counting"] == 30
    assert cats["element=color"] == 20 and cats["element=spatial"] == 10
    assert cats["generator=gen0"] == 12 and hj.items.loc["images/0003/gen1_1.png", "prompt_id"] == "3"


def test_evalmuse_prompt_ids_are_the_seg_ids_from_labels_gives(tmp_path):
    from seg_data.labels import from_labels

    fx.write_evalmuse(tmp_path / "em")
    hj = SH.load_human_set(tmp_path / "em")
    ds, _ = from_labels("evalmuse", tmp_path / "em" / "train_list.json", tmp_path / "segs")
    assert len(ds.segs) >= 3
    for seg in ds.segs:
        assert set(hj.items.loc[[img.image_id for _, img in seg.iter_images()], "prompt_id"]) == {seg.seg_id}


@pytest.mark.parametrize("edit, expected", [
    (lambda recs: recs[3].pop("total_score"), r"train_list\.json: record 3 \(img_path '[^']+'\): expected 'total_score'"),
    (lambda recs: recs[5].update(total_score=[4, 9]), r"record 5 .*expected 'total_score' values from 1 to 5, got 9"),
    (lambda recs: recs[2].update(element_score="{'a (b)': [1, 2]}"), r"record 2 "),
])
def test_a_malformed_evalmuse_record_names_the_file_and_record(tmp_path, edit, expected):
    fx.write_evalmuse(tmp_path / "em")
    f = tmp_path / "em" / "train_list.json"
    recs = json.loads(f.read_text())
    edit(recs)
    f.write_text(json.dumps(recs))
    with pytest.raises(ValueError, match=expected):
        SH.load_human_set(f"evalmuse:{tmp_path / 'em'}")


def test_evalmuse_in_ts2_analyze_gives_per_category_rows_and_a_ceiling(tmp_path):
    from ts2.commands.analyze_human import human_main

    latent = fx.write_evalmuse(tmp_path / "em", n_prompts=12)
    scores = fx.write_scores(tmp_path / "s.csv", latent, key="image")
    cfg = OmegaConf.create({"human": [f"evalmuse:{tmp_path / 'em'}"], "human_scores": [str(scores)], "bootstrap": 0,
                            "human_permutations": 20, "output_dir": str(tmp_path / "out"), "progress": False})
    assert human_main(cfg) == 0
    long = pd.read_csv(tmp_path / "out" / "human_sets.csv")
    assert set(long.set) == {"evalmuse"} and (long.metric == "rater_ceiling").any()
    assert {"element=spatial", "generator=gen2"} <= set(long.subset.dropna())
    hj = SH.load_human_set(f"evalmuse:{tmp_path / 'em'}", scores)
    row = long[(long.metric == "good") & (long.statistic == "pearson") & (long.grouping == "global")
               & (long.subset == "all")]
    assert row.value.iloc[0] == pytest.approx(np.corrcoef(hj.scores("good"), hj.human)[0, 1])
