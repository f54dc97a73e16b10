"""The hostile-input corpus as data: every case is a row (area, input, command, expected exit code,
expected message or value). ``tests/test_hostile_corpus.py`` runs them; ``python
tests/hostile_cases.py`` rewrites the case table of ``docs/reliability.md`` from this list (and
a test fails when the table is stale), so the documentation cannot drift from the tests.

A case writes its input files into a fresh folder ``{d}`` (generated here: nothing big is
committed), then runs either a ``ts2`` command line in-process (``argv``) or a library call
(``call(d)``). The verdicts:

- ``refused``: exit code ``rc`` (or the exception) and a message matching ``expect`` that names
  the file and row / SEG / key;
- ``correct``: the command succeeds and ``check(d)`` proves the value is the right one;
- ``warned``: it succeeds, the value is right, and a warning matching ``expect`` says what was
  changed or left out.

Every case also fails on a traceback in the output or a hang (a per-case alarm).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Case", "CASES", "markdown_table"]

META_HEADER = "id,target_prompt,file_name,image_source,rank"
# Two SEGs: 0 with a branching level, 1 a chain. file names follow the TS2 release.
BASE_META = [
    ("0", "a red cube", "images/000-00.jpg", "SD", "0"),
    ("0", "a red cube", "images/000-01.jpg", "SD", "1a"),
    ("0", "a red cube", "images/000-02.jpg", "SD", "1b"),
    ("0", "a red cube", "images/000-03.jpg", "SD", "2"),
    ("1", "two cats", "images/001-00.jpg", "SD", "0"),
    ("1", "two cats", "images/001-01.jpg", "SD", "1"),
    ("1", "two cats", "images/001-02.jpg", "SD", "2"),
]
# Scores of BASE_META's images: clip orders both SEGs perfectly, tifa does not.
BASE_SCORES = {"clip": [0.9, 0.6, 0.5, 0.2, 0.8, 0.5, 0.1], "tifa": [0.4, 0.6, 0.5, 0.9, 0.3, 0.2, 0.7]}


def meta_csv(rows=BASE_META, header: str = META_HEADER) -> str:
    return header + "\n" + "".join(",".join(r) + "\n" for r in rows)


def meta_with(row: int, col: int, value: str) -> str:
    rows = [list(r) for r in BASE_META]
    rows[row][col] = value
    return meta_csv([tuple(r) for r in rows])


def scores_csv(metrics: dict[str, list] | None = None, seg_ids=None, nodes=None, header_extra: str = "",
               files=None) -> str:
    metrics = BASE_SCORES if metrics is None else metrics
    seg_ids = [r[0] for r in BASE_META] if seg_ids is None else seg_ids
    nodes = [r[4] for r in BASE_META] if nodes is None else nodes
    files = [r[2] for r in BASE_META] if files is None else files
    names = list(metrics)
    lines = [",".join(["seg_id", "file_name", "node", *names]) + header_extra]
    for i in range(len(seg_ids)):
        lines.append(",".join([str(seg_ids[i]), files[i], str(nodes[i]), *(str(metrics[m][i]) for m in names)]))
    return "\n".join(lines) + "\n"


def seg_doc(segs=None, **top) -> dict:
    """A ts2-seg/1 document (as data): two SEGs like BASE_META."""
    if segs is None:
        segs = [
            {"id": "0", "prompt": "a red cube", "nodes": [
                {"label": "0", "images": [{"id": "s0/0.png"}]}, {"label": "1a", "images": [{"id": "s0/1a.png"}]},
                {"label": "1b", "images": [{"id": "s0/1b.png"}]}, {"label": "2", "images": [{"id": "s0/2.png"}]}]},
            {"id": "1", "prompt": "two cats", "nodes": [
                {"label": "0", "images": [{"id": "s1/0.png"}]}, {"label": "1", "images": [{"id": "s1/1.png"}]}]},
        ]
    return {"format": "ts2-seg/1", "name": "hostile", "segs": segs, **top}


def seg_yaml(doc: dict | None = None) -> str:
    import yaml

    return yaml.safe_dump(seg_doc() if doc is None else doc, sort_keys=False)


def one_seg(seg: dict) -> dict:
    return seg_doc([seg])


def node(label, images=("x",), **extra):
    return {"label": label, "images": [{"id": f"{label}-{i}"} for i in images], **extra}


@dataclass(frozen=True)
class Case:
    """One hostile input and what must happen (see the module docstring)."""

    id: str
    area: str
    what: str  # the input, in words (the docs table)
    files: dict[str, str | bytes] = field(default_factory=dict)
    argv: tuple[str, ...] | None = None  # a ts2 command line; {d} is the case folder
    call: Callable[[Path], Any] | None = None  # or a library call
    rc: int = 0
    expect: str = ""  # regex the output (or the exception text) must match
    verdict: str = "refused"  # refused | correct | warned
    check: Callable[[Path, str], None] | None = None  # proves a correct value
    setup: Callable[[Path], None] | None = None  # FIFOs, symlinks, permissions
    env: dict[str, str | None] = field(default_factory=dict)
    timeout: int = 60
    value: Any = None  # what ``call`` must return (verdict correct)

    @property
    def command(self) -> str:
        if self.argv is not None:
            return "ts2 " + " ".join(a.replace("{d}/", "") for a in self.argv)
        return getattr(self.call, "label", "library call")


def labelled(label: str, fn: Callable) -> Callable:
    fn.label = label  # type: ignore[attr-defined]
    return fn


# -- the command lines -------------------------------------------------------------------------
def validate(target: str = "metadata.csv", *extra: str) -> tuple[str, ...]:
    return ("data", "validate", f"path={{d}}/{target}", *extra)


def info(target: str = "metadata.csv", *extra: str) -> tuple[str, ...]:
    return ("data", "info", f"path={{d}}/{target}", *extra)


def analyze(scores: str = "scores.csv", *extra: str) -> tuple[str, ...]:
    given = {e.lstrip("+").split("=", 1)[0] for e in extra}  # a key given twice is refused
    # One protocol (paper) unless the case names one: the checks read one row per metric and cell.
    base = [a for a in ("bootstrap=0", "ranking.enabled=false", "reference=null", "output_dir={d}/out",
                        "protocols=[paper]")
            if a.split("=", 1)[0] not in given]
    return ("analyze", f"scores={{d}}/{scores}", *base, *extra)


def metametrics(d: Path):
    import pandas as pd

    return pd.read_csv(d / "out" / "metametrics.csv")


def value_of(d: Path, metric: str, mm: str = "rank", subset: str = "Avg") -> float:
    t = metametrics(d)
    row = t[(t.metric == metric) & (t.meta_metric == mm) & (t.subset == subset)]
    assert len(row) == 1, f"expected one {metric}/{mm}/{subset} row, got {len(row)}"
    return float(row.value.iloc[0])


def same_as_clean(metric: str = "clip", clean: str | None = None, mms=("rank", "sep", "delta")):
    """check: the case's meta-metrics equal those of the clean base table, computed in-process."""
    def check(d: Path, out: str) -> None:
        import io

        import numpy as np
        import pandas as pd

        from analysis.pipeline import analyze as run

        ref = run(pd.read_csv(io.StringIO(clean or scores_csv()), dtype=str), protocols=["paper"], bootstrap=0)
        for mm in mms:
            got, want = value_of(d, metric, mm), ref.value(metric, mm)
            assert np.isclose(got, want, equal_nan=True), f"{metric}/{mm}: expected {want}, got {got}"
    return check


def load(path: Path):
    from seg_data import load_path

    return load_path(path)


def close(got: float, want: float) -> None:
    assert abs(got - want) < 1e-9, f"expected {want}, got {got}"


def note_in_analysis_json(d: Path, pattern: str) -> None:
    import re

    notes = json.loads((d / "out" / "analysis.json").read_text())["notes"]
    assert any(re.search(pattern, n) for n in notes), f"expected a note matching {pattern!r}, got {notes}"


def output_has(pattern: str):
    def check(d: Path, out: str) -> None:
        import re

        assert re.search(pattern, out), f"expected {pattern!r} in the output"
    return check


def info_json(key: str, expected) -> Callable[[Path, str], None]:
    def check(d: Path, out: str) -> None:
        line = next(ln for ln in out.splitlines() if ln.startswith("{"))
        got = json.loads(line)[key]
        assert got == expected, f"{key}: expected {expected!r}, got {got!r}"
    return check


CASES: list[Case] = []


def add(*cases: Case) -> None:
    CASES.extend(cases)


# ==== the cases (the list is the specification) ==============================================
# -- metadata.csv (TS2 release layout) ------------------------------------------------------------
add(
    Case("meta-empty-file", "metadata", "empty metadata.csv (0 bytes)", {"metadata.csv": ""}, validate(), rc=2,
         expect=r"metadata\.csv: expected a CSV header .*got an empty file"),
    Case("meta-header-only", "metadata", "header line only", {"metadata.csv": META_HEADER + "\n"}, validate(), rc=2,
         expect=r"metadata\.csv: expected at least one image row"),
    Case("meta-missing-rank", "metadata", "no `rank` column", {"metadata.csv": "id,target_prompt,file_name\n0,p,a.jpg\n"},
         validate(), rc=2, expect=r"metadata\.csv: expected columns .*missing \['rank'\]"),
    Case("meta-missing-id", "metadata", "no `id` column",
         {"metadata.csv": "target_prompt,file_name,rank\np,a.jpg,0\n"}, validate(), rc=2, expect=r"missing \['id'\]"),
    Case("meta-dup-header", "metadata", "column `rank` twice in the header",
         {"metadata.csv": META_HEADER + ",rank\n0,p,images/a.jpg,SD,0,1\n"}, validate(), rc=2,
         expect=r"metadata\.csv: expected each column name once, got 'rank' twice"),
    Case("meta-not-utf8", "metadata", "Latin-1 bytes in a prompt",
         {"metadata.csv": (META_HEADER + "\n0,caf\xe9,images/a.jpg,SD,0\n").encode("latin-1")}, validate(), rc=2,
         expect=r"metadata\.csv: could not parse as CSV"),
    Case("meta-binary", "metadata", "PNG bytes named metadata.csv",
         {"metadata.csv": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))}, validate(), rc=2,
         expect=r"metadata\.csv: (could not parse|expected columns)"),
    Case("meta-extra-field", "metadata", "a row with one field too many",
         {"metadata.csv": meta_csv() + "1,two cats,images/001-03.jpg,SD,3,extra,more\n"}, validate(), rc=2,
         expect=r"metadata\.csv: could not parse as CSV"),
    Case("meta-missing-file", "metadata", "path to a file that does not exist", {}, validate("nope/metadata.csv"), rc=2,
         expect=r"no dataset at .*nope/metadata\.csv"),
    Case("meta-dir-without-csv", "metadata", "a folder with neither metadata.csv nor dataset.yaml", {"x/readme.txt": "hi"},
         validate("x"), rc=2, expect=r"expected metadata\.csv \(TS2 release\) or dataset\.yaml/json, found neither"),
    Case("meta-fifo", "metadata", "metadata.csv is a FIFO (a read would block forever)", {}, validate(), rc=2,
         setup=lambda d: os.mkfifo(d / "metadata.csv"), expect=r"expected a TS2 metadata\.csv at .*found none"),
    Case("meta-symlink-loop", "metadata", "metadata.csv is a symlink loop", {}, validate(), rc=2,
         setup=lambda d: os.symlink(d / "metadata.csv", d / "metadata.csv"), expect=r"no dataset at|found none"),
    Case("meta-bom", "metadata", "UTF-8 byte-order mark before the header", {"metadata.csv": "\ufeff" + meta_csv()},
         info("metadata.csv", "json=true"), rc=0, verdict="correct", check=info_json("n_images", 7)),
    Case("meta-crlf", "metadata", "CRLF line ends", {"metadata.csv": meta_csv().replace("\n", "\r\n")},
         info("metadata.csv", "json=true"), rc=0, verdict="correct", check=info_json("n_nodes", 7)),
    Case("meta-padded-cells", "metadata", "ids and ranks padded with spaces (` 1 `, ` 1a`)",
         {"metadata.csv": meta_with(1, 4, " 1a ").replace("\n1,", "\n 1 ,")}, info("metadata.csv", "json=true"), rc=0,
         verdict="correct", check=info_json("nodes_per_level", {"0": 2, "1": 3, "2": 2})),
    Case("meta-prompt-mismatch", "metadata", "one row of SEG 1 carries SEG 0's prompt",
         {"metadata.csv": meta_with(5, 1, "a red cube")}, validate(), rc=0, verdict="warned",
         expect=r"warning: SEG 1, node 1: images/001-01\.jpg: expected the SEG's prompt 'two cats'"),
    Case("meta-dup-file-name", "metadata", "the same file_name on two rows",
         {"metadata.csv": meta_with(2, 2, "images/000-01.jpg")}, validate(), rc=1,
         expect=r"image id 'images/000-01\.jpg' appears 2 times \[duplicate_image\]"),
    Case("meta-empty-file-name", "metadata", "an empty file_name cell", {"metadata.csv": meta_with(2, 2, "")}, validate(),
         rc=2, expect=r"row 4, column 'file_name': expected an image file name, got an empty cell"),
    Case("meta-path-dotdot", "metadata", "file_name `../../secret.jpg` (outside the dataset folder)",
         {"metadata.csv": meta_with(2, 2, "../../secret.jpg")}, validate(), rc=2,
         expect=r"row 4, column 'file_name': expected an image path under the image roots .*'\.\./\.\./secret\.jpg'"),
    Case("meta-path-absolute", "metadata", "file_name `/etc/hostname` (absolute)",
         {"metadata.csv": meta_with(2, 2, "/etc/hostname")}, validate(), rc=2,
         expect=r"row 4, column 'file_name': expected an image path under the image roots"),
    Case("meta-path-sneaky", "metadata", "file_name `images/../../x.jpg` (leaves the folder after folding)",
         {"metadata.csv": meta_with(2, 2, "images/../../x.jpg")}, validate(), rc=2, expect=r"under the image roots"),
    Case("meta-path-allowed-root", "metadata", "absolute file_name under an allowed `image_roots` folder",
         {"metadata.csv": meta_with(2, 2, "/tmp/ts2-hostile-allowed/x.jpg")},
         validate("metadata.csv", "image_roots=[/tmp/ts2-hostile-allowed]"), rc=0, verdict="correct",
         expect=r"OK: 2 SEGs"),
    Case("meta-path-inside-ok", "metadata", "file_name `images/sub/../a.jpg` (stays inside)",
         {"metadata.csv": meta_with(2, 2, "images/sub/../a.jpg")}, validate(), rc=0, verdict="correct",
         expect=r"OK: 2 SEGs"),
    Case("meta-walk-bomb", "metadata", "81 rows: one SEG of 8 levels x 10 nodes (10^8 walks)",
         {"metadata.csv": meta_csv([("0", "p", "images/0-0.jpg", "SD", "0")] + [
             ("0", "p", f"images/0-{lv}{ch}.jpg", "SD", f"{lv}{ch}") for lv in range(1, 9) for ch in "abcdefghij"])},
         info(), rc=0, verdict="warned", timeout=30,
         expect=r"(?s)710 edges, 100000000 walks\n.*SEG 0: 100000000 walks \(1\.00e\+08\), over max_walks"),
    Case("meta-single-node-seg", "metadata", "a SEG with only its error-0 image",
         {"metadata.csv": meta_csv(BASE_META + [("2", "a dog", "images/002-00.jpg", "SD", "0")])},
         info("metadata.csv", "json=true"), rc=0, verdict="correct", check=info_json("n_walks", 3)),
    Case("meta-no-root", "metadata", "a SEG without an error-0 node", {"metadata.csv": meta_with(4, 4, "3")},
         validate(), rc=1, expect=r"SEG 1: expected at least one error-0 node"),
)
META_IDS = [  # (cell, why) every one refused with the file and row
    ("01", "leading zero: 01 vs 1"), ("007", "leading zeros"), ("1.0", "decimal point"), ("1e0", "exponent"),
    ("inf", "infinity"), ("nan", "NaN"), ("99999999999999999999", "over 2^63-1"), ("-1", "sign"), ("+1", "sign"),
    ("1_0", "digit separator"), ("\u0661", "Arabic-Indic digit one"), ("seven", "not a number"), ("", "empty"),
    ("0x1", "hexadecimal"), ("9223372036854775808", "2^63"),
]
for k, (cell, why) in enumerate(META_IDS):
    add(Case(f"meta-id-{k:02d}", "metadata", f"SEG id `{cell}` ({why})", {"metadata.csv": meta_with(5, 0, cell)},
             validate(), rc=2, expect=r"metadata\.csv, row 7, column 'id': expected (a|an integer) SEG id"))
