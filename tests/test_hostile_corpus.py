"""The hostile-input corpus (tests/hostile_cases.py): every case is refused with a clear message,
warned about, or gives the correct value; never a traceback, a hang or a silent wrong result.

Commands run in-process (``ts2.cli.main``), inputs are generated into a fresh folder per case,
and an alarm stops a case that hangs. The case table of ``docs/reliability.md`` is generated from
the same list (``python tests/hostile_cases.py``); ``test_docs_table_is_current`` fails when it
is stale.
"""

from __future__ import annotations

import re
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import hostile_cases as H

from ts2.cli import main


class Hang(Exception):
    pass


@contextmanager
def alarm(seconds: int):
    def fire(signum, frame):
        raise Hang(f"no result after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _write(d: Path, files: dict) -> None:
    for name, content in files.items():
        if content is None:
            continue
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")


def run_case(case: H.Case, d: Path, capfd, monkeypatch) -> tuple[int, str, object]:
    _write(d, case.files)
    if case.setup is not None:
        case.setup(d)
    for k, v in case.env.items():
        if v is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v.replace("{d}", str(d)))
    result: object = None
    with alarm(case.timeout):
        if case.argv is not None:
            rc = main([a.replace("{d}", str(d)) for a in case.argv])
        else:
            try:
                result, rc = case.call(d), 0
            except (ValueError, OSError) as e:  # the library's refusals
                result, rc = e, 2
    out, err = capfd.readouterr()
    return rc, out + err + (str(result) if isinstance(result, Exception) else ""), result


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in H.CASES])
def test_hostile_case(case: H.Case, tmp_path, capfd, monkeypatch):
    d = tmp_path / "case dir"  # a space in every path
    d.mkdir()
    rc, text, result = run_case(case, d, capfd, monkeypatch)
    assert "Traceback" not in text, text[-3000:]
    assert rc == case.rc, f"expected exit code {case.rc}, got {rc}:\n{text[-3000:]}"
    if case.expect:
        assert re.search(case.expect, text), f"expected /{case.expect}/ in:\n{text[-3000:]}"
    if case.call is not None and case.verdict == "correct":
        assert result == case.value, f"expected {case.value!r}, got {result!r}"
    if case.check is not None:
        case.check(d, text)


def test_corpus_size_and_shape():
    ids = [c.id for c in H.CASES]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    assert len(H.CASES) >= 187
    for c in H.CASES:
        assert (c.argv is None) != (c.call is None), c.id
        assert c.verdict in {"refused", "correct", "warned"}, c.id
        # a refusal must say why; a success must prove its value or its warning
        if c.verdict == "refused":
            assert c.rc != 0 and c.expect, c.id
        elif c.verdict == "warned":
            assert c.expect, c.id
        else:
            assert c.rc == 0 and (c.check is not None or c.expect or c.call is not None), c.id


def test_docs_table_is_current():
    text = H.DOC.read_text(encoding="utf-8")
    assert H.START in text, "run: python tests/hostile_cases.py"
    section = text[text.index(H.START):text.index(H.END) + len(H.END)]
    assert section == H.docs_section(), "docs/reliability.md is stale: run python tests/hostile_cases.py"
