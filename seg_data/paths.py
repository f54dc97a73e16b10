"""Where a dataset may point for its images: an allow-list of image roots.

A third-party dataset file is untrusted: an image path like ``../../home/me/private.jpg`` or
``/etc/passwd`` would make ts2 read (and an API judge upload) a file the dataset's author chose.
Every image path of a dataset is therefore resolved against the dataset's folder and must lie
under one of the *image roots*: the dataset's own folder, plus any folder allowed with
``image_roots=[DIR, ...]`` (loaders, and the same option on the command line; relative folders
are taken from the dataset's folder).

The check is lexical (``..`` segments are folded, no file is opened), so it is cheap at 100k
images; a symbolic link inside a root that points elsewhere is the scorer's business (it reads
only regular files).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ImageRoots", "UnsafePathError", "cache_root", "check_cache_folder"]


class UnsafePathError(ValueError):
    """An image path outside every allowed image root."""


class ImageRoots:
    """The allowed image roots of one dataset: ``base`` (the dataset folder) plus ``roots``.

    Examples
    --------
    >>> r = ImageRoots("/data/set")
    >>> str(r.resolve("images/a.png", "row 2"))
    '/data/set/images/a.png'
    >>> r.resolve("../other/b.png", "row 3")
    Traceback (most recent call last):
    ...
    seg_data.paths.UnsafePathError: row 3: expected an image path under the image roots ['/data/set'], got '../other/b.png' (-> /data/other/b.png); pass image_roots=[...] to allow another folder
    """

    def __init__(self, base: str | Path, roots: Sequence[str | Path] | None = None) -> None:
        self.base = Path(os.path.abspath(base))
        extra = [] if roots is None else [roots] if isinstance(roots, (str, Path)) else list(roots)
        self.roots = (self.base, *(Path(os.path.abspath(self.base / Path(r).expanduser())) for r in extra))
        self._prefixes = tuple(str(r).rstrip(os.sep) + os.sep for r in self.roots)
        self._dirs: dict[str, Path] = {}  # folder -> its Path: images share few folders

    def resolve(self, path: str | Path, where: str = "") -> Path:
        """``path`` (relative to the dataset folder, or absolute) made absolute and checked."""
        text = str(path)
        if "\x00" in text:
            raise UnsafePathError(f"{where}: expected an image path, got one with a NUL byte: {text!r:.80}")
        full = os.path.normpath(os.path.join(self.base, text))
        if not (full + os.sep).startswith(self._prefixes):
            raise UnsafePathError(f"{where}: expected an image path under the image roots "
                                  f"{[str(r) for r in self.roots]}, got {text!r} (-> {full}); pass image_roots=[...] to "
                                  "allow another folder")
        # Path(full) parses every part again (most of the time of a 100k-image load); a cached
        # folder joined with the file name gives the same Path three times faster. POSIX only: a
        # Windows folder like "C:" would make a drive-relative path.
        folder, _, name = full.rpartition(os.sep)
        if os.sep != "/" or not name:
            return Path(full)
        parent = self._dirs.get(folder)
        if parent is None:
            parent = self._dirs[folder] = Path(folder or os.sep)
        return parent / name


def cache_root() -> Path:
    """Where ts2 keeps what it can rebuild (the generated mini set, the score and QA caches):
    ``$TS2_CACHE_DIR``, else ``$XDG_CACHE_HOME/ts2``, else ``~/.cache/ts2``. The one definition."""
    if os.environ.get("TS2_CACHE_DIR"):
        return Path(os.environ["TS2_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ts2"


def check_cache_folder(folder: str | Path) -> Path:
    """``folder`` when it is a folder or does not exist yet.

    Raises
    ------
    NotADirectoryError
        It exists and is not a folder (``TS2_CACHE_DIR`` pointing at a file): one message for
        every cache (the mini set, the score cache, the QA cache).
    """
    import errno

    p = Path(folder)
    if p.exists() and not p.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"expected a folder for ts2's caches at {p} (TS2_CACHE_DIR, "
                                 "cache_dir=), got a file; point it at a folder", str(p))
    return p
