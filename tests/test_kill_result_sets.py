"""Issue 24: a result folder holds its old complete set or the new complete set at every instant.

For each command that writes a result folder (analyze, report, reproduce, run): a complete earlier
set, then a second run into the same folder that is SIGKILLed at a random moment (20 kills each:
half at random times over the whole run, half at random times after its staging folder appeared,
i.e. while the new set is written and swapped in), then a full disk (a real small tmpfs when
root, else an injected ENOSPC) and two writers at once. Afterwards the folder always reads as
complete and is one whole set, the old or the new, never a mix; nothing stays beside it.

Slow by nature (about 90 short runs); kept to small inputs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from seg_data.result_sets import MANIFEST, result_set_state

SHARED = Path(__file__).resolve().parents[2] / "shared" / "ts2"
KILLS = 20


def _scores(path: Path, seed: int = 0, n_segs: int = 16) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_segs):
        for node in ("0", "1a", "1b", "2", "3"):
            lv = int(node[0])
            for k in range(3):
                rows.append({"seg_id": str(s), "node": node, "file_name": f"i/{s}-{node}-{k}.png",
                             "good": 0.9 - 0.2 * lv + rng.normal(0, 0.1), "noisy": rng.uniform()})
    pd.DataFrame(rows).to_csv(path, index=False)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _cmd(kind: str, src: Path, out: Path, seed: int) -> list[str]:
    base = [sys.executable, "-m", "ts2", kind, f"output_dir={out}", f"seed={seed}"]
    if kind == "analyze":
        return base + [f"scores={src}", "bootstrap=50", "chance=0"]
    if kind == "report":
        return base + [f"results=[{src}]", "bootstrap=50", "chance=0", "figures=[histograms]"]
    if kind == "reproduce":
        return base + [f"path={src}", "bootstrap=2", "chance=0", "figures=[]"]
    return base + ["bootstrap=20", "chance=0", "figures=[]", "max_failure_share=1.0"]  # run: the mini set


def _source(kind: str, tmp: Path) -> Path:
    if kind == "reproduce":
        if not SHARED.is_dir():
            pytest.skip(f"needs the released TS2 files in {SHARED}")
        return SHARED
    src = tmp / "scores.csv"
    _scores(src)
    if kind == "report":  # a score-only result folder to report on
        (tmp / "run").mkdir()
        shutil.move(src, tmp / "run" / "scores.csv")
        return tmp / "run"
    return src


def _set_of(d: Path) -> dict:
    """The folder's set: every file its manifest lists, with its SHA-256 (the state check has
    verified that each file on disk matches)."""
    man = json.loads((d / MANIFEST).read_text())
    return {k: v["sha256"] for k, v in man["files"].items()}


def _staging(out: Path) -> list[Path]:
    return sorted(out.parent.glob(f".{out.name}.ts2-new-*"))


def _run_watching(cmd, out, env, kill_after=None, kill_after_staging=None):
    """Run ``cmd``; SIGKILL it ``kill_after`` s after the start or ``kill_after_staging`` s after its
    staging folder appears. Returns (finished on its own, seconds from staging to exit or None)."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    t0, t_stage = time.perf_counter(), None
    while p.poll() is None:
        now = time.perf_counter()
        if t_stage is None and _staging(out):
            t_stage = now
        if kill_after is not None and now - t0 >= kill_after:
            break
        if kill_after_staging is not None and t_stage is not None and now - t_stage >= kill_after_staging:
            break
        time.sleep(0.002)
    finished = p.poll() is not None
    if not finished:
        p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    return finished, (None if t_stage is None else time.perf_counter() - t_stage), p.returncode


