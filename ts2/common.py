"""Helpers shared by the commands (loading the configured dataset, logging setup)."""

from __future__ import annotations

import logging

from omegaconf import DictConfig

log = logging.getLogger("ts2")


def load_dataset(cfg: DictConfig, check_images: bool | None = None):
    """The dataset a command works on: ``path=...`` if given, else the ``dataset`` config group."""
    from hydra.utils import instantiate

    from seg_data import load_path

    check = bool(cfg.get("check_images", False)) if check_images is None else check_images
    if cfg.get("path"):
        return load_path(cfg.path, check_images=check)
    return instantiate(cfg.dataset, check_images=check)
