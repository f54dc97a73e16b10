"""Shared fixtures. Tests that need ../shared (the released TS2 files) skip when it is absent.

Every cache and download of the test session goes to one temporary folder, set here before any
test module imports a library that reads these variables at import time (huggingface_hub reads
``HF_HOME`` then): the score cache (``TS2_CACHE_DIR``), assembled models (``TS2_MODELS_DIR``),
the Hugging Face, torch, pip and XDG caches, matplotlib's config. Nothing lands in ``$HOME``; the
folder is removed when the session ends. The hub is off (``HF_HUB_OFFLINE=1``): tests use tiny
local models and the packaged ones.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

ISOLATED_ENV: dict[str, Path] = {}


def pytest_configure(config) -> None:
    # In the pytest process only (not in worker processes that happen to import this module),
    # before collection imports the test modules.
    tmp = Path(tempfile.mkdtemp(prefix="ts2-tests-"))
    config._ts2_tmp = tmp
    ISOLATED_ENV.update({
        "TS2_CACHE_DIR": tmp / "ts2-cache",
        "TS2_MODELS_DIR": tmp / "ts2-models",
        "HF_HOME": tmp / "hf",
        "XDG_CACHE_HOME": tmp / "xdg-cache",
        "TORCH_HOME": tmp / "torch",
        "PIP_CACHE_DIR": tmp / "pip",
        "MPLCONFIGDIR": tmp / "matplotlib",
    })
    for key, value in ISOLATED_ENV.items():
        os.environ[key] = str(value)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.pop("TRANSFORMERS_CACHE", None)
    # The analysis store keeps nothing unless a test turns it on: its keys hold the analysis code's
    # source, not a test's monkeypatches, so a patched kernel's results must not reach other tests.
    os.environ["TS2_ANALYSIS_STORE_MAX_MB"] = "0"


def pytest_unconfigure(config) -> None:
    tmp = getattr(config, "_ts2_tmp", None)
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)


REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def shared_path(*parts: str) -> Path:
    """Path under ../shared, or skip the test with the reason when it is not there."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"needs {p} (the ../shared folder beside the repo, present on the developers' machines and CI)")
    return p


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return shared_path()


@pytest.fixture(scope="session")
def ts2_dir() -> Path:
    return shared_path("ts2")


@pytest.fixture(scope="session")
def original():
    """``original(dist)``: the unpacked wheel of an original authors' package (``t2v-metrics``,
    ``hpsv2``, ``image-reward``; versions pinned in ``originals.PINS``), fetched once per session
    with ``pip download --no-deps`` into ``$TS2_ORIGINALS_DIR`` (default: the session's temporary
    folder); the test skips, saying why, when it cannot be downloaded (no network)."""
    import originals

    root = Path(os.environ.get("TS2_ORIGINALS_DIR") or (ISOLATED_ENV["TS2_MODELS_DIR"].parent / "originals"))

    def get(dist: str) -> Path:
        try:
            return originals.fetch(dist, root)
        except originals.OriginalUnavailable as e:
            pytest.skip(f"needs the original {dist} package from PyPI to compare with: {e}")

    return get


@pytest.fixture(autouse=True)
def _isolated_cache(monkeypatch):
    """Never write to the user's real cache from tests (also when a test changed the variables)."""
    for key, value in ISOLATED_ENV.items():
        monkeypatch.setenv(key, str(value))
    monkeypatch.setenv("TS2_ANALYSIS_STORE_MAX_MB", "0")
