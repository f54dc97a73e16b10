"""The types of the command-line options, checked once, before any command does any work.

Every key of every primary config that takes a number, a flag or one of a few words is declared
here once (a nested key by its dotted name, ``ranking.alpha``); :func:`check_options` checks a
composed config against the declarations of the keys it has, so ``limit=abc``, ``batch_size=0`` or ``device=gpu`` fail at once with the option
and the expected type named, not after an hour of scoring or with ``invalid literal for int()``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Option", "OPTIONS", "check_options", "OptionError"]


class OptionError(ValueError):
    """An option whose value does not have the declared type or range."""


@dataclass(frozen=True)
class Option:
    """What an option accepts: ``kind`` int | float | bool | choice | choice_list | device | int_or_auto,
    bounds, null (``choice_list``: a list whose every item is one of ``choices``)."""

    kind: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    nullable: bool = False
    min_exclusive: bool = False
    max_exclusive: bool = False

    def describe(self) -> str:
        if self.kind == "choice":
            text = "one of " + ", ".join(self.choices)
        elif self.kind == "choice_list":
            text = "a list of " + ", ".join(self.choices)
        elif self.kind == "device":
            text = "a device: cpu, cuda, cuda:N, mps or auto"
        elif self.kind == "bool":
            text = "true or false"
        else:
            word = {"int": "an integer", "float": "a number", "int_or_auto": "auto or an integer"}[self.kind]
            lo = None if self.min is None else f"{'>' if self.min_exclusive else '>='} {_num(self.min)}"
            hi = None if self.max is None else f"{'<' if self.max_exclusive else '<='} {_num(self.max)}"
            bounds = " and ".join(b for b in (lo, hi) if b)
            text = word + (f" {bounds}" if bounds else "")
        return text + (" (or null)" if self.nullable else "")

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "choice":
            return isinstance(value, str) and value in self.choices
        if self.kind == "choice_list":
            items = [value] if isinstance(value, str) else value
            return isinstance(items, (list, tuple)) and all(isinstance(v, str) and v in self.choices for v in items)
        if self.kind == "device":
            return isinstance(value, str) and _DEVICE.match(value) is not None
        if self.kind == "int_or_auto" and value == "auto":
            return True
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.kind in ("int", "int_or_auto") and not isinstance(value, int):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.min is not None and (value <= self.min if self.min_exclusive else value < self.min):
            return False
        if self.max is not None and (value >= self.max if self.max_exclusive else value > self.max):
            return False
        return True


def _protocol_options() -> dict[str, Option]:
    """``protocol.<field>`` of :class:`analysis.protocols.Protocol`, from its own declarations
    (``OPTION_VALUES`` for the words, the ``bool`` fields), and ``protocols`` (a list of its names)."""
    from dataclasses import fields

    from analysis.protocols import OPTION_VALUES, PROTOCOLS, Protocol

    out = {f"protocol.{k}": Option("choice", choices=tuple(v)) for k, v in OPTION_VALUES.items()}
    out |= {f"protocol.{f.name}": Option("bool") for f in fields(Protocol) if f.type in (bool, "bool")}
    out["protocols"] = Option("choice_list", choices=tuple(PROTOCOLS), nullable=True)
    return out


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


_DEVICE = re.compile(r"^(cpu|auto|mps|cuda(:\d+)?)$")

COUNT = Option("int", min=0)            # 0 allowed (0 = off)
POSITIVE = Option("int", min=1)
FLAG = Option("bool")

OPTIONS: dict[str, Option] = {
    # scoring
    "limit": Option("int", min=1, nullable=True),
    "batch_size": Option("int_or_auto", min=1),  # auto: 32 on the CPU, 256 on CUDA (engine)
    "num_workers": Option("int_or_auto", min=0),
    "max_image_side": Option("int", min=1, nullable=True),
    "max_failure_share": Option("float", min=0, max=1),
    "device": Option("device"),
    "precision": Option("choice", choices=("auto", "fp32", "fp16", "bf16")),  # auto: the engine's policy
    "decode": Option("choice", choices=("pil", "gpu")),
    # statistics
    "bootstrap": COUNT,
    "seed": Option("int", min=0),
    "permutations": POSITIVE,
    "human_permutations": COUNT,
    "confidence": Option("float", min=0, max=1, min_exclusive=True, max_exclusive=True),
    "subsets": Option("choice", choices=("auto", "dataset", "column", "ts2", "none")),
    "ci_method": Option("choice", choices=("bca", "percentile")),
    "bootstrap_scheme": Option("choice", choices=("rescaled", "plain")),
    "heatmaps": COUNT,
    # nested keys are declared by their dotted path
    "ranking.enabled": FLAG,
    "ranking.alpha": Option("float", min=0, max=1, min_exclusive=True, max_exclusive=True),
    # data / questions
    "n_segs": POSITIVE,
    "images_per_node": Option("int", min=1, nullable=True),
    "max_attempts": POSITIVE,
    "max_questions": POSITIVE,
    "chunk_size": POSITIVE,
    "style": Option("choice", choices=("tifa", "dsg")),
    # the options of the protocol group (protocol.tie_method=...) and the protocols list
    **_protocol_options(),
    # flags
    **{k: FLAG for k in ("progress", "cache", "json", "check_images", "measure_flops", "list_metrics", "images",
                         "retry_failed")},
}


def check_options(cfg, command: str) -> None:
    """Check every declared option present in ``cfg`` (a dotted name is a nested key).

    Raises
    ------
    OptionError
        Naming the option, the value given and the expected type, e.g.
        ``ts2 score: limit=abc: expected an integer >= 1 (or null), got 'abc'``.
    """
    from omegaconf import OmegaConf

    absent = object()
    problems = []
    for key, opt in OPTIONS.items():
        try:
            value = OmegaConf.select(cfg, key, default=absent, throw_on_resolution_failure=True)
        except Exception:  # noqa: BLE001 - an interpolation only Hydra's runtime resolves: not ours to check
            continue
        if value is absent:  # not an option of this command (or a mandatory ``???`` left to Hydra)
            continue
        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value, resolve=True)
        if not opt.accepts(value):
            problems.append(f"{key}={value}: expected {opt.describe()}, got {value!r}")
    if problems:
        raise OptionError(f"{command}: " + "; ".join(problems))
