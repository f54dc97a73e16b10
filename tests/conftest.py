"""Shared fixtures. Tests that need ../shared (the released TS2 files) skip when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

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


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Never write to the user's real cache from tests."""
    monkeypatch.setenv("TS2_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ts2-cache"))
