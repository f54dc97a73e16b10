"""benchmarks/gpu_all.sh, the one call a session lent a GPU makes (issue 48), stays runnable:
valid bash, every benchmark it names exists and takes the flags it passes, the CUDA tests it
selects exist, and it writes no more files than the device tool brings back (8).
The whole script is dry-run on the CPU with ``TINY=1`` by hand (docs/performance.md)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_all.sh"


def test_script_is_valid_bash():
    r = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _flags(text: str, array: str) -> list[str]:
    """Flags of every assignment of the bash array ``array`` in ``text``."""
    out = []
    for m in re.finditer(rf"{array}=\(([^)]*)\)", text):
        out += [w for w in shlex.split(m.group(1)) if w.startswith("--")]
    return out


@pytest.mark.parametrize("bench, array", [("gpu_scoring.py", "scoring_args"), ("gpu_process.py", "process_args"),
                                          ("chat_vqa_speed.py", "chat_args")])
def test_each_benchmark_takes_the_flags_the_script_passes(bench, array):
    pytest.importorskip("torch")
    text = SCRIPT.read_text()
    assert f"benchmarks/{bench}" in text
    helptext = subprocess.run([sys.executable, str(REPO / "benchmarks" / bench), "--help"], capture_output=True,
                              text=True, timeout=120).stdout
    for flag in [*_flags(text, array), "--json"]:
        assert flag in helptext, f"{bench} has no {flag}"


def test_the_cuda_tests_it_selects_exist():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                        "tests/test_engine_pipeline.py", "tests/test_chat_prefix_cache.py", "-k", "cuda"],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    names = re.findall(r"::(test_cuda\w*)", r.stdout)
    assert {"test_cuda_scores_match_cpu_within_the_fp16_tolerance", "test_cuda_batch_size_invariance",
            "test_cuda_prefix_cache_answers_equal_plain_generate"} <= set(names), r.stdout[-2000:]


def test_it_writes_at_most_the_eight_files_the_device_tool_returns():
    text = SCRIPT.read_text()
    written = set(re.findall(r'\$out/([A-Za-z0-9_.-]+)', text))
    assert written == {"steps.tsv", "all.log", "env.json", "cuda_tests.xml", "gpu_scoring.json", "gpu_process.json",
                       "chat_vqa.json"}
    assert len(written) <= 8