add(Case("meta-id-max", "metadata", "SEG id 9223372036854775807 (2^63-1, the largest allowed)",
         {"metadata.csv": meta_with(4, 0, "9223372036854775807").replace("\n1,", "\n9223372036854775807,")},
         info("metadata.csv", "json=true"), rc=0, verdict="correct", check=info_json("n_segs", 2)))
META_RANKS = [("01", "leading zero"), ("1A", "upper case"), ("1 a", "inner space"), ("02b", "leading zero"),
              ("10A", "upper case")]
for k, (cell, why) in enumerate(META_RANKS):
    add(Case(f"meta-rank-{k:02d}", "metadata", f"rank `{cell}` ({why}) beside the canonical form",
             {"metadata.csv": meta_with(5, 4, cell)}, validate(), rc=2,
             expect=r"metadata\.csv, row 7, column 'rank': expected a node label written as digits without leading zeros"))
for k, (cell, why) in enumerate([("x1", "letters first"), ("", "empty"), ("1.5", "decimal"), ("-1", "negative"),
                                 ("1a!", "punctuation")]):
    add(Case(f"meta-badrank-{k:02d}", "metadata", f"rank `{cell}` ({why})", {"metadata.csv": meta_with(5, 4, cell)},
             validate(), rc=1, expect=r"SEG 1, node .*expected a node label like '0', '1a' or '2b'.*\[bad_label\]"))


# -- ts2-seg/1 YAML and JSON ------------------------------------------------------------------------
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)) + "format: ts2-seg/1\nsegs: []\n"


def nested_flow(n: int) -> str:
    return "format: ts2-seg/1\nsegs: []\nmetadata: {x: " + "[" * n + "]" * n + "}\n"


def yaml_case(cid, what, text, rc, expect, verdict="refused", name="d.yaml", argv=None, check=None, **kw):
    add(Case(f"seg-{cid}", "seg-file", what, {name: text}, argv or validate(name), rc=rc, expect=expect,
             verdict=verdict, check=check, **kw))


yaml_case("alias-bomb", "1.3 KB YAML alias bomb (10^9 nodes once expanded)", ALIAS_BOMB, 2,
          r"d\.yaml: expected at most \d+ YAML nodes once aliases are expanded", timeout=20)
yaml_case("alias-many", "2,000 aliases of one small anchor",
          "format: ts2-seg/1\nsegs: []\nmetadata:\n  a: &a 1\n  l: [" + ", ".join(["*a"] * 2000) + "]\n", 2,
          r"d\.yaml: expected at most 1000 YAML aliases")
yaml_case("alias-ok", "a few aliases (a legitimate use) in metadata",
          "format: ts2-seg/1\nname: ok\nmetadata: {a: &a [1, 2], b: *a}\n" + seg_yaml().split("\n", 2)[2], 0,
          r"OK: 2 SEGs", verdict="correct")
for n in (100, 1000, 20000, 30000):
    yaml_case(f"nest-flow-{n}", f"{n} nested flow sequences (`[[[...]]]`)", nested_flow(n), 2,
              r"d\.yaml, line \d+: expected nesting of at most 64 levels", timeout=20)
yaml_case("nest-block-30000", "30,000 nested block sequences (`- - - ...`)", "- " * 30000 + "x\n", 2,
          r"d\.yaml, line 1: expected nesting of at most 64 levels", timeout=20)
yaml_case("nest-mapping-5000", "5,000 nested flow mappings (`{a: {a: ...}}`)", "{a: " * 5000 + "1" + "}" * 5000, 2,
          r"expected nesting of at most 64 levels", timeout=20)
yaml_case("nest-json-30000", "JSON with 30,000 nested arrays", '{"format": "ts2-seg/1", "segs": [], "metadata": '
          + "[" * 30000 + "]" * 30000 + "}", 2, r"d\.json: expected nesting of at most 64 levels, got 30001",
          name="d.json", timeout=20)
yaml_case("nest-json-in-yaml", "YAML file in JSON syntax with 30,000 nested arrays",
          '# ts2-seg/1\n{"format": "ts2-seg/1", "segs": [], "x": ' + "[" * 30000 + "]" * 30000 + "}", 2,
          r"d\.yaml: expected nesting of at most 64 levels", timeout=20)
yaml_case("nest-json-strings", "JSON whose strings hold 10,000 brackets (not nesting)",
          json.dumps(seg_doc(metadata={"note": "[" * 10000})), 0, r"OK: 2 SEGs", verdict="correct", name="d.json")
yaml_case("label-octal", "`label: 010` (YAML 1.1 reads 8)", seg_yaml().replace("label: '2'", "label: 010"), 2,
          r"SEG 0, nodes\[3\]: expected a node label .*got '010'")
add(Case("seg-label-int", "seg-file", "`label: 10` unquoted (an int in YAML): read as the text `10`",
         {"d.yaml": seg_yaml().replace("label: '2'", "label: 10")}, verdict="correct",
         call=labelled("load_path(d.yaml)", lambda d: load(d / "d.yaml")["0"].nodes), value=["0", "1a", "1b", "10"]))
yaml_case("label-float", "`label: 1.0`", seg_yaml().replace("label: '2'", "label: 1.0"), 1,
          r"node 1\.0: expected a node label like")
yaml_case("label-bool", "`label: yes` (YAML 1.1 reads True)", seg_yaml().replace("label: '2'", "label: yes"), 1,
          r"node yes: expected a node label like")
yaml_case("label-upper", "`label: 1A` beside `1a`", seg_yaml().replace("label: 1b", "label: 1A"), 2,
          r"SEG 0, nodes\[2\]: expected a node label written as digits .*'1A'")
yaml_case("label-padded-dup", "labels `1a` and ` 1a ` in one SEG", seg_yaml().replace("label: 1b", "label: ' 1a '"), 2,
          r"SEG 0: node '1a' is defined twice")
yaml_case("label-list", "`label: [1]` (a list)", seg_yaml().replace("label: 1b", "label: [1]"), 2,
          r"SEG 0, nodes\[2\]: expected a node label like '0', '1a' or '2b', got \['1'\]|got \[")
yaml_case("label-null", "`label: null`", seg_yaml().replace("label: 1b", "label: null"), 2,
          r"SEG 0, nodes\[2\]: expected a node label")
yaml_case("label-missing", "a node without `label`", seg_yaml(one_seg({"id": "a", "prompt": "p", "nodes": [
    node("0"), {"images": [{"id": "y"}]}]})), 2, r"SEG a, nodes\[1\]: expected key 'label' in a node")
SEG_IDS = [("'007'", "leading zeros"), ("'01'", "leading zero"), ("1.0", "float"), (".nan", "YAML NaN"),
           ("nan", "text nan"), (".inf", "YAML infinity"), ("'1e0'", "exponent"), ("'99999999999999999999'", "over 2^63-1"),
           ("'-0'", "negative zero"), ("''", "empty"), ("null", "null"), ("[7]", "a list"), ("{a: 1}", "a mapping"),
           ("0o17", "YAML 1.2 octal"), ("0x1F", "hexadecimal"), ("1:30", "YAML 1.1 sexagesimal 90"), ("1_000", "digit separator")]
for k, (val, why) in enumerate(SEG_IDS):
    yaml_case(f"id-{k:02d}", f"SEG `id: {val}` ({why})", seg_yaml().replace("id: '1'", f"id: {val}", 1), 2,
              r"d\.yaml: segs\[1\]: expected (a|an integer) SEG id")
yaml_case("id-007-vs-7", "SEG ids `7` and `007` in one file",
          seg_yaml().replace("id: '0'", "id: '7'", 1).replace("id: '1'", "id: '007'", 1), 2, r"segs\[1\]: expected a SEG id .*'007'")
yaml_case("id-dup", "two SEGs with id `1`", seg_yaml().replace("id: '0'", "id: '1'", 1), 2,
          r"segs\[1\]: expected unique SEG ids, got '1' again \(first at segs\[0\]\)")
yaml_case("id-int", "`id: 7` unquoted (an int)", seg_yaml().replace("id: '1'", "id: 7", 1), 0, r"OK: 2 SEGs",
          verdict="correct")
add(Case("seg-id-text", "seg-file", "`id: yes` (YAML 1.1 bool): the text `yes`",
         {"d.yaml": seg_yaml().replace("id: '1'", "id: yes", 1)}, verdict="correct",
         call=labelled("load_path(d.yaml)", lambda d: load(d / "d.yaml").seg_ids), value=["0", "yes"]))
yaml_case("json-id-nan", "JSON `\"id\": NaN`", json.dumps(seg_doc()).replace('"id": "1"', '"id": NaN', 1), 2,
          r"d\.json: segs\[1\]: expected a SEG id, got nan", name="d.json")
yaml_case("json-id-float", "JSON `\"id\": 1.0`", json.dumps(seg_doc()).replace('"id": "1"', '"id": 1.0', 1), 2,
          r"segs\[1\]: expected a SEG id written as text or an integer, got the float 1\.0", name="d.json")
yaml_case("json-id-bool", "JSON `\"id\": true`", json.dumps(seg_doc()).replace('"id": "1"', '"id": true', 1), 2,
          r"segs\[1\]: expected a SEG id, got True", name="d.json")
yaml_case("json-id-int", "JSON `\"id\": 1` (an integer)", json.dumps(seg_doc()).replace('"id": "1"', '"id": 1', 1), 0,
          r"OK: 2 SEGs", verdict="correct", name="d.json")
TYPOS = [("edges", "edge", "seg", "'edges'"), ("nodes", "node", "seg", "'nodes'"), ("prompt", "promt", "seg", "'prompt'"),
         ("segs", "seg", "dataset", "'segs'"), ("images", "image", "node", "'images'"), ("label", "lable", "node", "'label'")]
for right, wrong, kind, hint in TYPOS:
    doc = seg_doc()
    target = doc if kind == "dataset" else doc["segs"][0] if kind == "seg" else doc["segs"][0]["nodes"][1]
    if right == "edges":
        target["edges"] = []
    value = target.pop(right)
    target[wrong] = value
    if right == "segs":
        target["segs"] = []
    expect = (rf"unknown key '{wrong}' in a {kind} .*did you mean {hint}\?" if right != "segs" else
              r"unknown key 'seg' in a dataset .*did you mean 'segs'\?")
    yaml_case(f"typo-{wrong}", f"typo `{wrong}:` for `{right}:`", seg_yaml(doc), 2, expect)
