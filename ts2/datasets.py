"""The named datasets (the ``dataset`` config group, ``conf/dataset/*.yaml``), loaded without Hydra.

Each file of the group names a loader (``_target_``, a function of :mod:`seg_data`) and its
arguments with their defaults. The command line composes the group (``dataset=mini
dataset.n_segs=10``) and calls the loader; the Python API (:func:`ts2.load_dataset`) and
``ts2 explore`` (a ``run.json``'s recorded dataset) read the same files as plain YAML and call the
same loader with the same arguments: one definition of every named dataset, no config composed,
nothing instantiated from a file but these loaders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["DatasetSpec", "dataset_specs", "load_named", "load_source"]


@dataclass(frozen=True)
class DatasetSpec:
    """One named dataset: its loader (``module.function``) and its arguments' defaults (``???``: required)."""

    name: str
    target: str
    defaults: Mapping[str, Any]

    def call(self, check_images: bool = False, image_roots: Sequence[str] | None = None, **options: Any):
        """The loader called with the defaults, ``options`` over them, and the common arguments.

        Raises
        ------
        TypeError
            An option the dataset does not take (the valid ones named).
        ValueError
            A required argument (``???`` in its file) not given.
        """
        from seg_data.resolve import resolve
        from ts2.names import did_you_mean

        for key in options:
            if key not in self.defaults:
                hint = did_you_mean(key, self.defaults, n=1)
                raise TypeError(f"unknown option {key!r} of dataset {self.name!r}{hint} (expected one of "
                                f"{sorted(self.defaults)})")
        args = {**self.defaults, **options}
        missing = [k for k, v in args.items() if v == "???"]
        if missing:
            raise ValueError(f"expected a value for {missing[0]!r} of dataset {self.name!r}, got none")
        extra = {} if image_roots is None else {"image_roots": [str(r) for r in image_roots]}
        module, _, function = self.target.rpartition(".")
        return resolve(f"{module}:{function}")(**args, check_images=check_images, **extra)


@lru_cache(maxsize=1)
def dataset_specs() -> dict[str, DatasetSpec]:
    """Name -> :class:`DatasetSpec` of every file of ``conf/dataset/`` (read as YAML, not composed)."""
    from importlib.resources import files

    import yaml

    out = {}
    for f in sorted(files("conf").joinpath("dataset").iterdir(), key=lambda x: x.name):
        if f.name.endswith(".yaml"):
            spec = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
            name = f.name[: -len(".yaml")]
            out[name] = DatasetSpec(name, str(spec["_target_"]), {k: v for k, v in spec.items() if k != "_target_"})
    return out


def load_named(name: str, check_images: bool = False, image_roots: Sequence[str] | None = None, **options: Any):
    """The dataset ``name`` of the config group with ``options`` (``ts2 ... dataset=NAME dataset.KEY=VALUE``).

    Raises
    ------
    KeyError
        An unknown name (the valid ones listed).
    """
    specs = dataset_specs()
    if name not in specs:
        raise KeyError(f"unknown dataset {name!r}; expected one of {sorted(specs)} or a path")
    return specs[name].call(check_images=check_images, image_roots=image_roots, **options)


def load_source(source: str | Path, check_images: bool = False, image_roots: Sequence[str] | None = None,
                **options: Any):
    """A dataset by name (``mini``, ``ts2``, ...) or by path (a TS2 release folder or ``metadata.csv``,
    a ts2-seg ``.yaml``/``.json`` file or a folder holding one): what ``dataset=`` and ``path=`` take.

    Raises
    ------
    FileNotFoundError
        Neither a name nor an existing path.
    ValueError
        Options given with a path (they belong to a named dataset).
    """
    from seg_data import load_path

    text = str(source)
    if isinstance(source, str) and text in dataset_specs() and not Path(text).exists():
        return load_named(text, check_images=check_images, image_roots=image_roots, **options)
    if options:
        raise ValueError(f"expected dataset options only with a dataset name ({', '.join(sorted(dataset_specs()))}), "
                         f"got {sorted(options)} with the path {text!r}")
    p = Path(text).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"expected a dataset name ({', '.join(sorted(dataset_specs()))}) or an existing "
                                f"dataset file or folder, got {text!r}")
    extra = {} if image_roots is None else {"image_roots": [str(r) for r in image_roots]}
    return load_path(p, check_images=check_images, **extra)
