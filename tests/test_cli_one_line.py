"""Issue 24, item 9: every failure that reaches the command line is one line on stderr with exit
code 2 (130 for Ctrl-C), and a failure found before Hydra runs creates no folder.

Covered: an unset ``${oc.env:...}`` (in ``output_dir`` and in another value), a URL whose server
is down, Ctrl-C (a real SIGINT to a subprocess and an in-process ``KeyboardInterrupt``), a full
disk / file-size limit / read-only file reaching the CLI (``OSError`` with ENOSPC, EFBIG, EACCES,
EROFS, EDQUOT; one real EFBIG from ``RLIMIT_FSIZE``), an unquoted value Hydra's grammar rejects
(with the exact quoting to use), and values of the protocol group's options.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ts2.cli import error_line, main
from ts2.config_check import precheck

REPO = Path(__file__).resolve().parents[1]


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
    ("protocols=[paper,bogus]", "protocols=['paper', 'bogus']: expected a list of paper, graph (or null)"),
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


_CHILD = textwrap.dedent("""
    import sys, time, pathlib
    import ts2.cli as cli
    marker = pathlib.Path(sys.argv[1])
    def handler(cfg):
        {body}
    cli.resolve = lambda _t: handler
    sys.exit(cli.main(sys.argv[2:]))
""")


def _child(tmp_path, body: str, argv: list[str], **kw) -> subprocess.Popen:
    script = tmp_path / "child.py"
    script.write_text(_CHILD.format(body=body), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, str(script), str(tmp_path / "marker"), *argv], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child needs POSIX signals")
def test_ctrl_c_is_exit_130_and_one_line(tmp_path, scores):
    p = _child(tmp_path, "marker.write_text('x'); time.sleep(60)",
               ["analyze", f"scores={scores}", f"output_dir={tmp_path / 'o'}"])
    deadline = time.monotonic() + 60
    while not (tmp_path / "marker").exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert err.strip().splitlines()[-1] == "ts2 analyze: interrupted; nothing written"
    assert "Traceback" not in err


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_file_size_limit_is_one_line_naming_the_file(tmp_path, scores):
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))

    body = "f = open(cfg.output_dir + '/big.bin', 'wb'); f.write(bytes(1 << 20))"
    p = _child(tmp_path, body, ["analyze", f"scores={scores}", f"output_dir={tmp_path / 'o'}"], preexec_fn=limit)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == f"ts2 analyze: {tmp_path / 'o' / 'big.bin'}: EFBIG ({os.strerror(errno.EFBIG)})"
