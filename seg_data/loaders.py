"""One entry point to load a dataset from a path, whatever its format."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .model import SEGDataset
from .seg_format import load_seg_file
from .ts2_release import load_ts2_release

__all__ = ["load_path"]

_SEG_SUFFIXES = {".yaml", ".yml", ".json"}


def load_path(path: str | Path, check_images: bool = False, validate: bool = True,
              image_roots: Sequence[str | Path] | None = None) -> SEGDataset:
    """Load a TS2 release folder / ``metadata.csv``, or one of our ``.yaml``/``.json`` SEG files.

    A folder holding ``dataset.yaml`` (what ``ts2 data make-synthetic`` writes) loads that file.
    Image paths must stay under ``image_roots`` (default: the dataset's folder; :mod:`seg_data.paths`).
    """
    p = Path(path)
    if p.is_dir():
        for name in ("metadata.csv", "dataset.yaml", "dataset.yml", "dataset.json"):
            if (p / name).is_file():
                p = p / name
                break
        else:
            raise FileNotFoundError(f"{p}: expected metadata.csv (TS2 release) or dataset.yaml/json, found neither")
    if not p.exists():
        raise FileNotFoundError(f"no dataset at {p}")
    if p.suffix.lower() in _SEG_SUFFIXES:
        return load_seg_file(p, check_images=check_images, validate=validate, image_roots=image_roots)
    if p.suffix.lower() == ".csv":
        return load_ts2_release(p, check_images=check_images, validate=validate, image_roots=image_roots)
    raise ValueError(f"{p}: expected a .csv (TS2 release) or .yaml/.yml/.json (ts2-seg) file, got {p.suffix!r}")