yaml_case("typo-path", "image key `pth:` for `path:`", seg_yaml().replace("- id: s0/0.png", "- id: s0/0.png\n      pth: a.png"),
          2, r"unknown key 'pth' in a image .*did you mean 'path'\?")
yaml_case("unknown-key", "an unknown key `colour:` in a SEG (no near match)", seg_yaml(one_seg(
    {"id": "a", "prompt": "p", "colour": "red", "nodes": [node("0"), node("1")]})), 2,
    r"unknown key 'colour' in a seg \(expected id, prompt, subset, nodes, edges, metadata\)\n")
yaml_case("edge-typo-graph", "`edge:` typo on a SEG whose explicit edges differ from the convention",
          seg_yaml(one_seg({"id": "a", "prompt": "p", "nodes": [node("0"), node("1a"), node("1b"), node("2")],
                            "edge": [{"from": "0", "to": "1a"}, {"from": "1a", "to": "2"}, {"from": "0", "to": "1b"}]})),
          2, r"unknown key 'edge' in a seg .*did you mean 'edges'\?")
yaml_case("edge-from-typo", "edge key `form:` for `from:`", seg_yaml(one_seg(
    {"id": "a", "prompt": "p", "nodes": [node("0"), node("1")], "edges": [{"form": "0", "to": "1"}]})), 2,
    r"SEG a, edges\[0\]: unknown key 'form' in a edge .*did you mean 'from'\?")
yaml_case("dup-key-prompt", "`prompt:` twice in one SEG",
          "format: ts2-seg/1\nsegs:\n- id: a\n  prompt: one\n  prompt: two\n  nodes: [{label: '0', images: [{id: x}]}]\n", 2,
          r"d\.yaml, line 5: key 'prompt' appears twice in one mapping")
yaml_case("dup-key-segs", "`segs:` twice at the top", "format: ts2-seg/1\nsegs: []\nsegs: []\n", 2,
          r"key 'segs' appears twice")
yaml_case("dup-key-label", "`label:` twice in a node",
          "format: ts2-seg/1\nsegs:\n- id: a\n  prompt: p\n  nodes:\n  - {label: '0', label: '1', images: [{id: x}]}\n", 2,
          r"key 'label' appears twice")
yaml_case("dup-key-json", "JSON object with `prompt` twice",
          '{"format": "ts2-seg/1", "segs": [{"id": "a", "prompt": "x", "prompt": "y", "nodes": []}]}', 2,
          r"d\.json: key 'prompt' appears twice in one mapping", name="d.json")
yaml_case("dup-key-typed", "keys `1` and `'1'` in free metadata (same text)",
          "format: ts2-seg/1\nsegs: []\nmetadata: {1: a, '1': b}\n", 2, r"key '1' appears twice")
yaml_case("prompt-list", "a list-valued prompt", seg_yaml().replace("prompt: two cats", "prompt: [two, cats]"), 2,
          r"SEG 1: expected text for 'prompt', got list")
yaml_case("prompt-map", "a mapping-valued prompt", seg_yaml().replace("prompt: two cats", "prompt: {a: 1}"), 2,
          r"SEG 1: expected text for 'prompt', got dict")
yaml_case("prompt-null", "`prompt: null`", seg_yaml().replace("prompt: two cats", "prompt: null"), 2,
          r"SEG 1: expected text for 'prompt', got NoneType")
yaml_case("prompt-empty", "`prompt: ''`", seg_yaml().replace("prompt: two cats", "prompt: ''"), 1,
          r"SEG 1: expected a non-empty prompt")
add(Case("seg-prompt-bool", "seg-file", "`prompt: yes` (YAML 1.1 bool): kept as the text `yes`",
         {"d.yaml": seg_yaml().replace("prompt: two cats", "prompt: yes")}, verdict="correct",
         call=labelled("load_path(d.yaml)", lambda d: load(d / "d.yaml")["1"].prompt), value="yes"))
yaml_case("prompt-date", "`prompt: 2024-01-01` (a YAML date): kept as written",
          seg_yaml().replace("prompt: two cats", "prompt: 2024-01-01"), 0, r"OK: 2 SEGs", verdict="correct")
yaml_case("prompt-binary", "`prompt: !!binary ...` (bytes)", seg_yaml().replace("prompt: two cats", "prompt: !!binary aGk="),
          2, r"SEG 1: expected text for 'prompt', got bytes")
yaml_case("python-tag", "`!!python/object/apply:os.system` tag", "format: ts2-seg/1\nsegs: !!python/object/apply:os.system ['true']\n",
          2, r"d\.yaml: could not parse as YAML: could not determine a constructor")
yaml_case("segs-missing", "no `segs:` key", "format: ts2-seg/1\nname: x\n", 2, r"expected key 'segs' in a dataset")
yaml_case("segs-map", "`segs:` a mapping", "format: ts2-seg/1\nsegs: {a: 1}\n", 2, r"expected a list for 'segs', got dict")
yaml_case("top-list", "the document is a list", "- 1\n- 2\n", 2, r"d\.yaml: expected a mapping \(dataset\), got list")
yaml_case("empty-yaml", "an empty .yaml file", "", 2, r"d\.yaml: expected a mapping \(dataset\), got NoneType")
yaml_case("comments-only", "only comments", "# nothing\n# here\n", 2, r"expected a mapping \(dataset\), got NoneType")
yaml_case("format-other", "`format: ts2-seg/2`", seg_yaml().replace("ts2-seg/1", "ts2-seg/2"), 2,
          r"expected format 'ts2-seg/1', got 'ts2-seg/2'")
yaml_case("tab-indent", "tab indentation (invalid YAML)", "format: ts2-seg/1\nsegs:\n\t- id: a\n", 2, r"could not parse as YAML")
yaml_case("not-utf8", "Latin-1 bytes", ("format: ts2-seg/1\nname: caf\xe9\nsegs: []\n").encode("latin-1"), 2,
          r"d\.yaml: expected UTF-8 text, got an undecodable byte at offset 27")
yaml_case("json-trailing-comma", "JSON with a trailing comma", '{"format": "ts2-seg/1", "segs": [],}', 2,
          r"d\.json: could not parse as JSON", name="d.json")
yaml_case("json-top-string", "JSON document that is a string", '"hello"', 2, r"expected a mapping \(dataset\), got str",
          name="d.json")
yaml_case("nodes-map", "`nodes:` a mapping", seg_yaml(one_seg({"id": "a", "prompt": "p", "nodes": {"0": 1}})), 2,
          r"SEG a: expected a list for 'nodes', got dict")
yaml_case("images-string", "`images:` a string", seg_yaml(one_seg({"id": "a", "prompt": "p", "nodes": [
    {"label": "0", "images": "x.png"}]})), 2, r"SEG a, node 0: expected a list for 'images', got str")
yaml_case("image-no-id", "an image without `id`", seg_yaml(one_seg({"id": "a", "prompt": "p", "nodes": [
    {"label": "0", "images": [{"path": "x.png"}]}]})), 2, r"SEG a, node 0, images\[0\]: expected key 'id' in a image")
yaml_case("image-id-float", "image `id: 1.5` (YAML float): kept as text",
          seg_yaml(one_seg({"id": "a", "prompt": "p", "nodes": [node("0"), node("1")]})).replace("id: 0-x", "id: 1.5"), 0,
          r"OK: 1 SEGs", verdict="correct")
yaml_case("errors-string", "node `errors:` a string", seg_yaml(one_seg({"id": "a", "prompt": "p", "nodes": [
    {"label": "0", "errors": "none", "images": [{"id": "x"}]}]})), 2, r"expected a list for 'errors', got str")
yaml_case("edges-map", "`edges:` a mapping", seg_yaml(one_seg({"id": "a", "prompt": "p", "nodes": [node("0"), node("1")],
                                                                "edges": {"0": "1"}})), 2, r"SEG a: expected a list for 'edges'")
yaml_case("edges-empty", "`edges: []` (no edge: node 1 unreachable)", seg_yaml(one_seg(
    {"id": "a", "prompt": "p", "nodes": [node("0"), node("1")], "edges": []})), 1, r"SEG a, node 1: node is not reachable")
yaml_case("edges-null", "`edges: null` (the TS2 convention)", seg_yaml(one_seg(
    {"id": "a", "prompt": "p", "nodes": [node("0"), node("1")], "edges": None})), 0, r"OK: 1 SEGs", verdict="correct")
yaml_case("edge-unknown-node", "an edge to an undefined node", seg_yaml(one_seg(
    {"id": "a", "prompt": "p", "nodes": [node("0"), node("1")], "edges": [{"from": "0", "to": "1"}, {"from": "1", "to": "2"}]})),
    1, r"SEG a, node 2: an edge names this node, but the SEG defines no such node")
yaml_case("edge-cycle", "a cycle 1 -> 2 -> 1", seg_yaml(one_seg(
    {"id": "a", "prompt": "p", "nodes": [node("0"), node("1"), node("2")],
     "edges": [{"from": "0", "to": "1"}, {"from": "1", "to": "2"}, {"from": "2", "to": "1"}]})), 1,
    r"cycle through nodes 1 -> 2 -> 1")
yaml_case("edge-label-octal", "edge `to: 010`", seg_yaml(one_seg(
    {"id": "a", "prompt": "p", "nodes": [node("0"), node("1")], "edges": [{"from": "0", "to": "1"}]})).replace("to: '1'", "to: 010"),
    2, r"SEG a, edges\[0\], 'to': expected a node label written as digits without leading zeros.*'010'")
yaml_case("dup-image-id", "one image id in two SEGs", seg_yaml().replace("s1/0.png", "s0/0.png"), 1,
          r"image id 's0/0\.png' is also used by SEG 0")
yaml_case("image-path-dotdot", "image `path: ../../etc/passwd`", seg_yaml().replace(
    "- id: s0/0.png", "- id: s0/0.png\n      path: ../../etc/passwd"), 2,
    r"SEG 0, node 0, images\[0\]: expected an image path under the image roots")
yaml_case("image-path-abs", "image `path: /etc/passwd`", seg_yaml().replace(
    "- id: s0/0.png", "- id: s0/0.png\n      path: /etc/passwd"), 2, r"expected an image path under the image roots")
yaml_case("image-path-nul", "image path with a NUL byte (JSON)", json.dumps(seg_doc()).replace(
    '{"id": "s0/0.png"}', '{"id": "s0/0.png", "path": "a\\u0000b.png"}'), 2, r"got one with a NUL byte", name="d.json")
yaml_case("image-path-root-ok", "absolute image path under an allowed image root", seg_yaml().replace(
    "- id: s0/0.png", "- id: s0/0.png\n      path: /tmp/ts2-hostile-allowed/a.png"), 0, r"OK: 2 SEGs", verdict="correct",
    argv=validate("d.yaml", "image_roots=[/tmp/ts2-hostile-allowed]"))
yaml_case("json-in-yaml-ok", "a .yaml file in JSON syntax after a comment", "# big set\n" + json.dumps(seg_doc()), 0,
          r"OK: 2 SEGs", verdict="correct")
yaml_case("yml-suffix", "a .yml file", seg_yaml(), 0, r"OK: 2 SEGs", verdict="correct", name="d.yml")
yaml_case("bad-suffix", "a .txt dataset file", seg_yaml(), 2, r"expected a \.csv .* or \.yaml/\.yml/\.json .* got '\.txt'",
          name="d.txt")
yaml_case("unicode-ids", "non-ASCII SEG ids and labels-free text (`café`, emoji prompt)",
          seg_yaml().replace("id: '1'", "id: café", 1).replace("prompt: two cats", "prompt: 'two cats \U0001f408'"), 0,
          r"OK: 2 SEGs", verdict="correct")
yaml_case("big-prompt", "a 1 MB prompt", seg_yaml().replace("prompt: two cats", "prompt: " + "a" * 1_000_000), 0,
          r"OK: 2 SEGs", verdict="correct")
yaml_case("walk-bomb-yaml", "one SEG of 8 levels x 10 nodes (10^8 walks)", seg_yaml(one_seg(
    {"id": "big", "prompt": "p", "nodes": [node("0")] + [node(f"{lv}{ch}") for lv in range(1, 9) for ch in "abcdefghij"]})),
    0, r"SEG big: 100000000 walks \(1\.00e\+08\), over max_walks", verdict="warned", argv=info("d.yaml"), timeout=30)


# -- score tables (ts2 analyze) ----------------------------------------------------------------------
def score_case(cid, what, text, rc, expect="", verdict="refused", check=None, name="scores.csv", extra=(), files=None,
               **kw):
    add(Case(f"scores-{cid}", "scores", what, {name: text, **(files or {})}, analyze(name, *extra), rc=rc, expect=expect,
             verdict=verdict, check=check, **kw))


BASE = scores_csv()
score_case("clean", "the clean two-metric table (reference for the value checks)", BASE, 0, verdict="correct",
           check=same_as_clean("clip"))
score_case("metric-score-wide", "wide table whose metric columns are named `metric` and `score`",
           scores_csv({"metric": BASE_SCORES["clip"], "score": BASE_SCORES["tifa"]}), 0, verdict="correct",
           check=same_as_clean("metric", scores_csv({"metric": BASE_SCORES["clip"], "score": BASE_SCORES["tifa"]})))
score_case("metric-score-ambiguous", "`metric` (names) and `score` plus another numeric column `clip`",
           "seg_id,file_name,node,metric,score,clip\n0,a,0,m,0.5,0.1\n0,b,1,m,0.4,0.2\n", 2,
           r"scores\.csv: ambiguous score table: .*columns \['clip'\] look like scores of a wide table")
