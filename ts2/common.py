"""Helpers shared by the commands (loading the configured dataset, logging setup)."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

log = logging.getLogger("ts2")

# Room a run needs in its output folder besides its tables: Hydra's .hydra/ files, the log, run.json.
MIN_FREE_BYTES = 1 << 20


def load_dataset(cfg: DictConfig, check_images: bool | None = None):
    """The dataset a command works on: ``path=...`` if given, else the ``dataset`` config group."""
    from hydra.utils import instantiate

    from seg_data import load_path

    check = bool(cfg.get("check_images", False)) if check_images is None else check_images
    roots = cfg.get("image_roots")
    if roots is not None and not isinstance(roots, str) and not (
            isinstance(roots, Sequence) and all(isinstance(r, str) for r in roots)):
        raise ValueError(f"expected image_roots to be a folder or a list of folders, got {roots!r}")
    extra = {} if roots is None else {"image_roots": [roots] if isinstance(roots, str) else [str(r) for r in roots]}
    if cfg.get("path"):
        return load_path(cfg.path, check_images=check, **extra)
    from hydra.errors import InstantiationException

    try:
        return instantiate(cfg.dataset, check_images=check, **extra)
    except InstantiationException as e:
        # The loader's own error (a missing file, a cache folder that is a file, ...), not Hydra's
        # wrapper, which ends in "full_key: dataset" and hides the message from the one-line report.
        if e.__cause__ is not None:
            raise e.__cause__ from None
        raise


def as_list(value) -> list[str]:
    """A config value that is one name or a list of names, as a list of strings (None: empty)."""
    from omegaconf import ListConfig

    if value is None:
        return []
    if isinstance(value, (list, tuple, ListConfig)):
        return [str(v) for v in value]
    return [str(value)]


def default_output_dir(command: str) -> Path:
    """The folder ``ts2 COMMAND`` writes into when no ``output_dir`` is given: ``conf/COMMAND.yaml``'s
    ``output_dir`` (the one place it is written), its ``${now:FORMAT}`` filled in as Hydra fills it, for callers
    that compose no config (:mod:`ts2.api`)."""
    import re
    from datetime import datetime
    from importlib.resources import files

    from omegaconf import OmegaConf

    raw = OmegaConf.to_container(OmegaConf.create(files("conf").joinpath(f"{command}.yaml").read_text("utf-8")),
                                 resolve=False)["output_dir"]
    now = datetime.now()
    return Path(re.sub(r"\$\{now:([^}]*)\}", lambda m: now.strftime(m.group(1)), str(raw)))


def check_output_dir(path: str | Path, min_free_bytes: int = MIN_FREE_BYTES) -> Path:
    """Create ``path`` and prove it can take a run's outputs: writable, ``min_free_bytes`` free.

    Called before anything expensive (Hydra's own folder set-up, loading a model), so that a
    read-only or full disk fails in a second with the folder named, not after the work is done.

    Raises
    ------
    OSError
        The folder cannot be created or written, or has less free space than asked.
    """
    p = Path(path).expanduser()
    probe = p / f".ts2-write-test-{os.getpid()}"
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe.write_text("ok")
        free = shutil.disk_usage(p).free
    except OSError as e:
        raise OSError(e.errno, f"expected a writable output_dir, got {p}: {e.strerror or e}") from e
    finally:
        try:
            probe.unlink()
        except OSError:
            pass
    if free < min_free_bytes:
        raise OSError(28, f"expected at least {min_free_bytes / 2**20:.1f} MiB free in output_dir {p}, "
                          f"got {free / 1024:.0f} KiB free; free some space or choose another output_dir")
    return p


def output_dir(cfg: DictConfig) -> Path:
    """Where a command writes: Hydra's runtime folder inside a Hydra job (a multirun gives each
    job its own), else ``cfg.output_dir`` (a handler called directly from Python or a test)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except (ImportError, ValueError):
        return Path(str(cfg.output_dir))