def _old_and_new(kind, src, tmp, env):
    """Two complete sets written with different seeds: the 'old' one sits in the folder before
    each killed run, the 'new' one is what that run writes when it finishes."""
    old, new = tmp / "old", tmp / "new"
    t0 = time.perf_counter()
    r = subprocess.run(_cmd(kind, src, old, 1), capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    full = time.perf_counter() - t0
    finished, writing, rc = _run_watching(_cmd(kind, src, new, 2), new, env)
    assert finished and rc == 0 and writing is not None
    for d in (old, new):
        assert result_set_state(d)[0] == "complete"
    assert _set_of(old) != _set_of(new)
    return old, new, full, writing


@pytest.mark.parametrize("kind", ["analyze", "report", "reproduce", "run"])
def test_kill_at_random_moments_leaves_the_old_or_the_new_set(tmp_path, kind):
    env = _env()
    src = _source(kind, tmp_path)
    old, new, full, writing = _old_and_new(kind, src, tmp_path, env)
    rng = np.random.default_rng(24)
    plans = [{"kill_after": float(t)} for t in rng.uniform(0.05, 1.1 * full, size=KILLS // 2)]
    plans += [{"kill_after_staging": float(t)} for t in rng.uniform(0.0, 1.2 * writing, size=KILLS - KILLS // 2)]
    outcomes = []
    for i, plan in enumerate(plans):
        out = tmp_path / f"kill{i}"
        shutil.copytree(old, out)
        finished, _, rc = _run_watching(_cmd(kind, src, out, 2), out, env, **plan)
        state, why = result_set_state(out)
        assert state == "complete", (plan, why)
        got = _set_of(out)
        # one whole set: the old one, or the new one (its files are those of the seed-2 run)
        assert got == _set_of(old) or sorted(got) == sorted(_set_of(new)), (plan, sorted(got))
        assert got != _set_of(old) or not finished or rc != 0, plan
        if finished and rc == 0:
            assert got != _set_of(old), plan
        outcomes.append("new" if got != _set_of(old) else "old")
        from analysis.report.result_dirs import load_result_dir

        load_result_dir(out)  # readable as it stands
        # beside it, a killed writer leaves at most its staging folder and its lock file
        left = {p.name.split(".ts2-")[1].split("-")[0] for p in tmp_path.glob(f".kill{i}.*")}
        assert left <= {"new", "lock"}, left
    assert "old" in outcomes, outcomes  # some kills landed before the swap, or little was tested
    # the next writer takes over the dead one's lock and tidies what it left
    last = tmp_path / f"kill{len(plans) - 1}"
    r = subprocess.run(_cmd(kind, src, last, 2), capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(_set_of(last)) == sorted(_set_of(new)) and not list(tmp_path.glob(f".{last.name}.*"))


def _tmpfs(path: Path, size_kib: int) -> bool:
    """Mount a tmpfs of ``size_kib`` at ``path`` (root only); False where that is not allowed."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(path)], capture_output=True)
    return r.returncode == 0


_ENOSPC_AFTER = """
import errno, runpy, sys
from seg_data import result_sets as R
real, n = R.atomic_write_bytes, {"left": int(sys.argv[1])}
def full_disk(path, data):
    n["left"] -= 1
    if n["left"] < 0:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    return real(path, data)
R.atomic_write_bytes = full_disk
sys.argv = ["ts2", *sys.argv[2:]]
runpy.run_module("ts2", run_name="__main__")
"""


@pytest.mark.parametrize("kind", ["analyze", "report", "reproduce", "run"])
def test_a_full_disk_leaves_the_old_set_and_says_so_in_one_line(tmp_path, kind):
    env = _env()
    src = _source(kind, tmp_path)
    old = tmp_path / "old"
    r = subprocess.run(_cmd(kind, src, old, 1), capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    before = _set_of(old)
    # the disk fills up after the 2nd file of the new set (an injected ENOSPC: deterministic)
    args = _cmd(kind, src, old, 2)[3:]
    r = subprocess.run([sys.executable, "-c", _ENOSPC_AFTER, "2", *args], capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 2, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "ENOSPC" in r.stderr or "No space left on device" in r.stderr, r.stderr[-3000:]
    assert result_set_state(old)[0] == "complete" and _set_of(old) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".old")) == []


def test_a_real_full_tmpfs_leaves_the_old_set(tmp_path):
    mnt = tmp_path / "disk"
    if not _tmpfs(mnt, 4096):
        pytest.skip("mounting a tmpfs needs root and mount(8); the injected-ENOSPC tests above cover the logic")
    try:
        env = _env()
        src = _source("report", tmp_path)
        out = mnt / "out"

        def report(seed):  # every figure: a set of about 1.4 MB
            cmd = [sys.executable, "-m", "ts2", "report", f"results=[{src}]", f"output_dir={out}", f"seed={seed}",
                   "bootstrap=20", "chance=0"]
            return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)

        r = report(1)
        assert r.returncode == 0, r.stderr[-3000:]
        before = _set_of(out)
        used = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        # room for the 1 MiB pre-check and a little more, not for a second copy of the set
        free = shutil.disk_usage(mnt).free
        room = (1 << 20) + 128 * 1024
        assert used > room + 128 * 1024, used
        (mnt / "filler").write_bytes(b"\0" * (free - room))
        r = report(2)
        assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
        lines = [ln for ln in r.stderr.splitlines() if "ts2 report:" in ln]
        assert "Traceback" not in r.stderr and len(lines) == 1 and "ENOSPC" in lines[0], r.stderr[-3000:]
        assert result_set_state(out)[0] == "complete" and _set_of(out) == before
        assert sorted(p.name for p in mnt.iterdir()) == ["filler", "out"]  # no staging folder, no lock left
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.parametrize("kind", ["analyze", "report"])
def test_two_writers_at_once_one_refuses_nothing_lost(tmp_path, kind):
    env = _env()
    src = _source(kind, tmp_path)
    out = tmp_path / "out"
    first = subprocess.Popen(_cmd(kind, src, out, 1), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)
    lock = tmp_path / ".out.ts2-lock"
    t0 = time.perf_counter()
    while not (lock.is_file() and lock.stat().st_size) and first.poll() is None and time.perf_counter() - t0 < 60:
        time.sleep(0.002)
    # Freeze the first writer while it holds the lock (a slow run, deterministically), start the
    # second, then let the first go on.
    first.send_signal(signal.SIGSTOP)
    try:
        assert first.poll() is None, "the first writer ended before the second could start"
        second = subprocess.run(_cmd(kind, src, out, 2), capture_output=True, text=True, timeout=300, env=env)
    finally:
        first.send_signal(signal.SIGCONT)
    _, err1 = first.communicate(timeout=600)
    assert first.returncode == 0, err1[-3000:]
    assert second.returncode == 2, second.stderr[-3000:]
    lines = [ln for ln in second.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"expected no other writer, got ts2 {kind} (pid {first.pid}," in lines[0], lines
    assert result_set_state(out)[0] == "complete"  # the first writer's set, whole
    assert not lock.exists()
