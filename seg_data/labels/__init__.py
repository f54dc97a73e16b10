"""SEGs from fine-grained human labels: which prompt elements each image gets wrong.

Formats (one registry, :data:`FORMATS`): ``evalmuse`` (EvalMuse-40K's ``train_list.json``,
:mod:`.evalmuse`) and ``csv`` (one row per rating, :mod:`.label_csv`, which any other labelled
set converts into). :func:`from_labels` reads a file, builds the SEGs by the rule of
:mod:`.build` and writes a folder in ts2's explicit-edge format (``dataset.yaml``, an
``images`` link to the images folder, ``build.json``), so ``path=OUT`` works with every command.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..model import SEGDataset
from .build import BuildSummary, LabelSettings, build_segs, covering_edges, node_names
from .evalmuse import download_evalmuse, read_evalmuse
from .label_csv import read_label_csv
from .records import LabelFormatError, LabelRecord, element_category

__all__ = ["FORMATS", "LabelFormat", "LabelRecord", "LabelFormatError", "LabelSettings", "BuildSummary",
           "read_labels", "build_segs", "from_labels", "node_names", "covering_edges", "element_category"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LabelFormat:
    """A label file format: its reader, and its hub download where the set lives on the hub."""

    read: Callable[[Path], list[LabelRecord]]
    description: str
    download: Callable[[], Path] | None = None


FORMATS: dict[str, LabelFormat] = {
    "evalmuse": LabelFormat(read_evalmuse, "EvalMuse-40K train_list.json (DY-Evalab/EvalMuse)", download_evalmuse),
    "csv": LabelFormat(read_label_csv, "one row per rating: prompt,image,element,rater,label[,category][,generator]"),
}


def _format(name: str) -> LabelFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"expected a label format among {sorted(FORMATS)}, got {name!r}") from None


def read_labels(format: str, labels: str | Path | None = None) -> tuple[list[LabelRecord], Path]:
    """Records of a label file in ``format``; with ``labels=None``, the set's file from the hub.

    Raises
    ------
    ValueError
        Unknown format, or ``labels=None`` for a format that has no hub copy.
    LabelFormatError, FileNotFoundError, RuntimeError
        A malformed file (the record named); no file; the hub unreachable (offline hint).
    """
    fmt = _format(format)
    if labels is None:
        if fmt.download is None:
            raise ValueError(f"format {format!r}: expected labels=FILE (this format has no hub copy), got none")
        labels = fmt.download()
    path = Path(labels)
    return fmt.read(path), path


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"expected out={out} to be a new or empty folder, got an existing "
                              f"{'folder with files' if out.is_dir() else 'file'}: choose another out")


def from_labels(format: str, labels: str | Path | None, out: str | Path, images: str | Path | None = None,
                settings: LabelSettings | None = None, name: str | None = None) -> tuple[SEGDataset, BuildSummary]:
    """Read labels, build SEGs and write them as a ts2 dataset folder ``out``.

    ``out`` gets ``dataset.yaml`` (ts2-seg/1; image paths ``images/<image>``), a symbolic link
    ``images`` to the ``images`` folder (when given) and ``build.json`` (the summary and settings).
    Everything is read, checked and built before anything is written; the folder is written
    beside ``out`` and renamed into place, so a failure leaves no half-written ``out``.

    Raises
    ------
    FileExistsError
        ``out`` exists and is not an empty folder.
    LabelFormatError, ValueError, FileNotFoundError, RuntimeError
        See :func:`read_labels` and :func:`seg_data.labels.build.build_segs`.
    """
    from ..seg_format import save_seg_file

    out = Path(out).absolute()
    _check_out(out)
    if images is not None and not Path(images).is_dir():
        raise FileNotFoundError(f"expected images={images} to be the folder the label file's image paths are "
                                "relative to, found no such folder")
    records, path = read_labels(format, labels)
    # resolved, so that the image paths under it are written relative to the dataset file
    tmp = out.parent.resolve() / f".{out.name}.ts2-building-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    ds, summary = build_segs(records, settings, images_dir=None if images is None else tmp / "images",
                             name=name or out.name, source=format)
    ds.metadata["labels"] = str(path)
    try:
        tmp.mkdir(parents=True)
        if images is not None:
            (tmp / "images").symlink_to(Path(images).resolve(), target_is_directory=True)
        save_seg_file(ds, tmp / "dataset.yaml")
        (tmp / "build.json").write_text(json.dumps({"format": format, "labels": str(path), **summary.to_dict()},
                                                   indent=1) + "\n", encoding="utf-8")
        if out.is_dir():
            out.rmdir()  # empty (checked above); rename cannot replace a folder
        out.parent.mkdir(parents=True, exist_ok=True)
        os.rename(tmp, out)  # atomic: out appears complete or not at all
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for line in summary.lines():  # the command line prints these; a notebook has summary.lines()
        log.debug("%s", line)
    return ds, summary