LONG = "seg_id,file_name,node,metric,score\n" + "".join(
    f"{r[0]},{r[2]},{r[4]},clip,{BASE_SCORES['clip'][i]}\n" for i, r in enumerate(BASE_META))
score_case("long-ok", "a proper long table (`metric`, `score`)", LONG, 0, verdict="correct", check=same_as_clean("clip"))
score_case("long-no-file-name", "long table without `file_name`", "seg_id,node,metric,score\n0,0,m,0.5\n0,1,m,0.4\n", 2,
           r"a long score table needs a 'file_name' column")
score_case("long-dup", "long table with one (file_name, metric) twice", LONG + "0,images/000-00.jpg,0,clip,0.1\n", 2,
           r"expected one score per \(file_name, metric\)")
score_case("long-hib-both", "long table: `higher_is_better` true and false for one metric",
           "seg_id,file_name,node,metric,score,higher_is_better\n0,a,0,m,0.5,true\n0,b,1,m,0.4,false\n", 2,
           r"metric 'm': expected one higher_is_better value, got both")
score_case("long-hib-junk", "long table: `higher_is_better` = maybe",
           "seg_id,file_name,node,metric,score,higher_is_better\n0,a,0,m,0.5,maybe\n0,b,1,m,0.4,maybe\n", 2,
           r"expected true/false in column 'higher_is_better', got 'maybe'")
for col in ("status", "level", "error", "source", "index"):
    score_case(f"descriptive-{col}", f"a numeric column named `{col}` beside the metrics",
               scores_csv({**BASE_SCORES, col: BASE_SCORES["tifa"]}), 0, r"column\(s\) \['" + col +
               r"'\] hold only numbers but are descriptive names .* pass metrics=\[\.\.\.\]", verdict="warned",
               check=same_as_clean("clip"))
score_case("descriptive-selected", "`metrics=[level]` analyses a numeric `level` column as a metric",
           scores_csv({"clip": BASE_SCORES["clip"], "level": BASE_SCORES["clip"]}), 0, verdict="correct",
           extra=("metrics=[level]",), check=lambda d, out: close(value_of(d, "level"), 1.0))
score_case("dup-header", "the header names `random` twice (pandas would read `random.1`)",
           scores_csv({"random": BASE_SCORES["clip"], "clip": BASE_SCORES["tifa"]}).replace(",clip\n", ",random\n", 1), 2,
           r"scores\.csv: expected each column name once, got 'random' twice")
score_case("space-header", "the header names `random` and ` random`",
           scores_csv({"random": BASE_SCORES["clip"], "clip": BASE_SCORES["tifa"]}).replace(",clip\n", ", random\n", 1), 2,
           r"got 'random' twice \('random' and ' random' differ only by spaces\)")
score_case("dup-seg-id-col", "the header names `seg_id` twice", BASE.replace("seg_id,file_name", "seg_id,seg_id", 1), 2,
           r"got 'seg_id' twice")
score_case("quoted-numbers", "every score quoted (`\"0.5\"`)", scores_csv({m: [f'"{v}"' for v in vs] for m, vs in BASE_SCORES.items()}),
           0, verdict="correct", check=same_as_clean("clip"))
score_case("stray-quote-end", "a stray closing quote (`0.5\"`)",
           scores_csv({"clip": [f'{v}"' if i == 2 else v for i, v in enumerate(BASE_SCORES["clip"])], "tifa": BASE_SCORES["tifa"]}),
           0, verdict="correct", check=same_as_clean("clip"))
score_case("stray-quote-start", "a stray opening quote (`\"0.5`, swallowing the next lines in a CSV parser)",
           scores_csv({"clip": [f'"{v}' if i == 2 else v for i, v in enumerate(BASE_SCORES["clip"])], "tifa": BASE_SCORES["tifa"]}),
           0, r"unbalanced quotes: read line by line", verdict="warned", check=same_as_clean("clip"))
score_case("stray-quote-fields", "a stray quote and a row with a field too many", scores_csv().replace(
    "0.6,", '"0.6,', 1) + "1,x,2,0.1,0.2,0.3\n", 2, r"scores\.csv, row \d+: expected 5 fields, got 6")
VIE = [0.9, 0.6, -1, 0.2, 0.8, 0.5, 0.1]
score_case("viescore-sentinel", "VIEScore's parse-failure code -1 in column `viescore`",
           scores_csv({"viescore": VIE, "clip": BASE_SCORES["clip"]}), 0,
           r"metric 'viescore': 1 cell\(s\) hold the failure code\(s\) \[-1\.0\]: scores under protocol\.failure_codes=score", verdict="warned",
           check=lambda d, out: note_in_analysis_json(d, r"metric 'viescore': 1 cell\(s\) hold the failure code"))
score_case("viescore-all-sentinel", "every `viescore` cell is -1", scores_csv({"viescore": [-1] * 7, "clip": BASE_SCORES["clip"]}),
           0, r"(?s)(?=.*7 cell\(s\) hold the failure code)(?=.*metric 'viescore': every one of its \d+ scores is -1)", verdict="warned")
score_case("other-minus-one", "-1 in a metric that declares no sentinel stays a score",
           scores_csv({"clip": [-1 if i == 2 else v for i, v in enumerate(BASE_SCORES["clip"])]}), 0, verdict="correct",
           check=same_as_clean("clip", scores_csv({"clip": [-1 if i == 2 else v for i, v in enumerate(BASE_SCORES["clip"])]})))
SCORE_IDS = [("007", "leading zeros"), ("01", "leading zero"), ("1.0", "decimal point"), ("1e0", "exponent"),
             ("inf", "infinity"), ("nan", "NaN"), ("-1", "sign"), ("99999999999999999999", "over 2^63-1"), ("", "empty")]
for k, (cell, why) in enumerate(SCORE_IDS):
    ids = [r[0] for r in BASE_META]
    ids[5] = cell
    score_case(f"seg-id-{k:02d}", f"seg_id `{cell}` ({why}), no dataset", scores_csv(seg_ids=ids), 2,
               r"scores\.csv, row 7, column 'seg_id': expected a (SEG id|value)")
ids = [r[0] for r in BASE_META]
ids[4:] = ["7", "007", "7"]
score_case("seg-id-007-vs-7", "seg_ids `7` and `007` in one table, no dataset", scores_csv(seg_ids=ids), 2,
           r"row 7, column 'seg_id': expected a SEG id written as a plain integer .*'007'")
for k, (cell, why) in enumerate([("01", "leading zero"), ("1A", "upper case"), ("x1", "letters first"), ("", "empty"),
                                 ("1.5", "decimal")]):
    nodes = [r[4] for r in BASE_META]
    nodes[5] = cell
    score_case(f"node-{k:02d}", f"node `{cell}` ({why}), no dataset", scores_csv(nodes=nodes), 2,
               r"scores\.csv, row 7, column 'node': expected (a node label|a value)")
for k, (cell, msg) in enumerate([("abc", "expected a number, got 'abc'"), ("inf", "expected a finite number, got inf"),
                                 ("-inf", "expected a finite number, got -inf"), ("True", "expected a number, got 'True'"),
                                 ("0.5.1", "expected a number"), ("1,5", "expected 5 fields|could not read")]):
    vals = list(BASE_SCORES["clip"])
    vals[3] = cell
    score_case(f"cell-{k:02d}", f"score cell `{cell}`", scores_csv({"clip": vals, "tifa": BASE_SCORES["tifa"]}), 2,
               r"scores\.csv(, row 5, column 'clip')?: " + msg if k < 5 else msg)
for k, tok in enumerate(["", "nan", "NA", "null", "None"]):
    vals = list(BASE_SCORES["clip"])
    vals[3] = tok
    score_case(f"missing-{k}", f"missing score written `{tok or '(empty)'}`", scores_csv({"clip": vals}), 0, verdict="correct",
               check=same_as_clean("clip", scores_csv({"clip": vals})))
score_case("all-missing", "a metric with no score at all", scores_csv({"clip": BASE_SCORES["clip"], "empty": [""] * 7}), 0,
           r"metric 'empty' has no score at all", verdict="warned")
score_case("empty-file", "an empty score file", "", 2, r"scores\.csv: expected a header row .*got an empty file")
score_case("header-only", "header only, no rows", "seg_id,file_name,node,clip\n", 2,
           r"scores\.csv: expected at least one row of scores, got only the header")
score_case("no-node", "no `node` column", "seg_id,file_name,clip\n0,a,0.5\n", 2,
           r"expected columns 'seg_id' and 'node' \(one row per image\), missing \['node'\]")
score_case("no-metric", "no metric column", "seg_id,file_name,node\n0,a,0\n", 2, r"expected at least one metric column")
score_case("dup-file-name", "one file_name twice", BASE.replace("images/000-01.jpg", "images/000-00.jpg"), 2,
           r"expected each file_name once, got 'images/000-00\.jpg' 2 times")
score_case("not-utf8", "Latin-1 bytes in a cell", (BASE + "1,caf\xe9.jpg,2,0.1,0.2\n").encode("latin-1"), 2,
           r"scores\.csv: could not read as a csv table")
score_case("binary", "PNG bytes named scores.csv", b"\x89PNG\r\n\x1a\n" + bytes(range(256)), 2, r"scores\.csv")
score_case("missing-file", "scores= a file that does not exist", None, 2, r"expected a score table at .*found none",
           name="other.csv")
score_case("bad-suffix", "a .xlsx score file", "x", 2, r"expected a \.csv, \.tsv, \.parquet, \.json or \.jsonl score table",
           name="s.xlsx")
score_case("tsv", "a TSV table", BASE.replace(",", "\t"), 0, verdict="correct", check=same_as_clean("clip"), name="s.tsv")
score_case("jsonl", "a JSONL table", "".join(json.dumps({"seg_id": r[0], "file_name": r[2], "node": r[4],
                                                         "clip": BASE_SCORES["clip"][i]}) + "\n" for i, r in enumerate(BASE_META)),
           0, verdict="correct", check=same_as_clean("clip", scores_csv({"clip": BASE_SCORES["clip"]})), name="s.jsonl")
score_case("json-int-ids", "JSON with integer seg_ids", json.dumps([{"seg_id": int(r[0]), "file_name": r[2], "node": r[4],
                                                                     "clip": BASE_SCORES["clip"][i]} for i, r in enumerate(BASE_META)]),
           0, verdict="correct", check=same_as_clean("clip", scores_csv({"clip": BASE_SCORES["clip"]})), name="s.json")
score_case("unknown-metric", "`metrics=[vqa]` not in the table", BASE, 2, r"expected metrics among \['clip', 'tifa'\], got unknown \['vqa'\]",
           extra=("metrics=[vqa]",))
score_case("unknown-lower", "`lower_is_better=[vqa]` not in the table", BASE, 2, r"lower_is_better names \['vqa'\]",
           extra=("lower_is_better=[vqa]",))
score_case("aliases", "TS2 names `id`/`rank` for seg_id/node", BASE.replace("seg_id,file_name,node", "id,file_name,rank", 1), 0,
           verdict="correct", check=same_as_clean("clip"))
score_case("unnamed-index", "a pandas index column (blank header, read as `Unnamed: 0`)",
           "".join(("" if i == 0 else str(i - 1)) + "," + line + "\n" for i, line in enumerate(BASE.splitlines())),
           0, verdict="correct", check=same_as_clean("clip"))
score_case("walk-bomb", "one SEG of 8 levels x 10 nodes (10^8 walks)", "seg_id,file_name,node,m\n0,f0,0,0.5\n" + "".join(
    f"0,f{lv}{ch},{lv}{ch},{(lv * 10 + i) / 100}\n" for lv in range(1, 9) for i, ch in enumerate("abcdefghij")) +
    "1,g0,0,0.9\n1,g1,1,0.5\n1,g2,2,0.1\n", 0, r"SEG 0: 100000000 walks over the present levels.*over max_walks=1000000",
    verdict="warned", timeout=60, check=lambda d, out: close(value_of(d, "m"), 1.0))
score_case("join-no-match", "joined to a dataset, no file_name matches", scores_csv(files=[f"x{i}.jpg" for i in range(7)]), 2,
           r"no file_name matches an image id of dataset", files={"metadata.csv": meta_csv()}, extra=("path={d}/metadata.csv",))
score_case("join-partial", "joined to a dataset, one row unknown", BASE + "1,images/999-00.jpg,2,0.5,0.5\n", 0,
           r"1 row\(s\) of .*scores\.csv name images that are not in dataset", verdict="warned",
           files={"metadata.csv": meta_csv()}, extra=("path={d}/metadata.csv",), check=same_as_clean("clip"))
score_case("join-disagree", "joined to a dataset, a row's node differs from the dataset's",
           scores_csv(nodes=["0", "1a", "1b", "2", "0", "2", "2"]), 0, r"1 row\(s\) of .* give a seg_id/node that differs",
           verdict="warned", files={"metadata.csv": meta_csv()}, extra=("path={d}/metadata.csv",), check=same_as_clean("clip"))
score_case("scores-dir", "scores= a folder", None, 2, r"expected a score table at .*found none", name="adir",
           setup=lambda d: (d / "adir").mkdir())
score_case("scores-fifo", "scores= a FIFO", None, 2, r"expected a score table at .*found none", name="fifo.csv",
           setup=lambda d: os.mkfifo(d / "fifo.csv"))


