"""Issue 24, item 9: every failure that reaches the command line is one line on stderr with exit
code 2 (130 for Ctrl-C), and a failure found before Hydra runs creates no folder.

Covered: an unset ``${oc.env:...}`` (in ``output_dir`` and in another value), a URL whose server
is down, Ctrl-C (an in-process ``KeyboardInterrupt``), a full disk / file-size limit / read-only
file reaching the CLI (``OSError`` with ENOSPC, EFBIG, EACCES, EROFS, EDQUOT), an unquoted value
Hydra's grammar rejects (with the exact quoting to use), and values of the protocol group's
options. A real SIGINT to a ``ts2`` process and a real EFBIG under ``RLIMIT_FSIZE`` are the
hostile cases ``env-ctrl-c`` and ``env-file-size-limit`` (``tests/hostile_cases.py``).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ts2.cli import error_line, main
from ts2.config_check import precheck


@pytest.fixture
def scores(tmp_path, monkeypatch) -> Path:
    """A tiny wide score table; the working directory is an empty folder (default outputs land there)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    f = tmp_path / "s.csv"
    f.write_text("seg_id,node,file_name,m\n0,0,a,1\n0,1,b,0.5\n", encoding="utf-8")
    return f


def _one_line(capsys, argv) -> tuple[int, str]:
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return rc, lines[0]


# -- checked before Hydra: no folder --------------------------------------------------------------------
@pytest.mark.parametrize("override, key", [
    ("output_dir=${oc.env:TS2_TEST_UNSET_VAR}/x", "output_dir"),
    ("reference=${oc.env:TS2_TEST_UNSET_VAR}", "reference"),
])
def test_unset_env_interpolation_is_one_line_before_any_folder(capsys, scores, monkeypatch, override, key):
    monkeypatch.delenv("TS2_TEST_UNSET_VAR", raising=False)
    rc, line = _one_line(capsys, ["analyze", f"scores={scores}", override, "bootstrap=0"])
    assert rc == 2
    assert line.startswith(f"ts2 analyze: {key}=${{oc.env:TS2_TEST_UNSET_VAR}}")
    assert "TS2_TEST_UNSET_VAR" in line and "not found" in line
    assert os.listdir(".") == []


def test_set_env_interpolation_still_works(scores, monkeypatch, tmp_path):
    monkeypatch.setenv("TS2_TEST_SET_VAR", str(tmp_path / "o"))
    cfg = precheck("ts2 analyze", "analyze", [f"scores={scores}", "output_dir=${oc.env:TS2_TEST_SET_VAR}/x"])
    assert str(cfg.output_dir) == str(tmp_path / "o" / "x")


@pytest.mark.parametrize("argv, quoted", [
    (["analyze", "output_dir=résultats"], "'output_dir=\"résultats\"'"),
    (["report", "results=x", "title=Mon été (v2)"], "'title=\"Mon été (v2)\"'"),
    (["report", "results=x", "title=My", "report"], "'title=\"My report\"'"),  # the shell split the value
])
def test_unparsable_value_gets_the_exact_quoting(capsys, scores, argv, quoted):
    rc, line = _one_line(capsys, argv)
    assert rc == 2
    assert line.endswith(quoted), line
    assert "LexerNoViableAlt" not in line
    assert os.listdir(".") == []


def test_the_suggested_quoting_parses():
    # The hint's word, as the shell hands it over (outer single quotes removed).
    cfg = precheck("ts2 analyze", "analyze", ['output_dir="résultats"'])
    assert cfg.output_dir == "résultats"
    cfg = precheck("ts2 report", "report", ["results=x", 'title="Mon été (v2)"'])
    assert cfg.title == "Mon été (v2)"


@pytest.mark.parametrize("override, expected", [
    ("protocol.tie_method=bogus", "protocol.tie_method=bogus: expected one of average, min, max, dense, got 'bogus'"),
    ("protocol.walks=tree", "protocol.walks=tree: expected one of levels, dag, got 'tree'"),
    ("protocol.root_duplication=maybe", "protocol.root_duplication=maybe: expected true or false, got 'maybe'"),
    ("protocols=[paper,bogus]", "protocols=[paper, bogus]: expected a protocol among ['paper', 'graph'] (a list of at "
                                "least 1, each name once) (or null), got [paper, bogus]"),
])
def test_protocol_group_values_are_checked_before_any_folder(capsys, scores, override, expected):
    rc, line = _one_line(capsys, ["analyze", f"scores={scores}", override, "bootstrap=0"])
    assert rc == 2
    assert expected in line
    assert os.listdir(".") == []


def test_valid_protocol_values_pass(scores):
    cfg = precheck("ts2 analyze", "analyze", [f"scores={scores}", "protocol=graph", "protocol.tie_method=min",
                                              "protocol.root_duplication=true", "protocols=[graph]"])
    assert cfg.protocol.tie_method == "min" and list(cfg.protocols) == ["graph"]


# -- inside the job ------------------------------------------------------------------------------------
def test_url_score_table_is_one_line(capsys, scores):
    rc, line = _one_line(capsys, ["analyze", "scores=http://127.0.0.1:9/x.csv", "bootstrap=0"])
    assert rc == 2
    assert "got the URL http://127.0.0.1:9/x.csv" in line  # the URL as given, not a mangled path


def test_reproduce_from_a_url_whose_server_is_down(capsys, tmp_path, scores):
    release = tmp_path / "rel"
    release.mkdir()
    (release / "metadata.csv").write_text("x\n", encoding="utf-8")
    rc = main(["reproduce", f"path={release}", "scores=http://127.0.0.1:9/x.csv", "bootstrap=0",
               f"output_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "scores=http://127.0.0.1:9/x.csv" in err and "refused" in err.lower()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG, errno.EACCES, errno.EROFS, errno.EDQUOT])
def test_oserror_reaching_the_cli_names_file_and_errno(capsys, scores, monkeypatch, tmp_path, code):
    target = tmp_path / "o" / "metametrics.csv"

    def handler(cfg):
        raise OSError(code, os.strerror(code), str(target))

    monkeypatch.setattr("ts2.cli.resolve", lambda _t: handler)
    rc, line = _one_line(capsys, ["analyze", f"scores={scores}", f"output_dir={tmp_path / 'o'}"])
    assert rc == 2
    assert line == f"ts2 analyze: {target}: {errno.errorcode[code]} ({os.strerror(code)})"


def test_oserror_without_a_file_names_the_output_dir(capsys, scores, monkeypatch, tmp_path):
    def handler(cfg):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("ts2.cli.resolve", lambda _t: handler)
    rc, line = _one_line(capsys, ["analyze", f"scores={scores}", f"output_dir={tmp_path / 'o'}"])
    assert rc == 2
    assert line == f"ts2 analyze: writing into {tmp_path / 'o'}: ENOSPC ({os.strerror(errno.ENOSPC)})"


def test_keyboard_interrupt_in_process(capsys, scores, monkeypatch, tmp_path):
    def handler(cfg):
        raise KeyboardInterrupt

    monkeypatch.setattr("ts2.cli.resolve", lambda _t: handler)
    rc, line = _one_line(capsys, ["analyze", f"scores={scores}", f"output_dir={tmp_path / 'o'}"])
    assert (rc, line) == (130, "ts2 analyze: interrupted; nothing written")


def test_error_line_leaves_bugs_to_their_traceback():
    assert error_line("ts2 x", ValueError("bug")) is None
    assert error_line("ts2 cache", KeyboardInterrupt()) == ("ts2 cache: interrupted", 130)
