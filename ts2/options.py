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

__all__ = ["Option", "OPTIONS", "CONFIG_OPTIONS", "check_options", "OptionError"]


class OptionError(ValueError):
    """An option whose value does not have the declared type or range."""


@dataclass(frozen=True)
class Option:
    """What an option accepts: ``kind`` int | float | bool | bool_or_folder | choice | device |
    int_or_auto | names, bounds, null.

    ``names``: a list of names among ``choices`` (or among the keys of the ``"module:attr"``
    mapping ``choices_from``, resolved when checked), each once, at least ``min`` of them; a
    single name stands for a list of one.
    """

    kind: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    nullable: bool = False
    min_exclusive: bool = False
    max_exclusive: bool = False
    choices_from: str | None = None
    cap: bool = False  # ``max`` bounds the work, not the meaning: named only to a value over it
    what: str = "name"  # what a ``names`` option lists, in words

    def names(self) -> tuple[str, ...]:
        """The names a ``names`` option accepts."""
        if self.choices_from is None:
            return self.choices
        from seg_data.resolve import resolve

        return tuple(resolve(self.choices_from))

    def describe(self, value: Any = None) -> str:
        """What the option accepts, in words (a ``cap`` bound only when ``value`` exceeds it)."""
        return _DESCRIBE[self.kind](self, value) + (" (or null)" if self.nullable else "")

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is of the option's kind and within its bounds (``None`` only when nullable)."""
        if value is None:
            return self.nullable
        return _ACCEPTS[self.kind](self, value)

    def within_bounds(self, value: float) -> bool:
        """Whether a number lies within ``min`` and ``max`` (each inclusive unless declared exclusive)."""
        if self.min is not None and (value <= self.min if self.min_exclusive else value < self.min):
            return False
        return self.max is None or (value < self.max if self.max_exclusive else value <= self.max)

    def bounds_text(self, value: Any = None) -> str:
        """The bounds in words, ``>= 1 and <= 10``; a ``cap`` is named only to a value over it."""
        lo = None if self.min is None else f"{'>' if self.min_exclusive else '>='} {_num(self.min)}"
        hi = None
        if self.max is not None and (not self.cap or _exceeds(value, self.max)):
            hi = f"{'<' if self.max_exclusive else '<='} {_num(self.max)}"
        return " and ".join(b for b in (lo, hi) if b)


def _is_number(value: Any) -> bool:
    """A real number as a config gives it: an int or a float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _exceeds(value: Any, bound: float) -> bool:
    """Whether ``value`` is a number over ``bound`` (what makes a ``cap`` worth naming)."""
    return _is_number(value) and value > bound


def _accepts_number(opt: Option, value: Any) -> bool:
    """An ``int``/``float``/``int_or_auto`` value: a finite number of the kind (``auto`` for
    ``int_or_auto``), within the bounds."""
    if opt.kind == "int_or_auto" and value == "auto":
        return True
    if not _is_number(value):
        return False
    if opt.kind in ("int", "int_or_auto") and not isinstance(value, int):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return opt.within_bounds(value)


def _accepts_names(opt: Option, value: Any) -> bool:
    """A ``names`` value: a name or a list of names among the option's, each once, at least ``min``."""
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, (list, tuple)) or any(not isinstance(v, str) for v in value):
        return False
    ok = set(opt.names())
    return (all(v in ok for v in value) and len(set(value)) == len(value)
            and (opt.min is None or len(value) >= opt.min))


def _describe_number(opt: Option, value: Any) -> str:
    word = {"int": "an integer", "float": "a number", "int_or_auto": "auto or an integer"}[opt.kind]
    bounds = opt.bounds_text(value)
    return word + (f" {bounds}" if bounds else "")


def _describe_names(opt: Option, value: Any) -> str:
    least = "" if not opt.min else f" of at least {_num(opt.min)}"
    return f"a {opt.what} among {list(opt.names())} (a list{least}, each name once)"


# One entry per ``Option.kind``: what a value of that kind must be, and how to say so.
_ACCEPTS = {
    "bool": lambda opt, v: isinstance(v, bool),
    "bool_or_folder": lambda opt, v: isinstance(v, bool) or (isinstance(v, str) and bool(v.strip())),
    "choice": lambda opt, v: isinstance(v, str) and v in opt.names(),
    "device": lambda opt, v: isinstance(v, str) and _DEVICE.match(v) is not None,
    "names": _accepts_names,
    "int": _accepts_number,
    "float": _accepts_number,
    "int_or_auto": _accepts_number,
}
_DESCRIBE = {
    "bool": lambda opt, v: "true or false",
    "bool_or_folder": lambda opt, v: "true, false or a folder",
    "choice": lambda opt, v: "one of " + ", ".join(opt.names()),
    "device": lambda opt, v: "a device: cpu, cuda, cuda:N, mps or auto",
    "names": _describe_names,
    "int": _describe_number,
    "float": _describe_number,
    "int_or_auto": _describe_number,
}


def _protocol_options() -> dict[str, Option]:
    """``protocol.<field>`` of :class:`analysis.protocols.Protocol`, from its own declarations
    (``OPTION_VALUES`` for the words, the ``bool`` fields), and ``protocols`` (a list of its names)."""
    from dataclasses import fields

    from analysis.protocols import OPTION_VALUES, PROTOCOLS, Protocol

    out = {f"protocol.{k}": Option("choice", choices=tuple(v)) for k, v in OPTION_VALUES.items()}
    out |= {f"protocol.{f.name}": Option("bool") for f in fields(Protocol) if f.type in (bool, "bool")}
    out["protocols"] = Option("names", min=1, choices=tuple(PROTOCOLS), nullable=True, what="protocol")
    return out