# -- Hydra overrides (only the ones handled in main today; see docs/reliability.md for the rest) -----
def override_case(cid, what, extra, rc, expect, verdict="refused", check=None, files=None):
    add(Case(f"override-{cid}", "overrides", what, {"scores.csv": scores_csv(), **(files or {})}, analyze("scores.csv", *extra),
             rc=rc, expect=expect, verdict=verdict, check=check))


override_case("unknown-key", "`foo=1` (no such option)", ("foo=1",), 2, r"unknown key 'foo' for ts2 analyze; see `ts2 analyze --help`")
override_case("bad-grammar", "`a==b` (override grammar)", ("a==b",), 2, r"ts2 analyze: Error parsing override 'a==b'")
override_case("unclosed-list", "`metrics=[clip` (unclosed list)", ("metrics=[clip",), 2, r"ts2 analyze: no viable alternative at input '\[clip'")
override_case("unknown-protocol", "`protocol=nope` (no such config)", ("protocol=nope",), 2,
              r"unknown option 'nope' for the config group 'protocol'; expected one of \['graph', 'paper'\]")
override_case("unknown-dataset", "`dataset=nope` (no such config)", ("dataset=nope",), 2,
              r"unknown option 'nope' for the config group 'dataset'; expected one of")
override_case("subsets", "`subsets=bogus`", ("subsets=bogus",), 2, r"subsets=bogus: expected one of auto, dataset, column, ts2, none, got 'bogus'")
override_case("subsets-column", "`subsets=column` without a subset column", ("subsets=column",), 2,
              r"subsets=column expects a 'subset' column")
override_case("meta-metric", "`meta_metrics=[bogus]`", ("meta_metrics=[bogus]",), 2, r"expected a meta-metric among \['rank'")
override_case("compare-one", "`compare=[clip]` (one name)", ("compare=[clip]",), 2, r"expected compare=\[metric_a,metric_b\]")
override_case("compare-unknown", "`compare=[clip,nope]`", ("compare=[clip,nope]",), 2, r"expected metrics among \['clip', 'tifa'\], got 'nope'")
override_case("protocols-dup", "`protocols=[paper,paper]`", ("protocols=[paper,paper]",), 2,
              r"protocols=\[paper, paper\]: expected a protocol among .*each name once")
override_case("confidence-range", "`confidence=2` (with a bootstrap)", ("confidence=2", "bootstrap=10"), 2, r"confidence=2: expected a number > 0 and < 1, got 2")
override_case("bootstrap-negative", "`bootstrap=-1`", ("bootstrap=-1",), 2, r"bootstrap=-1: expected an integer >= 0, got -1")
override_case("max-walks-text", "`max_walks=abc`", ("max_walks=abc",), 2, r"max_walks: expected a positive integer or null, got 'abc'")
override_case("max-walks-zero", "`max_walks=0`", ("max_walks=0",), 2, r"max_walks: expected a positive integer or null, got 0")
override_case("max-walks-null", "`max_walks=null` (no limit)", ("max_walks=null",), 0, "", verdict="correct",
              check=same_as_clean("clip"))
override_case("max-walks-small", "`max_walks=1`: SEG 0 (2 walks) is named and left out", ("max_walks=1",), 0,
              r"SEG 0: 2 walks over the present levels, 2 over its graph; over max_walks=1", verdict="warned",
              check=lambda d, out: close(value_of(d, "clip", "rank"), 1.0))
override_case("image-roots-int", "`image_roots=5` with a dataset", ("image_roots=5", "path={d}/metadata.csv"), 2,
              r"expected image_roots to be a folder or a list of folders, got 5", files={"metadata.csv": meta_csv()})
override_case("metrics-empty", "`metrics=[]` (all metrics)", ("metrics=[]",), 0, "", verdict="correct",
              check=same_as_clean("tifa"))
override_case("human-missing", "`human=` a file that does not exist", ("human={d}/nope.csv",), 2,
              r"expected a human-judgment file .* at .*nope\.csv, found none")
for opt, val, msg in [("permutations", "-5", r"expected an integer >= 1, got -5"), ("permutations", "0", r"expected an integer >= 1, got 0"),
                      ("seed", "abc", r"expected an integer >= 0, got 'abc'"), ("bootstrap", "abc", r"expected an integer >= 0, got 'abc'"),
                      ("confidence", "abc", r"expected a number > 0 and < 1, got 'abc'")]:
    override_case(f"{opt}-{val}", f"`{opt}={val}`", (f"{opt}={val}",), 2, rf"ts2 analyze: {opt}={val}: {msg}")
override_case("ranking-alpha-text", "`ranking.alpha=abc` (a nested option)", ("ranking.alpha=abc",), 2,
              r"ts2 analyze: ranking\.alpha=abc: expected a number > 0 and < 1, got 'abc'")
override_case("ranking-alpha-one", "`ranking.alpha=1`", ("ranking.alpha=1",), 2,
              r"ts2 analyze: ranking\.alpha=1: expected a number > 0 and < 1, got 1")
override_case("ranking-enabled-word", "`ranking.enabled=maybe`", ("ranking.enabled=maybe",), 2,
              r"ts2 analyze: ranking\.enabled=maybe: expected true or false, got 'maybe'")
add(Case("override-n-segs-text", "overrides", "`ts2 data make-synthetic n_segs=abc`", {},
         ("data", "make-synthetic", "n_segs=abc", "out={d}/syn"), rc=2, expect=r"ts2 data: n_segs=abc: expected an integer >= 1, got 'abc'"),
    Case("override-json-maybe", "overrides", "`ts2 data info json=maybe`", {"metadata.csv": meta_csv()},
         info("metadata.csv", "json=maybe"), rc=2, expect=r"ts2 data: json=maybe: expected true or false, got 'maybe'"))
add(Case("override-data-max-walks", "overrides", "`ts2 data info max_walks=abc`", {"metadata.csv": meta_csv()},
         info("metadata.csv", "max_walks=abc"), rc=2, expect=r"expected max_walks to be a positive integer or null"),
    Case("override-data-image-roots", "overrides", "`ts2 data validate image_roots={a: 1}` (a mapping)",
         {"metadata.csv": meta_csv()}, validate("metadata.csv", "image_roots={a:1}"), rc=2,
         expect=r"expected image_roots to be a folder or a list of folders"),
    Case("override-no-action", "overrides", "`ts2 data` without an action", {}, ("data",), rc=2,
         expect=r"ts2 data: expected an action, one of \['info', 'validate', 'make-synthetic', 'from-labels'\]"),
    Case("override-bad-action", "overrides", "`ts2 data explode`", {}, ("data", "explode"), rc=2,
         expect=r"unknown action 'explode'"),
    Case("override-bad-command", "overrides", "`ts2 frobnicate`", {}, ("frobnicate",), rc=2,
         expect=r"ts2: unknown command 'frobnicate'"))

# -- environment faults ---------------------------------------------------------------------------
add(Case("env-output-dir-devnull", "environment", "`output_dir=/dev/null` (a device)", {"scores.csv": scores_csv()},
         ("analyze", "scores={d}/scores.csv", "reference=null", "bootstrap=0", "output_dir=/dev/null"), rc=2,
         expect=r"ts2 analyze: cannot create output_dir /dev/null \(/dev/null: Not a directory\)"),
    Case("env-output-dir-file", "environment", "`output_dir` is an existing regular file", {"scores.csv": scores_csv(), "f": "x"},
         ("analyze", "scores={d}/scores.csv", "reference=null", "bootstrap=0", "output_dir={d}/f"), rc=2,
         expect=r"cannot create output_dir .*/f \(.*/f: Not a directory\)"),
    Case("env-output-dir-under-file", "environment", "`output_dir` below a regular file", {"scores.csv": scores_csv(), "f": "x"},
         ("analyze", "scores={d}/scores.csv", "reference=null", "bootstrap=0", "output_dir={d}/f/sub"), rc=2,
         expect=r"cannot create output_dir .*/f/sub \(.*/f: Not a directory\)"),
    Case("env-output-dir-proc", "environment", "`output_dir` under /proc", {"scores.csv": scores_csv()},
         ("analyze", "scores={d}/scores.csv", "reference=null", "bootstrap=0", "output_dir=/proc/ts2-x"), rc=2,
         expect=r"cannot create output_dir /proc/ts2-x \(/proc: No such file or directory\)"),
    Case("env-no-home", "environment", "HOME unset", {"metadata.csv": meta_csv()}, validate(), rc=0, verdict="correct",
         expect=r"OK: 2 SEGs", env={"HOME": None}),
    Case("env-c-locale", "environment", "LC_ALL=C with a non-ASCII prompt", {"m/metadata.csv": meta_with(0, 1, "un cube rouge é")},
         validate("m/metadata.csv"), rc=0, verdict="warned", expect=r"expected the SEG's prompt 'a red cube', got 'un cube rouge é'",
         env={"LC_ALL": "C", "LANG": "C"}),
    Case("env-cache-dir-unset", "environment", "TS2_CACHE_DIR unset: `data validate` needs no cache",
         {"metadata.csv": meta_csv()}, validate(), rc=0, verdict="correct", expect=r"OK: 2 SEGs",
         env={"TS2_CACHE_DIR": "{d}/nonexistent/cache"}),
    Case("env-scores-symlink-loop", "environment", "scores= a symlink loop", {}, analyze("loop.csv"), rc=2,
         expect=r"expected a score table at .*loop\.csv, found none",
         setup=lambda d: os.symlink(d / "loop.csv", d / "loop.csv")),
    Case("env-scores-devzero", "environment", "scores= a symlink to /dev/zero", {}, analyze("zero.csv"), rc=2,
         expect=r"expected a score table at .*zero\.csv, found none", setup=lambda d: os.symlink("/dev/zero", d / "zero.csv"),
         timeout=20),
    Case("env-dataset-devzero", "environment", "path= a dataset.yaml symlinked to /dev/zero", {}, validate("z.yaml"), rc=2,
         expect=r"expected a SEG file \(\.yaml/\.json\) at .*z\.yaml, found none",
         setup=lambda d: os.symlink("/dev/zero", d / "z.yaml"), timeout=20),
    Case("env-cache-dir-file", "environment", "`ts2 cache info cache_dir=` a regular file", {"f": "x"},
         ("cache", "info", "cache_dir={d}/f"), rc=2,
         expect=r"ts2 cache: expected a folder for ts2's caches at .*/f \(TS2_CACHE_DIR, cache_dir=\), got a file"),
    Case("env-cache-clear-dir-file", "environment", "`ts2 cache clear cache_dir=` a regular file", {"f": "x"},
         ("cache", "clear", "cache_dir={d}/f"), rc=2,
         expect=r"ts2 cache: expected a folder for ts2's caches at .*/f \(TS2_CACHE_DIR, cache_dir=\), got a file"),
    Case("env-cache-dir-devnull", "environment", "`ts2 cache info cache_dir=/dev/null`", {},
         ("cache", "info", "cache_dir=/dev/null"), rc=2,
         expect=r"ts2 cache: expected a folder for ts2's caches at /dev/null \(TS2_CACHE_DIR, cache_dir=\), got a file"),
    Case("env-dataset-fifo", "environment", "path= a dataset.yaml that is a FIFO", {}, validate("f.yaml"), rc=2,
         expect=r"expected a SEG file .* found none", setup=lambda d: os.mkfifo(d / "f.yaml"), timeout=20))


# -- image files (ts2 score with an exact pixel-mean metric, tests/tiny_models.py) -----------------
def _png(path: Path, mode: str = "RGB", size=(8, 8), fmt: str | None = None, **kw) -> None:
    from PIL import Image

    colour = {"RGB": (100, 50, 20), "RGBA": (100, 50, 20, 128), "CMYK": (10, 20, 30, 40), "I;16": 30000}.get(mode, 100)
    Image.new(mode, size, colour).save(path, format=fmt, **kw)


def image_dataset(hostile: str, make: Callable[[Path], None] | None):
    """setup: 10 good 8x8 images in a chain of nodes 0..9, plus the hostile image in node 3."""
    def setup(d: Path) -> None:
        import yaml

        for i in range(10):
            _png(d / f"g{i}.png")
        if make is not None:
            make(d / hostile)
        nodes = [{"label": str(i), "images": [{"id": f"g{i}.png", "path": f"g{i}.png"}]} for i in range(10)]
        nodes[3]["images"].append({"id": hostile, "path": hostile})
        (d / "d.yaml").write_text(yaml.safe_dump({"format": "ts2-seg/1", "segs": [{"id": "a", "prompt": "p", "nodes": nodes}]}))
    return setup


SCORE = ("score", "path={d}/d.yaml", "~metric", "+metrics.fake={_target_:tiny_models.PixelMeanMetric,name:fake}",
         "device=cpu", "progress=false", "num_workers=0", "max_failure_share=0.5", "cache_dir={d}/cache", "output_dir={d}/out")


def scored(hostile: str, finite: bool):
    """check: the 10 good images are scored exactly (mean 100/50/20 -> 56.67/255 + 1/1000) and the
    hostile one has a score (finite) or an empty cell (failed)."""
    def check(d: Path, out: str) -> None:
        import numpy as np
        import pandas as pd

        t = pd.read_csv(d / "out" / "scores.csv", dtype={"file_name": str})
        good = t[t.file_name.str.startswith("g")]["fake"].to_numpy()
        assert len(good) == 10 and np.allclose(good, (100 + 50 + 20) / 3 / 255 + 1 / 1000), good
        cell = t.loc[t.file_name == hostile, "fake"]
        assert len(cell) == 1 and (np.isfinite(cell.iloc[0]) if finite else np.isnan(cell.iloc[0])), cell
    return check


def image_case(cid, what, hostile, make, verdict, expect=""):
    add(Case(f"image-{cid}", "images", what, {}, SCORE, rc=0, verdict=verdict, expect=expect,
             setup=image_dataset(hostile, make), check=scored(hostile, verdict == "correct"), timeout=120))


FAILED = r"fake: 1 of 11 item\(s\) failed \(first: {}: "
image_case("corrupt", "PNG signature then random bytes", "corrupt.png",
           lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(200))), "warned",
           FAILED.format("corrupt.png") + r".*expected a readable image file")
image_case("zero-byte", "a 0-byte .png", "zero.png", lambda p: p.write_bytes(b""), "warned",
           FAILED.format("zero.png") + r".*expected a readable image file")
image_case("text", "a text file named .png", "text.png", lambda p: p.write_text("hello"), "warned",
           FAILED.format("text.png") + r".*expected a readable image file")
image_case("truncated", "a PNG cut in half", "trunc.png",
           lambda p: (_png(p), p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])), "warned",
           FAILED.format("trunc.png"))
image_case("directory", "a folder named x.png", "adir.png", lambda p: p.mkdir(), "warned", FAILED.format("adir.png"))
image_case("missing", "an image file that does not exist", "missing.png", None, "warned",
           FAILED.format("missing.png") + r"missing image file: expected an? (image )?file at .*missing\.png, found none")
image_case("outside-link", "a symlink inside the folder to a text file outside it", "outlink.png",
           lambda p: os.symlink("/etc/hostname", p), "warned", FAILED.format("outlink.png"))
for cid, mode, name, kw in [("gray16", "I;16", "i16.png", {}), ("rgba", "RGBA", "rgba.png", {}), ("palette", "P", "p.png", {}),
                            ("cmyk-jpeg", "CMYK", "cmyk.jpg", {}), ("png-named-jpg", "RGB", "pngjpg.jpg", {"fmt": "PNG"}),
                            ("one-pixel", "RGB", "one.png", {"size": (1, 1)}), ("webp", "RGB", "w.webp", {}),
                            ("tiff", "RGB", "t.tif", {}), ("bmp", "RGB", "b.bmp", {}), ("gray", "L", "l.png", {})]:
    image_case(cid, f"a valid but unusual image: {cid}", name, lambda p, mode=mode, kw=kw: _png(p, mode, **kw), "correct")
image_case("animated-gif", "an animated GIF (first frame scored)", "anim.gif",
           lambda p: __import__("PIL.Image").Image.new("P", (8, 8)).save(
               p, save_all=True, append_images=[__import__("PIL.Image").Image.new("P", (8, 8), 3)]), "correct")

image_case("fifo", "an image path that is a FIFO (named pipe)", "fifo.png", os.mkfifo, "warned",
           FAILED.format("fifo.png") + r".*expected a regular image file, got a FIFO")
image_case("devzero", "an image path that is a symlink to /dev/zero", "zero.png", lambda p: os.symlink("/dev/zero", p),
           "warned", FAILED.format("zero.png") + r".*expected a regular image file, got a character device")
image_case("symlink-loop", "an image path that is a symlink loop", "loop.png", lambda p: os.symlink(p, p), "warned",
           FAILED.format("loop.png") + r".*expected a readable image file, got Too many levels of symbolic links")


def bomb_png(path: Path, side: int = 30000) -> None:
    """A real decompression bomb: a 1-bit side x side PNG of zeros, ~110 KB on disk, 0.9 G pixels
    (written row by row, so making it never holds the image)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    row, z = b"\x00" * (1 + (side + 7) // 8), zlib.compressobj(9)  # filter byte + packed 1-bit pixels
    idat = b"".join(z.compress(row) for _ in range(side)) + z.flush()
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0))
                     + chunk(b"IDAT", idat) + chunk(b"IEND", b""))


image_case("decompression-bomb", "a 30,000 x 30,000 PNG of 110 KB (decompression bomb)", "bomb.png", bomb_png, "warned",
           FAILED.format("bomb.png") + r".*expected a readable image file, got DecompressionBombError: Image size "
           r"\(900000000 pixels\) exceeds limit")


# -- issue 24: result sets replaced whole, one writer, inputs checked (main) -------------------------
def _analyze_into(d: Path, *extra: str) -> int:
    from ts2.cli import main

    return main(["analyze", f"scores={d}/scores.csv", "bootstrap=0", "reference=null", f"output_dir={d}/out",
                 *extra])


def _set_files(folder: Path) -> dict:
    from seg_data.result_sets import MANIFEST

    return {k: v["sha256"] for k, v in json.loads((folder / MANIFEST).read_text())["files"].items()}


def _second_run_dies_writing(d: Path):
    """A complete analysis, then a second one into the same folder whose disk fills up after
    its first file: (exit code, state, the old set untouched, nothing left beside the folder)."""
    import errno
    from unittest import mock

    from seg_data import result_sets as R

    if _analyze_into(d) != 0:
        raise AssertionError("the first analysis failed")
    before = _set_files(d / "out")
    real, left = R.atomic_write_bytes, [2]

    def full_disk(path, data):
        left[0] -= 1
        if left[0] < 0:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data)

    with mock.patch.object(R, "atomic_write_bytes", full_disk):
        try:
            rc = _analyze_into(d, "seed=7", "bootstrap=10")
        except OSError:
            rc = "raised"
    return (rc != 0, R.result_set_state(d / "out")[0], _set_files(d / "out") == before,
            sorted(p.name for p in d.iterdir() if p.name.startswith(".out")))


def _leftovers_not_certified(d: Path):
    """Analyze with a ranking, then again without: (ranking.csv there, listed in the manifest)."""
    if _analyze_into(d, "ranking.enabled=true") != 0 or not (d / "out" / "ranking.csv").is_file():
        raise AssertionError("the first analysis wrote no ranking.csv")
    if _analyze_into(d, "ranking.enabled=false") != 0:
        raise AssertionError("the second analysis failed")
    return (d / "out" / "ranking.csv").exists(), "ranking.csv" in _set_files(d / "out")


def _hold_lock(d: Path) -> None:
    """A second live writer: another process holding out/'s lock for the length of the case."""
    import subprocess
    import sys

    code = ("import sys, time\nfrom seg_data.result_sets import folder_lock\n"
            "with folder_lock(sys.argv[1], 'ts2 analyze'):\n    print('locked', flush=True)\n    time.sleep(20)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    p = subprocess.Popen([sys.executable, "-c", code, str(d / "out")], stdout=subprocess.PIPE, text=True, env=env)
    if p.stdout.readline().strip() != "locked":
        raise AssertionError("the lock holder did not start")
    import atexit

    atexit.register(p.kill)  # it ends by itself after 20 s


def _analysed_then_edited(d: Path) -> None:
    if _analyze_into(d) != 0:
        raise AssertionError("the analysis failed")
    (d / "scores.csv").write_text(scores_csv({"clip": [0.1, 0.6, 0.5, 0.2, 0.8, 0.5, 0.9],
                                              "tifa": BASE_SCORES["tifa"]}))


add(
    Case("set-second-run-disk-full", "result-set", "a complete analysis, then a second one into the same folder "
         "whose disk fills up while it writes", {"scores.csv": scores_csv()}, call=labelled(
             "analyze twice into one output_dir, the 2nd with ENOSPC", _second_run_dies_writing),
         verdict="correct", value=(True, "complete", True, [])),
    Case("set-leftover-ranking", "result-set", "re-analysis into a used folder with `ranking.enabled=false` "
         "(the first run wrote ranking.csv)", {"scores.csv": scores_csv()}, call=labelled(
             "analyze ranking.enabled=true, then =false, into one output_dir", _leftovers_not_certified),
         verdict="correct", value=(False, False)),
    Case("set-second-writer", "result-set", "another live process is writing the same output_dir",
         {"scores.csv": scores_csv()}, analyze(), rc=2, setup=_hold_lock,
         expect=r"expected no other writer, got ts2 analyze \(pid \d+"),
    Case("set-stale-scores", "result-set", "the scores behind a finished analysis edited, then `ts2 report` on it",
         {"scores.csv": scores_csv()}, ("report", "results=[{d}/out]", "output_dir={d}/rep", "bootstrap=0"), rc=2,
         setup=_analysed_then_edited, expect=r"expected .*scores\.csv as it was when analysed .* got a changed file"),
)


def markdown_table() -> str:
    """The docs table: one row per case."""
    rows = ["| # | area | input | command | exit | verdict |", "|---:|---|---|---|---:|---|"]
    for i, c in enumerate(CASES, 1):
        what = c.what.replace("|", "\\|")
        cmd = c.command.replace("|", "\\|")
        rows.append(f"| {i} | {c.area} | {what} | `{cmd}` | {c.rc} | {c.verdict} |")
    return "\n".join(rows)


START, END = "<!-- hostile-corpus:start -->", "<!-- hostile-corpus:end -->"
DOC = Path(__file__).resolve().parents[1] / "docs" / "reliability.md"


def docs_section() -> str:
    from collections import Counter

    by_area = Counter(c.area for c in CASES)
    by_verdict = Counter(c.verdict for c in CASES)
    words = {"refused": "refused with a clear message", "correct": "correct value", "warned": "correct with a warning"}
    head = (f"{len(CASES)} cases ({', '.join(f'{a}: {n}' for a, n in by_area.items())}); verdicts: "
            f"{', '.join(f'{words[v]}: {n}' for v, n in by_verdict.items())}; and, since a case fails otherwise, "
            "tracebacks: 0, hangs: 0, silent wrong results: 0. Generated by `python tests/hostile_cases.py` "
            "from the case list that `tests/test_hostile_corpus.py` runs; `test_docs_table_is_current` fails when "
            "this table is stale.")
    return f"{START}\n{head}\n\n{markdown_table()}\n{END}"


def write_docs() -> None:
    text = DOC.read_text(encoding="utf-8")
    if START in text:
        a, b = text.index(START), text.index(END) + len(END)
        text = text[:a] + docs_section() + text[b:]
    else:
        text = text.rstrip("\n") + "\n\n### The hostile-input corpus\n\n" + docs_section() + "\n"
    DOC.write_text(text, encoding="utf-8")



# -- issue 24: reference names, high-bit-depth images, one-line errors (h-inputs) ----------------
# A user column named like a reference metric is kept beside it (the reference one as NAME_reference).
def _beside_reference(d: Path, out: str) -> None:
    """check: the user's `clip` keeps the clean values; the reference's `clip` (tifa's scores) is
    analysed as `clip_reference`, so its meta-metrics equal tifa's."""
    same_as_clean("clip")(d, out)
    for mm in ("rank", "sep", "delta"):
        close(value_of(d, "clip_reference", mm), value_of(d, "tifa", mm))
    note_in_analysis_json(d, r"column 'clip' named like the reference metric 'clip'.*beside it as 'clip_reference'")


add(Case("ref-name-collision", "reference", "a user column `clip` named like a metric of `reference=FILE`",
         {"scores.csv": scores_csv(), "ref.csv": scores_csv({"clip": BASE_SCORES["tifa"]})},
         analyze("scores.csv", "reference={d}/ref.csv"), rc=0, verdict="warned",
         expect=r"column 'clip' named like the reference metric 'clip' .*the reference one beside it as 'clip_reference'",
         check=_beside_reference),
    Case("ref-name-collision-twice", "reference", "the user has both `clip` and `clip_reference`; the reference has `clip`",
         {"scores.csv": scores_csv({"clip": BASE_SCORES["clip"], "clip_reference": BASE_SCORES["tifa"]}),
          "ref.csv": scores_csv({"clip": BASE_SCORES["tifa"]})},
         analyze("scores.csv", "reference={d}/ref.csv"), rc=0, verdict="warned", expect=r"beside it as 'clip_reference2'",
         check=lambda d, out: close(value_of(d, "clip_reference2", "rank"), value_of(d, "clip_reference", "rank"))))


# High-bit-depth images: each Pillow mode by its real range, or that image's failure with the reason.
def tiff_32bit(path: Path, a, sample_format: int) -> None:
    """A one-strip, uncompressed grey TIFF of 32-bit samples (``sample_format`` 1: unsigned, 2: signed),
    written byte by byte (Pillow only writes signed 32-bit TIFFs)."""
    import struct

    import numpy as np

    a = np.asarray(a)
    h, w = a.shape
    data = a.astype("<u4" if sample_format == 1 else "<i4").tobytes()
    tags = [(256, 4, w), (257, 4, h), (258, 3, 32), (259, 3, 1), (262, 3, 1), (273, 4, 8 + 2 + 12 * 10 + 4),
            (277, 3, 1), (278, 4, h), (279, 4, len(data)), (339, 3, sample_format)]
    ifd = struct.pack("<H", len(tags)) + b"".join(
        struct.pack("<HHI", tag, typ, 1) + (struct.pack("<HH", v, 0) if typ == 3 else struct.pack("<I", v))
        for tag, typ, v in tags)
    path.write_bytes(b"II*\x00" + struct.pack("<I", 8) + ifd + struct.pack("<I", 0) + data)


def _float_tiff(value: float):
    def make(p: Path) -> None:
        import numpy as np
        from PIL import Image

        Image.fromarray(np.full((8, 8), value, dtype=np.float32), mode="F").save(p)
    return make


def grey_scored(hostile: str, grey: int):
    """check: the good images scored exactly, and the hostile grey image as ``grey / 255 + 1/1000``."""
    def check(d: Path, out: str) -> None:
        import pandas as pd

        scored(hostile, True)(d, out)
        t = pd.read_csv(d / "out" / "scores.csv", dtype={"file_name": str})
        close(float(t.loc[t.file_name == hostile, "fake"].iloc[0]), grey / 255 + 1 / 1000)
    return check


for cid, what, name, make, grey in [
        ("tiff-uint32", "an unsigned 32-bit TIFF (3e9 everywhere: 178, not all white)", "u32.tif",
         lambda p: tiff_32bit(p, [[3_000_000_000] * 8] * 8, 1), 178),  # round(3e9 * 255 / (2**32 - 1))
        ("tiff-int32-16bit", "a signed 32-bit TIFF holding 16-bit values (25700: 100)", "i32.tif",
         lambda p: tiff_32bit(p, [[25700] * 8] * 8, 2), 100),
        ("tiff-float-unit", "a float TIFF with values in [0, 1] (0.5: 128, not black)", "f01.tif", _float_tiff(0.5), 128),
        ("tiff-float-bytes", "a float TIFF with values in [0, 255] (99.6: 100)", "f255.tif", _float_tiff(99.6), 100),
        ("tiff-float-range", "a float TIFF of 1000.0 (above 255: scaled by its maximum, 255)", "big.tif",
         _float_tiff(1000.0), 255)]:
    add(Case(f"image-{cid}", "images", what, {}, SCORE, rc=0, verdict="correct", setup=image_dataset(name, make),
             check=grey_scored(name, grey), timeout=120))
for cid, what, name, make, reason in [
        ("tiff-int32-negative", "a signed 32-bit TIFF with a negative value", "neg.tif",
         lambda p: tiff_32bit(p, [[-5] + [10] * 7] * 8, 2), r"expected non-negative values .* minimum of -5"),
        ("tiff-float-nan", "a float TIFF of NaN", "nan.tif", _float_tiff(float("nan")), r"expected finite values .* NaN"),
        ("tiff-float-inf", "a float TIFF of +inf", "inf.tif", _float_tiff(float("inf")), r"expected finite values .* infinite"),
        ("tiff-float-negative", "a float TIFF of -1.0", "neg.tif", _float_tiff(-1.0),
         r"pixel values of 0 or more .*, got values in \[-1, -1\]")]:
    image_case(cid, what, name, make, "warned", FAILED.format(name) + ".*" + reason)


# One line on stderr (no traceback), exit 2 (130 for Ctrl-C), no folder for what the precheck finds.
def no_out(d: Path, out: str) -> None:
    assert not (d / "out").exists(), "expected no output folder"


def ts2_child(d: Path, handler_body: str, argv: list[str], **popen_kw):
    """A ``ts2`` process (``ts2.cli.main(argv)``) whose command handler is ``handler_body`` (one line of
    Python; ``cfg`` is the composed config, ``marker`` a file in ``d``): Ctrl-C and rlimit cases."""
    import subprocess
    import sys

    script = d / "child.py"
    script.write_text("import sys, time, pathlib\nimport ts2.cli as cli\nmarker = pathlib.Path(sys.argv[1])\n"
                      f"def handler(cfg):\n    {handler_body}\ncli.resolve = lambda _t: handler\n"
                      "sys.exit(cli.main(sys.argv[2:]))\n", encoding="utf-8")
    repo = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(x for x in (repo, os.environ.get("PYTHONPATH")) if x)}
    return subprocess.Popen([sys.executable, str(script), str(d / "marker"), *argv], cwd=d, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen_kw)