def _show(value: Any) -> str:
    """A value as the user wrote it: lists as ``[a, b]``, everything else as ``repr``."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return repr(value)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


_DEVICE = re.compile(r"^(cpu|auto|mps|cuda(:\d+)?)$")

COUNT = Option("int", min=0)            # 0 allowed (0 = off)
POSITIVE = Option("int", min=1)
FLAG = Option("bool")
# Upper bounds of the options that scale work (docs/cli.md). bootstrap: also what fits in
# memory for the table at hand (analysis.stats.check_bootstrap_size, checked by ts2/config_check.py).
MAX_BOOTSTRAP = 100_000        # = analysis.stats.MAX_BOOTSTRAP (checked by tests/test_issue24_options.py)
MAX_CHANCE = 10_000            # within-SEG permutations: each one is a whole analysis (100x the default)
MAX_PERMUTATIONS = 1_000_000   # sign flips of a p-value (100x the default 9999)
MAX_SYNTHETIC_SEGS = 100_000   # ts2 data make-synthetic n_segs
META_METRIC_NAMES = "analysis.metametrics:META_METRICS"

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
    "bootstrap": Option("int", min=0, max=MAX_BOOTSTRAP, cap=True),
    "chance": Option("int", min=0, max=MAX_CHANCE, cap=True),
    "min_segs_ci": Option("int", min=0),
    "seed": Option("int", min=0),
    "permutations": Option("int", min=1, max=MAX_PERMUTATIONS, cap=True),
    "human_permutations": Option("int", min=0, max=MAX_PERMUTATIONS, cap=True),
    "meta_metrics": Option("names", min=1, choices_from=META_METRIC_NAMES, what="meta-metric"),
    "table_meta_metrics": Option("names", choices_from=META_METRIC_NAMES, what="meta-metric"),
    "ranking.meta_metrics": Option("names", choices_from=META_METRIC_NAMES, what="meta-metric"),
    "confidence": Option("float", min=0, max=1, min_exclusive=True, max_exclusive=True),
    "subsets": Option("choice", choices=("auto", "dataset", "column", "ts2", "none")),
    "ci_method": Option("choice", choices=("bca", "percentile")),
    "bootstrap_scheme": Option("choice", choices=("rescaled", "plain")),
    "heatmaps": Option("int", min=0, max=100, cap=True),
    "thumbnail_size": Option("int", min=16, max=1024, cap=True),  # the explorer's thumbnails (pixels)
    # nested keys are declared by their dotted path
    "ranking.enabled": FLAG,
    "ranking.alpha": Option("float", min=0, max=1, min_exclusive=True, max_exclusive=True),
    "human_clusters.alpha": Option("float", min=0, max=1, min_exclusive=True, max_exclusive=True),
    "human_clusters.statistics": Option("names", choices_from="analysis.human.correlation:STATISTICS",
                                        what="statistic"),
    # data / questions
    "n_segs": Option("int", min=1, max=MAX_SYNTHETIC_SEGS, cap=True),
    "images_per_node": Option("int", min=1, nullable=True),
    "max_attempts": POSITIVE,
    "max_questions": POSITIVE,
    "chunk_size": POSITIVE,
    "style": Option("choice", choices=("tifa", "dsg")),
    # data from-labels (seg_data.labels); its `images=DIR` is declared in CONFIG_OPTIONS
    "format": Option("choice", choices_from="seg_data.labels:FORMATS"),
    "fail_below": Option("float", min=0, max=1, min_exclusive=True),
    "min_raters": POSITIVE,
    "subset_by": Option("choice", choices_from="seg_data.labels.build:SUBSET_BY"),
    "group_by": Option("choice", choices_from="seg_data.labels.build:GROUP_BY"),
    # the options of the protocol group (protocol.tie_method=...) and the protocols list
    **_protocol_options(),
    # flags
    **{k: FLAG for k in ("progress", "cache", "json", "check_images", "measure_flops", "list_metrics",
                         "retry_failed", "explorer", "rehash", "images", "store")},
}

# Declarations one primary config makes differently: `ts2 data` takes `images` as make-synthetic's
# flag or from-labels' folder; every other command's `images` stays a flag.
CONFIG_OPTIONS: dict[str, dict[str, Option]] = {"data": {"images": Option("bool_or_folder")}}


def check_options(cfg, command: str, config: str | None = None) -> None:
    """Check every declared option present in ``cfg`` (a dotted name is a nested key), with the
    declarations of :data:`CONFIG_OPTIONS` for the primary ``config`` taking precedence.

    Raises
    ------
    OptionError
        Naming the option, the value given and the expected type, e.g.
        ``ts2 score: limit=abc: expected an integer >= 1 (or null), got 'abc'``.
    """
    from omegaconf import OmegaConf

    absent = object()
    problems = []
    for key, opt in {**OPTIONS, **CONFIG_OPTIONS.get(config or "", {})}.items():
        try:
            value = OmegaConf.select(cfg, key, default=absent, throw_on_resolution_failure=True)
        except Exception:  # noqa: BLE001 - an interpolation only Hydra's runtime resolves: not ours to check
            continue
        if value is absent:  # not an option of this command (or a mandatory ``???`` left to Hydra)
            continue
        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value, resolve=True)
        written = _show(value) if isinstance(value, list) else value
        if not opt.accepts(value):
            problems.append(f"{key}={written}: expected {opt.describe(value)}, got {_show(value)}")
    if problems:
        raise OptionError(f"{command}: " + "; ".join(problems))