def ctrl_c(d: Path) -> tuple[int, str]:
    """A real SIGINT to ``ts2 analyze`` while its handler runs: (exit code, last stderr line)."""
    import signal
    import time

    (d / "scores.csv").write_text(scores_csv())
    p = ts2_child(d, "marker.write_text('x'); time.sleep(60)", ["analyze", f"scores={d}/scores.csv", f"output_dir={d}/out"])
    # Wait for a state (the handler is running), not a clock: on a loaded machine the child's
    # imports alone can take a minute, and a SIGINT sent before its handler runs tests nothing.
    # The case's own alarm (its timeout) still ends a child that never gets there.
    while not (d / "marker").exists() and p.poll() is None:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate()
    if "Traceback" in err:
        raise OSError(err[-2000:])
    return p.returncode, err.strip().splitlines()[-1]


def file_size_limit(d: Path) -> tuple[int, str]:
    """``ts2 analyze`` whose handler writes 1 MiB under a 256 KiB ``RLIMIT_FSIZE``: (exit code, last line)."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))

    (d / "scores.csv").write_text(scores_csv())
    p = ts2_child(d, "f = open(cfg.output_dir + '/big.bin', 'wb'); f.write(bytes(1 << 20))",
                  ["analyze", f"scores={d}/scores.csv", f"output_dir={d}/out"], preexec_fn=limit)
    _, err = p.communicate(timeout=120)
    if "Traceback" in err:
        raise OSError(err[-2000:])
    return p.returncode, err.strip().splitlines()[-1].replace(str(d), "{d}")


override_case("env-unset-output-dir", "`output_dir=${oc.env:UNSET}/x` (an unset variable)",
              ("output_dir=${oc.env:TS2_HOSTILE_UNSET}/x",), 2,
              r"^ts2 analyze: output_dir=\$\{oc\.env:TS2_HOSTILE_UNSET\}/x: cannot resolve the interpolation: "
              r"Environment variable 'TS2_HOSTILE_UNSET' not found", check=no_out)
override_case("env-unset-value", "`reference=${oc.env:UNSET}` (an unset variable in a value)",
              ("reference=${oc.env:TS2_HOSTILE_UNSET}",), 2,
              r"reference=\$\{oc\.env:TS2_HOSTILE_UNSET\}: cannot resolve .*'TS2_HOSTILE_UNSET' not found", check=no_out)
override_case("non-ascii-unquoted", "`output_dir=résultats` (unquoted non-ASCII value)", ("output_dir=résultats",), 2,
              r"cannot parse the override 'output_dir=résultats'.* write 'output_dir=\"résultats\"'$")
override_case("parens-unquoted", "`+labels.clip=CLIP (ViT-B)` (unquoted parentheses)", ("+labels.clip=CLIP (ViT-B)",), 2,
              r"write '\+labels\.clip=\"CLIP \(ViT-B\)\"'$", check=no_out)
override_case("tie-method", "`protocol.tie_method=bogus` (a protocol option's value)", ("protocol.tie_method=bogus",), 2,
              r"^ts2 analyze: protocol\.tie_method=bogus: expected one of average, min, max, dense, got 'bogus'$",
              check=no_out)
override_case("protocol-walks", "`protocol.walks=tree`", ("protocol.walks=tree",), 2,
              r"protocol\.walks=tree: expected one of levels, dag, got 'tree'", check=no_out)
override_case("protocols-unknown", "`protocols=[paper,bogus]`", ("protocols=[paper,bogus]",), 2,
              r"protocols=\[paper, bogus\]: expected a protocol among \['paper', 'graph'\] \(a list of at least 1, each "
              r"name once\) \(or null\), got \[paper, bogus\]", check=no_out)
add(Case("override-split-title", "overrides", "`ts2 report title=My report` (the shell split the value)", {},
         ("report", "results={d}/x", "title=My", "report", "output_dir={d}/out"), rc=2,
         expect=r"expected key=value, got 'report' .*quote the whole value: 'title=\"My report\"'$", check=no_out),
    Case("env-scores-url-down", "environment", "`scores=http://127.0.0.1:9/x.csv` (a URL, no server)", {},
         ("analyze", "scores=http://127.0.0.1:9/x.csv", "reference=null", "bootstrap=0", "output_dir={d}/out"), rc=2,
         expect=r"expected a local score table file, got the URL http://127\.0\.0\.1:9/x\.csv; download it first"),
    Case("env-reproduce-url-down", "environment", "`ts2 reproduce scores=http://127.0.0.1:9/x.csv` (server down)",
         {"rel/metadata.csv": meta_csv()},
         ("reproduce", "path={d}/rel", "scores=http://127.0.0.1:9/x.csv", "bootstrap=0", "output_dir={d}/out"), rc=2,
         expect=r"scores=http://127\.0\.0\.1:9/x\.csv to be readable, got: .*Connection refused"),
    Case("env-ctrl-c", "environment", "Ctrl-C (SIGINT) while `ts2 analyze` runs", {},
         call=labelled("SIGINT to ts2 analyze", ctrl_c), verdict="correct",
         value=(130, "ts2 analyze: interrupted; nothing written"), timeout=600),
    Case("env-file-size-limit", "environment", "a 256 KiB file-size limit (RLIMIT_FSIZE) while writing", {},
         call=labelled("ts2 analyze under ulimit -f 256", file_size_limit), verdict="correct",
         value=(2, f"ts2 analyze: {{d}}/out/big.bin: EFBIG ({os.strerror(__import__('errno').EFBIG)})"), timeout=150))


# -- issue 24: too little data, unbounded options, silent options (h-analysis) ------------------------
def _ci_withheld(d: Path, out: str) -> None:
    t = metametrics(d)
    assert t["n_segs"].max() == 1 and t[["ci_low", "ci_high"]].isna().all().all(), t
    assert "Avg over 1 SEG," in out and "[n/a]" in out, out
    note_in_analysis_json(d, r"no CI \(n/a\) for \d+ cell\(s\) with fewer than 10 SEGs")


def _metrics_are(d: Path, names: list[str]) -> None:
    got = json.loads((d / "out" / "analysis.json").read_text())["metrics"]
    assert got == names, f"expected metrics {names}, got {got}"


def _header_counts(d: Path, out: str) -> None:
    assert "Avg over 1 to 2 SEGs (per metric: column SEGs)" in out, out
    rows = {ln.split()[0]: ln.split()[1] for ln in out.splitlines() if ln.startswith(("clip ", "tifa "))}
    assert rows == {"clip": "1", "tifa": "2"}, rows


ONE_SEG = scores_csv({m: v[:4] for m, v in BASE_SCORES.items()}, seg_ids=["0"] * 4, nodes=[r[4] for r in BASE_META[:4]],
                     files=[r[2] for r in BASE_META[:4]])
score_case("ci-one-seg", "one SEG analysed with `bootstrap=100`", ONE_SEG, 0,
           r"no CI \(n/a\) for \d+ cell\(s\) with fewer than 10 SEGs \(min_segs_ci=10\)", verdict="warned",
           extra=("bootstrap=100", "chance=0"), check=_ci_withheld)
score_case("ci-seg-count-per-metric", "joined to a 2-SEG dataset, `clip` scored in SEG 0 only: the header's count",
           scores_csv({"clip": BASE_SCORES["clip"][:4] + ["", "", ""], "tifa": BASE_SCORES["tifa"]}), 0,
           verdict="correct", files={"metadata.csv": meta_csv()}, extra=("path={d}/metadata.csv", "chance=0"),
           check=_header_counts)
override_case("min-segs-ci-text", "`min_segs_ci=abc`", ("min_segs_ci=abc",), 2,
              r"ts2 analyze: min_segs_ci=abc: expected an integer >= 0, got 'abc'")
override_case("bootstrap-huge", "`bootstrap=100000000` (122 GiB of replicates)", ("bootstrap=100000000",), 2,
              r"ts2 analyze: expected bootstrap <= 100000 \(about 122\.2 GiB for this table: 2 SEGs, 10 metric x "
              r"meta-metric cells.*got 100000000")
score_case("bootstrap-huge-jsonl", "`bootstrap=100000000` on a JSONL table (not sized before the run)", "{}\n", 2,
           r"ts2 analyze: bootstrap=100000000: expected an integer >= 0 and <= 100000, got 100000000",
           name="s.jsonl", extra=("bootstrap=100000000",))
override_case("chance-huge", "`chance=100000000` (weeks of permutations)", ("chance=100000000",), 2,
              r"ts2 analyze: chance=100000000: expected an integer >= 0 and <= 10000, got 100000000")
override_case("permutations-huge", "`permutations=10000000000`", ("permutations=10000000000",), 2,
              r"permutations=10000000000: expected an integer >= 1 and <= 1000000")
WIDE_200 = scores_csv({f"m{j}": BASE_SCORES["clip"] for j in range(200)})
score_case("bootstrap-memory", "200 metric columns with `bootstrap=90000` (about 11 GiB of replicates)", WIDE_200, 2,
           r"ts2 analyze: expected bootstrap <= \d+ \(about [\d.]+ GiB for this table: 2 SEGs, 1000 metric x "
           r"meta-metric cells.*got 90000", extra=("bootstrap=90000",))
add(Case("override-reproduce-bootstrap-huge", "overrides", "`ts2 reproduce bootstrap=100000000`", {},
         ("reproduce", "path={d}", "bootstrap=100000000", "output_dir={d}/out"), rc=2,
         expect=r"ts2 reproduce: bootstrap=100000000: expected an integer >= 0 and <= 100000"))
override_case("meta-metrics-empty", "`meta_metrics=[]` (empty tables)", ("meta_metrics=[]",), 2,
              r"meta_metrics=\[\]: expected a meta-metric among \['rank', 'sep', 'delta', 'kendall', 'pair_acc'\] "
              r"\(a list of at least 1, each name once\)")
override_case("table-meta-metrics-unknown", "`table_meta_metrics=[rank,bogus]`", ("table_meta_metrics=[rank,bogus]",), 2,
              r"table_meta_metrics=\[rank, bogus\]: expected a meta-metric among \['rank', 'sep', 'delta', 'kendall'")
override_case("key-twice", "`bootstrap=10 bootstrap=20` (Hydra keeps the last)", ("bootstrap=10", "bootstrap=20"), 2,
              r"ts2 analyze: expected each key once, got 'bootstrap' twice \('bootstrap=10' and 'bootstrap=20'\)")
override_case("key-twice-plus", "`seed=1 +seed=2`", ("seed=1", "+seed=2"), 2, r"expected each key once, got 'seed' twice")
score_case("id-beside-seg-id", "a row-number column `id` beside `seg_id`",
           "seg_id,id,file_name,node,clip,tifa\n" + "".join(
               f"{r[0]},{i + 1},{r[2]},{r[4]},{BASE_SCORES['clip'][i]},{BASE_SCORES['tifa'][i]}\n"
               for i, r in enumerate(BASE_META)), 0,
           r"column 'id' holds only numbers but is another name of the key column 'seg_id'", verdict="warned",
           check=lambda d, out: (same_as_clean("clip")(d, out), same_as_clean("tifa")(d, out),
                                 _metrics_are(d, ["clip", "tifa"])))
score_case("excel-trailing-column", "Excel's trailing empty column (`Unnamed: 5`)",
           "".join(line + ",\n" for line in BASE.splitlines()), 0,
           r"column\(s\) \['Unnamed: 5'\] have no header name and no value .*dropped", verdict="warned",
           check=lambda d, out: (same_as_clean("clip")(d, out), _metrics_are(d, ["clip", "tifa"])))
score_case("blank-header-numbers", "a numeric column with a blank header beside the metrics",
           "".join(line + ("," if i == 0 else ",7") + "\n" for i, line in enumerate(BASE.splitlines())), 0,
           r"column 'Unnamed: 5' holds only numbers but is a column without a header name", verdict="warned",
           check=lambda d, out: _metrics_are(d, ["clip", "tifa"]))
score_case("constant-metric", "a metric giving every image 0.5", scores_csv({**BASE_SCORES, "flat": [0.5] * 7}), 0,
           r"metric 'flat': every one of its 7 scores is 0.5 \(a constant\)", verdict="warned",
           check=same_as_clean("clip"))
score_case("level0-unscored", "no level-0 image scored in `tifa`",
           scores_csv({"clip": BASE_SCORES["clip"], "tifa": ["", 0.6, 0.5, 0.9, "", 0.2, 0.7]}), 0,
           r"metric 'tifa': none of the 2 level-0 \(error-free\) images has a score", verdict="warned",
           check=same_as_clean("clip"))
RELEASE_3 = "seg_id,file_name,node,clipscore,alignscore,blip1_tifa\n" + "".join(
    f"{r[0]},{r[2]},{r[4]},{BASE_SCORES['clip'][i]},{BASE_SCORES['tifa'][i]},{BASE_SCORES['clip'][i]}\n"
    for i, r in enumerate(BASE_META))
add(Case("reproduce-missing-column", "scores", "`ts2 reproduce` on a release copy without the `blip1_dsg` column",
         {"metadata.csv": meta_csv(), "released/scores_subset.csv": RELEASE_3},
         ("reproduce", "path={d}", "bootstrap=0", "chance=0", "figures=[]", "output_dir={d}/out"), rc=0,
         verdict="warned", timeout=120,
         expect=r"protocol paper: \d+/\d+ printed Table 2 cells reproduced; 12 not reproduced because published "
                r"column\(s\) \['blip1_dsg'\] are missing"))



# -- issue 42: caches fail closed, partial tables, inputs named for what they are --------------------
def _symlink_to_cwd(d: Path) -> None:
    (d / "here").symlink_to(Path.cwd(), target_is_directory=True)


score_case("gzip-as-csv", "a gzip file named scores.csv", b"\x1f\x8b\x08\x00" + bytes(range(64)), 2,
           r"scores\.csv: expected a csv text table, got a gzip-compressed file: gunzip it first")
score_case("xlsx-as-csv", "an Excel workbook (.xlsx, a ZIP archive) named scores.csv",
           b"PK\x03\x04" + bytes(range(64)), 2,
           r"scores\.csv: expected a csv text table, got a ZIP archive, such as an Excel workbook")
add(Case("env-output-dir-up-relative", "environment", "`output_dir=sub/../..` (above the current folder)",
         {"scores.csv": scores_csv()}, ("analyze", "scores={d}/scores.csv", "reference=null", "bootstrap=0",
                                        "output_dir=sub/../.."), rc=2,
         expect=r"ts2 analyze: expected an output folder other than the current folder or one above it, "
                r"got sub/\.\./\.\. \(-> "),
    Case("env-output-dir-link-to-cwd", "environment", "`output_dir` a symbolic link to the current folder",
         {"scores.csv": scores_csv()}, ("analyze", "scores={d}/scores.csv", "reference=null", "bootstrap=0",
                                        "output_dir={d}/here"), rc=2, setup=_symlink_to_cwd,
         expect=r"expected an output folder other than the current folder or one above it, got .*here \(-> "),
    Case("cache-dir-is-a-file", "environment", "`TS2_CACHE_DIR` is a regular file (the mini set's cache)",
         {"f": "x"}, ("data", "info"), rc=2, env={"TS2_CACHE_DIR": "{d}/f"},
         expect=r"expected a folder for ts2's caches at .*/f \(TS2_CACHE_DIR, cache_dir=\), got a file"))
score_case("partial-one-seg-scored", "joined to a 2-SEG dataset, only SEG 0 scored (`chance=10`)",
           scores_csv({m: v[:4] for m, v in BASE_SCORES.items()}, seg_ids=["0"] * 4,
                      nodes=[r[4] for r in BASE_META[:4]], files=[r[2] for r in BASE_META[:4]]), 0,
           r"3 image\(s\) of dataset .* have no row in .*scores\.csv \(treated as missing scores\)", verdict="warned",
           files={"metadata.csv": meta_csv()}, extra=("path={d}/metadata.csv", "chance=10"))


# -- issue 46 / 42 (h46): an output that is an input is refused, nothing changed on disk -------------
def _tree(d: Path) -> dict[str, str]:
    """Every file under ``d`` with its SHA-256 (the before/after picture of a clash case)."""
    import hashlib

    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file() and p.name != "before.json"}


def _result_set_run(d: Path) -> None:
    """A complete result set in ``{d}/run`` (a real ``ts2 analyze``), then the picture of ``d``."""
    from ts2.cli import main

    rc = main(["analyze", f"scores={d}/scores.csv", f"output_dir={d}/run", "bootstrap=0", "chance=0",
               "reference=null", "protocols=[paper]", "ranking.enabled=false"])
    if rc:
        raise OSError(f"setup: ts2 analyze exited {rc}")
    (d / "before.json").write_text(json.dumps(_tree(d)))


def _snapshot(d: Path) -> None:
    (d / "before.json").write_text(json.dumps(_tree(d)))


def unchanged(d: Path, out: str) -> None:
    before, after = json.loads((d / "before.json").read_text()), _tree(d)
    assert after == before, f"expected nothing changed on disk, got {sorted(set(after.items()) ^ set(before.items()))}"


CLASH = r"output clashes with an input: "
add(
    Case("clash-analyze-into-score-folder", "outputs", "`ts2 analyze scores=RUN/scores.csv output_dir=RUN`",
         {"run/scores.csv": scores_csv()},
         ("analyze", "scores={d}/run/scores.csv", "output_dir={d}/run", "bootstrap=0"), rc=2, setup=_snapshot,
         expect=r"(?m)^ts2 analyze: " + CLASH + r"output_dir=.*/run overlaps the input scores=.*/run/scores\.csv; "
                r"nothing was written, choose another output_dir", check=unchanged),
    Case("clash-analyze-into-result-set", "outputs", "`ts2 analyze scores=RUN/per_seg.csv output_dir=RUN` on a "
         "complete result set", {"scores.csv": scores_csv()},
         ("analyze", "scores={d}/run/per_seg.csv", "output_dir={d}/run"), rc=2, setup=_result_set_run,
         expect=r"ts2 analyze: " + CLASH + r"output_dir=.*/run overlaps the input scores=", check=unchanged),
    Case("clash-report-into-results", "outputs", "`ts2 report results=[RUN] output_dir=RUN`", {"scores.csv": scores_csv()},
         ("report", "results=[{d}/run]", "output_dir={d}/run"), rc=2, setup=_result_set_run,
         expect=r"(?m)^ts2 report: " + CLASH + r"output_dir=.*/run is the input results=.*/run; nothing was written",
         check=unchanged),
    Case("clash-report-inside-results", "outputs", "`ts2 report results=[RUN] output_dir=RUN/sub`",
         {"scores.csv": scores_csv()}, ("report", "results=[{d}/run]", "output_dir={d}/run/sub"), rc=2,
         setup=_result_set_run, expect=r"ts2 report: " + CLASH + r"output_dir=.*/run/sub overlaps the input results=",
         check=unchanged),
    Case("clash-explore-out-scores", "outputs", "`ts2 explore results=RUN out=RUN/per_seg.csv` (issue 42)",
         {"scores.csv": scores_csv()}, ("explore", "results=[{d}/run]", "out={d}/run/per_seg.csv", "images=false"),
         rc=2, setup=_result_set_run,
         expect=r"(?m)^ts2 explore: " + CLASH + r"out=.*/run/per_seg\.csv lies in the input results=.*, choose another out",
         check=unchanged),
    Case("clash-explore-out-html-other-set", "outputs", "`ts2 explore results=OTHER out=RUN/explorer.html` (a file of "
         "another complete result set)", {"scores.csv": scores_csv(), "other/scores.csv": scores_csv()},
         ("explore", "results=[{d}/other]", "out={d}/run/explorer.html", "images=false", "output_dir={d}/ex"),
         rc=2, setup=_result_set_run,
         expect=r"ts2 explore: " + CLASH + r"out=.*/run/explorer\.html lies in the result set .*/run; nothing was written",
         check=unchanged),
)

score_case("blank-cells-summary", "2 of 7 `tifa` cells blank (no error, the analysis goes on)",
           scores_csv({"clip": BASE_SCORES["clip"], "tifa": [0.4, "", 0.5, 0.9, 0.3, "", 0.7]}), 0,
           r"(?m)^  protocol paper: metric 'tifa' has 2 of 7 cells missing \(blank, NaN or a failure code read as "
           r"missing\), in 2 of 2 SEGs; 2 of 3 walks pass through one$", verdict="warned",
           check=lambda d, out: (same_as_clean("clip")(d, out),
                                 note_in_analysis_json(d, r"metric 'tifa' has 2 of 7 cells missing")))
FN_ONLY = "file_name,clip,tifa\n" + "".join(f"{r[2].rsplit('/', 1)[-1]},{BASE_SCORES['clip'][i]},{BASE_SCORES['tifa'][i]}\n"
                                            for i, r in enumerate(BASE_META))
score_case("file-name-only-with-path", "a table of `file_name` (last path part only) and metrics, with `path=`",
           FN_ONLY, 0, r"7 file name\(s\) matched to the dataset's images by their last path part", verdict="warned",
           extra=("path={d}/metadata.csv",), files={"metadata.csv": meta_csv()}, check=same_as_clean("clip"))
score_case("file-name-only-unknown", "a `file_name`-only table naming an image the dataset lacks, with `path=`",
           FN_ONLY.replace("000-02.jpg", "zzz.jpg"), 2,
           r"scores\.csv: row 4: expected a file_name of the dataset's images .*got 'zzz\.jpg', which is none of its 7",
           extra=("path={d}/metadata.csv",), files={"metadata.csv": meta_csv()}, check=no_out)
score_case("reference-copy-plus-column", "the reference table with one column added, analysed with that reference",
           scores_csv({**BASE_SCORES, "mine": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]}), 0,
           r"column\(s\) \['clip', 'tifa'\] are identical to the reference metrics of that name in .*ref\.csv: each "
           r"analysed once, as the reference", verdict="warned", extra=("reference={d}/ref.csv",),
           files={"ref.csv": scores_csv()},
           check=lambda d, out: (same_as_clean("clip")(d, out), _metrics_are(d, ["clip", "tifa", "mine"])))


def _no_column(name: str):
    def check(d: Path, out: str) -> None:
        header = (d / "out" / "scores.csv").read_text().splitlines()[0].split(",")
        assert name not in header, f"expected no {name!r} column in scores.csv, got {header}"
    return check


add(Case("score-always-yes-alone", "controls", "`ts2 score metric=always_yes` alone on a dataset without questions",
         {}, ("score", "dataset=mini", "limit=4", "metric=always_yes", "progress=false", "output_dir={d}/out"), rc=1,
         expect=r"set metric\.questions_file=FILE, or generate them: .*metric\.questions=generate "
                r"\+qa_lm@metric\.lm=geneval_rules\)(.|\n)*always_yes failed on every one of its 4 images: no column "
                r"written to scores\.csv", check=_no_column("always_yes"), timeout=180))
def _in_report(d: Path, text: str) -> None:
    html = (d / "out" / "report.html").read_text()
    assert text in html, f"expected {text!r} in report.html"


add(Case("report-unknown-label-key", "report", "`ts2 report labels={nope: X}` (a key that names no metric)",
         {"run/scores.csv": scores_csv()},
         ("report", "results=[{d}/run]", "output_dir={d}/out", "figures=[]", "bootstrap=0", "chance=0",
          "labels={nope: X, clip: CLIP}"), rc=0, verdict="warned",
         expect=r"labels name no metric of the report: \['nope'\]; expected keys among \['clip', 'tifa'\]",
         check=lambda d, out: _in_report(d, "labels name no metric of the report")))


if __name__ == "__main__":
    write_docs()
    print(f"wrote {len(CASES)} cases to {DOC}")
