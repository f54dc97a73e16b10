"""Checking a command line before Hydra runs it: typo'd keys, keys nobody reads, option types,
an output folder that cannot be written.

:func:`precheck` composes the command's config with the given overrides (Hydra's compose API,
the same composition ``hydra.main`` does next) and turns every problem into one
:class:`ConfigError` line, e.g. ``unknown key 'protocl' for ts2 analyze; did you mean
'protocol'?``, before any folder is created or any model is loaded.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from importlib.resources import files
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ts2.names import did_you_mean as _did_you_mean
from ts2.options import OptionError, check_options

__all__ = ["ConfigError", "precheck", "split_args", "config_keys", "compose_config", "group_options"]

# Hydra's own flags, and those that take a value.
_FLAGS_WITH_VALUE = {"--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn",
                     "--config-dir", "-cd", "--experimental-rerun", "--info"}
# Maps whose entries are added by users (`+metrics.NAME={...}`, `+labels.x=...`).
OPEN_MAPS = {"metrics", "labels", "flops"}


class ConfigError(ValueError):
    """A command line that cannot run as written (the message is one line for the user)."""


def split_args(args: list[str]) -> tuple[list[str], list[str]]:
    """``(hydra_flags, overrides)``: Hydra's ``-m``/``--cfg job``/... apart from ``key=value`` items."""
    flags, overrides = [], []
    it = iter(args)
    for a in it:
        if a.startswith("-") and not a.startswith("--") and len(a) > 2 and "=" in a:
            overrides.append(a)  # not a flag: a negative value is never a whole argument
        elif a.startswith("-"):
            flags.append(a)
            if a in _FLAGS_WITH_VALUE and a != "--info":
                flags.append(next(it, ""))
        else:
            overrides.append(a)
    return flags, overrides


def group_options(group: str) -> list[str]:
    """Config names of a group folder in ``conf/`` (``metric`` -> ``["alignscore", ...]``)."""
    root = files("conf").joinpath(*group.split("/"))
    try:
        return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))
    except (FileNotFoundError, NotADirectoryError, OSError):
        return []


def _is_group(name: str) -> bool:
    return name.startswith("hydra/") or bool(group_options(name))


def config_keys(cfg, prefix: str = "") -> list[str]:
    """Every dotted key of ``cfg`` (nested mappings included, ``hydra`` left out)."""
    out = []
    for k in cfg.keys() if isinstance(cfg, DictConfig) else ():
        if not prefix and k == "hydra":
            continue
        path = f"{prefix}{k}"
        out.append(path)
        node = cfg._get_node(k)
        if isinstance(node, DictConfig) and not node._is_missing() and not node._is_none():
            out.extend(config_keys(node, path + "."))
    return out


def _first_of_sweeps(overrides: list[str]) -> list[str]:
    """A multirun's overrides with each sweep ``a=1,2`` replaced by its first value (for checking)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    out = []
    for o in overrides:
        try:
            ov = parser.parse_override(o)
            if ov.is_sweep_override():
                first = next(iter(ov.sweep_string_iterator()))
                o = o.split("=", 1)[0] + "=" + first
        except Exception:  # noqa: BLE001 - left for Hydra itself to report
            pass
        out.append(o)
    return out


def compose_config(config_name: str, overrides: list[str]):
    """The config Hydra would compose (with its ``hydra`` node), through the compose API."""
    from hydra import compose, initialize_config_module

    with initialize_config_module("conf", version_base="1.3"):
        return compose(config_name, overrides=overrides, return_hydra_config=True)


def _unknown_key(prog: str, key: str, config_name: str, others: list[str]) -> ConfigError:
    try:
        base = compose_config(config_name, others)
        keys = config_keys(base) + list(base.hydra.runtime.choices.keys())
    except Exception:  # noqa: BLE001 - the other overrides are broken too; Hydra reports those
        keys = []
    # Compare like with like: the full dotted path, and the last part against the siblings' names.
    hint = _did_you_mean(key, keys)
    if not hint and "." in key:
        parent, _, leaf = key.rpartition(".")
        hint = _did_you_mean(leaf, [k.rpartition(".")[2] for k in keys if k.rpartition(".")[0] == parent])
        hint = hint.replace("'", f"'{parent}.", 1) if hint else ""
    return ConfigError(f"unknown key {key!r} for {prog}{hint or f'; see `{prog} --help` for its keys'}"
                       f"{_key_elsewhere(key, config_name, prog)}")


def _key_elsewhere(key: str, config_name: str, prog: str) -> str:
    """``"; KEY is a key of ts2 OTHER, which PROG does not use"`` for a key another command reads
    (``ts2 report compare=[a,b]``: the paired comparison is ``ts2 analyze``'s), else ``""``."""
    from ts2.commands.table import COMMANDS

    top = key.split(".")[0]
    for name, cmd in COMMANDS.items():
        if not cmd.config or cmd.config == config_name:
            continue
        try:
            keys = config_keys(compose_config(cmd.config, []))
        except Exception:  # noqa: BLE001 - a config that needs arguments to compose: not a place to look
            continue
        if key in keys or top in keys:
            return f"; {key!r} is a key of ts2 {name}, which {prog} does not use"
    return ""


def _hydra_message(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return " ".join(lines[:6])


def _shell_quoted(key: str, value: str) -> str:
    """``key=value`` as one shell word with the value quoted for Hydra: ``'title="My report"'``."""
    inner = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    word = f"{key}={inner}"
    return "'" + word.replace("'", "'\\''") + "'"


def _parse_hint(prog: str, overrides: list[str]) -> str | None:
    """One line for an override Hydra's grammar rejects, with the quoting that makes it parse.

    A value with spaces, non-ASCII letters or characters such as ``()`` must be quoted for Hydra
    (``output_dir=résultats`` fails with ``LexerNoViableAltException``); a word with no ``=``
    right after ``key=value`` is the rest of a value the shell split at a space.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for i, o in enumerate(overrides):
        try:
            parser.parse_override(o)
            continue
        except Exception:  # noqa: BLE001 - this is the override we explain
            pass
        key, sep, value = o.partition("=")
        if sep and key and value and value[0] not in "[{=" and (any(c.isspace() or not c.isascii() for c in value)
                                                               or any(c in "()" for c in value)):
            return (f"{prog}: cannot parse the override {o!r}: a value with spaces, non-ASCII letters or "
                    f"characters such as ()[]{{}},:'\" must be quoted; write {_shell_quoted(key, value)}")
        if not sep and i > 0 and "=" in overrides[i - 1]:
            k, _, v = overrides[i - 1].partition("=")
            return (f"{prog}: expected key=value, got {o!r} (the shell split a value at a space?); quote the whole "
                    f"value: {_shell_quoted(k, f'{v} {o}')}")
        return None  # Hydra's own message says what is wrong with this one
    return None


def _check_interpolations(prog: str, cfg) -> None:
    """Every ``${...}`` of the command's keys (and of its run folder) resolves: an unset
    ``${oc.env:VAR}`` is one line naming the key and the variable, before any folder is made.

    Interpolations only Hydra's runtime resolves (``${hydra:...}``, ``${hydra.job.num}``) are left
    to it.
    """
    from omegaconf.errors import OmegaConfBaseException

    for key in [*config_keys(cfg), "hydra.run.dir", "hydra.sweep.dir"]:
        parent, _, leaf = key.rpartition(".")
        try:
            node = (OmegaConf.select(cfg, parent) if parent else cfg)._get_node(leaf)
        except Exception:  # noqa: BLE001 - a parent that is itself an interpolation: checked as its own key
            continue
        if node is None or not node._is_interpolation():
            continue
        raw = str(node._value())
        if "hydra:" in raw or "hydra." in raw:
            continue
        try:
            OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
        except OmegaConfBaseException as e:
            reason = str(e).splitlines()[0]
            reason = reason.replace("KeyError raised while resolving interpolation: ", "").strip('"')
            if "HydraConfig" in reason:
                continue
            shown = key if not key.startswith("hydra.") else f"{key} (from output_dir)"
            raise ConfigError(f"{prog}: {shown}={raw}: cannot resolve the interpolation: {reason}; set it or pass "
                              f"{key.removeprefix('hydra.run.')}=VALUE") from e


def _check_additions(prog: str, config_name: str, cfg, overrides: list[str]) -> None:
    """``+key=value`` / ``++key=value`` that adds a key nothing reads (not a group, not an argument
    of an instantiated object, not an entry of an open map such as ``metrics``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    base_keys = None
    for o in overrides:
        if not o.startswith("+"):
            continue
        try:
            ov = parser.parse_override(o)
        except Exception:  # noqa: BLE001 - Hydra reports unparsable overrides
            continue
        key = ov.key_or_group
        if key.startswith("hydra") or _is_group(key):
            continue
        parent = key.rpartition(".")[0]
        if parent.split(".")[0] in OPEN_MAPS:
            continue
        if parent and OmegaConf.select(cfg, parent + "._target_", default=None) is not None:
            continue  # an argument of an instantiated object: instantiate() rejects unknown ones itself
        if base_keys is None:
            base_keys = config_keys(compose_config(config_name, [x for x in overrides if not x.startswith("+")]))
        if o.startswith("++") and key in base_keys:
            continue  # ++ on an existing key is a plain override
        hint = _did_you_mean(key, base_keys)
        raise ConfigError(f"{o}: {prog} reads no key {key!r}{hint or f'; see `{prog} --help` for its keys'}")


def _check_repeated(prog: str, overrides: list[str]) -> None:
    """A key given twice (``bootstrap=10 bootstrap=20``): Hydra keeps the last one silently."""
    seen: dict[str, str] = {}
    for o in overrides:
        key, sep, _ = o.partition("=")
        if not sep:
            continue
        key = key.lstrip("+~").strip()
        if key in seen:
            raise ConfigError(f"{prog}: expected each key once, got {key!r} twice ({seen[key]!r} and {o!r}); "
                              "keep the one you mean (or use -m with a,b for a sweep)")
        seen[key] = o


def _scores_file(cfg) -> str | None:
    """The score table a command will analyse, when the config names a local one."""
    scores = OmegaConf.select(cfg, "scores", default=None, throw_on_resolution_failure=False)
    if scores:
        return str(scores)
    path = OmegaConf.select(cfg, "path", default=None, throw_on_resolution_failure=False)
    if path and OmegaConf.select(cfg, "hydra.job.config_name", default=None) == "reproduce":
        p = Path(str(path)).expanduser()
        return str((p if p.is_dir() else p.parent) / "released" / "scores_subset.csv")
    return None


def _check_work(prog: str, cfg) -> None:
    """``bootstrap`` against the memory its replicates need for the table at hand (read cheaply
    from its header and seg_id column); beyond the fixed bounds of :mod:`ts2.options`."""
    n_boot = OmegaConf.select(cfg, "bootstrap", default=None, throw_on_resolution_failure=False)
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot <= 0:
        return  # absent, off, or a wrong type check_options reports
    scores = _scores_file(cfg)
    if not scores or str(scores).startswith(("http://", "https://")):
        return
    from analysis.scores_io import table_shape
    from analysis.stats import check_bootstrap_size

    shape = table_shape(Path(scores).expanduser())
    if shape is None:
        return
    n_segs, n_metrics, n_subsets = shape
    mms = OmegaConf.select(cfg, "meta_metrics", default=None, throw_on_resolution_failure=False)
    n_mm = len(mms) if isinstance(mms, (list, tuple)) or OmegaConf.is_list(mms) else 5
    n_groups = 1 + (n_subsets or 3)  # Avg + the subsets (TS2: Synth, Nat, Real)
    try:
        check_bootstrap_size(n_boot, n_segs, max(n_metrics, 1) * max(n_mm, 1), n_groups)
    except ValueError as e:
        raise ConfigError(f"{prog}: {e}") from e


def _check_output_dir(prog: str, cfg, overrides: list[str]) -> None:
    """The run folder (``output_dir``) can be created: its nearest existing ancestor is writable.

    Only the ancestor is probed (nothing is created): the default folder name has a timestamp that
    Hydra fixes a moment later.
    """
    if "output_dir" not in cfg or str(OmegaConf.select(cfg, "hydra.run.dir", default="")) == ".":
        return
    try:
        out = Path(str(OmegaConf.select(cfg, "output_dir", throw_on_resolution_failure=True))).expanduser()
    except Exception:  # noqa: BLE001 - resolved by Hydra later
        return
    anc = out.absolute()
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    given = any(o.lstrip("+").startswith("output_dir=") for o in overrides)
    try:
        if not anc.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(anc))
        tempfile.TemporaryFile(dir=anc).close()
    except OSError as e:
        how = "pass output_dir=DIR (a writable folder)" if given else \
            "run from a writable folder or pass output_dir=DIR"
        raise ConfigError(f"{prog}: cannot create output_dir {out} ({anc}: {e.strerror or e}); {how}") from e


# Keys whose values are read by a command (files or folders): an output may not overwrite them.
INPUT_KEYS = ("scores", "reference", "results", "human", "path", "image_roots")
# Keys naming what a command writes: a folder (swapped in whole) and a single file (`ts2 explore out=`).
_OUTPUT_FOLDER, _OUTPUT_FILE = "output_dir", "out"


def _paths_of(cfg, key: str) -> list[Path]:
    """The existing paths a key of ``cfg`` names (one value or a list; ``auto``/``null`` none)."""
    try:
        value = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=True)
    except Exception:  # noqa: BLE001 - an unresolvable value is reported by its own check
        return []
    if value is None:
        return []
    values = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    if isinstance(values, dict):
        values = list(values.values())
    items = values if isinstance(values, list) else [values]
    found = []
    for v in items:
        if isinstance(v, (str, Path)) and str(v) not in ("", "auto", "none", "null"):
            p = Path(str(v)).expanduser()
            if p.exists():
                found.append(p.resolve())
    return found


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def _set_holding(inner: Path, outer: Path | None = None) -> Path | None:
    """The result set (a folder with a manifest or run record) that holds ``inner``, looking up
    from its folder to ``outer`` (to the root when None), or None."""
    from seg_data.result_sets import MANIFEST
    from seg_data.results import RUN_FILE

    d = inner if inner.is_dir() else inner.parent
    while True:
        if (d / MANIFEST).is_file() or (d / RUN_FILE).is_file():
            return d
        if d == outer or d == d.parent:
            return None
        d = d.parent


def _folder_overlaps(folder: Path, p: Path) -> bool:
    """Whether writing the result set ``folder`` (swapped in whole) would change the input ``p``: ``p`` is the
    folder, a file directly in it, lies in a result set inside it, or is a result set holding it."""
    if p == folder or p.parent == folder:
        return True
    if _within(p, folder) and _set_holding(p, folder):
        return True
    return _within(folder, p) and p.is_dir() and _set_holding(folder, p) is not None


def output_clash(outputs: dict[str, Path | None], inputs: dict[str, list[Path]]) -> str | None:
    """Why writing ``outputs`` would change an input, or None (the one rule for every command).

    An output folder (``output_dir``, written as a result set: swapped in whole, its old set
    removed) clashes with an input that is the folder, a file directly in it (a name the command
    may write), one that lies in a result set inside it, or
    with an input result set holding it. An output file (``out=``) clashes with an input that
    is the file or holds it, and with any file of a result set: writing there leaves that set
    incomplete. Paths are compared resolved (symlinks, ``..``); a user's own files in an output
    folder are kept by :func:`seg_data.result_sets.result_set`, so they do not clash.
    """
    folder, file = outputs.get(_OUTPUT_FOLDER), outputs.get(_OUTPUT_FILE)
    for key, paths in inputs.items():
        for p in paths:
            if folder is not None and _folder_overlaps(folder, p):
                return f"output_dir={folder} {'is' if p == folder else 'overlaps'} the input {key}={p}"
            if file is not None and _within(file, p):
                return f"out={file} {'is' if p == file else 'lies in'} the input {key}={p}"
    if file is not None and _set_holding(file) is not None:
        return f"out={file} lies in the result set {_set_holding(file)}"
    return None


def check_output_clash(prog: str, cfg) -> None:
    """Refuse a command line whose output would overwrite one of its inputs (:func:`output_clash`),
    before Hydra writes anything.

    Raises
    ------
    ConfigError
        ``output clashes with an input: ...; choose another output_dir/out``.
    """
    outputs: dict[str, Path | None] = {}
    for key in (_OUTPUT_FOLDER, _OUTPUT_FILE):
        try:
            v = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=True)
        except Exception:  # noqa: BLE001 - resolved by Hydra later (e.g. the ${now:} of the default)
            v = None
        outputs[key] = Path(str(v)).expanduser().resolve() if v not in (None, "") else None
    if str(OmegaConf.select(cfg, "hydra.run.dir", default="")) == ".":  # writes no folder of its own
        outputs[_OUTPUT_FOLDER] = None
    inputs = {k: _paths_of(cfg, k) for k in INPUT_KEYS if k in cfg}
    why = output_clash(outputs, inputs)
    if why:
        which = "out" if why.startswith("out=") else "output_dir"
        raise ConfigError(f"{prog}: output clashes with an input: {why}; nothing was written, "
                          f"choose another {which}")


def precheck(prog: str, config_name: str, args: list[str]):
    """Compose ``config_name`` with the overrides in ``args`` and check them; return the config.

    Raises
    ------
    ConfigError
        A key given twice, an unknown key (with close matches), a ``+key`` nothing reads, an
        option of the wrong type or over its bound (see :mod:`ts2.options`), a ``bootstrap``
        whose replicates would not fit in memory for the score table given, an unknown group option, an output folder that cannot be
        created, or any other composition error Hydra reports.
    """
    from hydra.errors import HydraException

    flags, overrides = split_args(args)
    _check_repeated(prog, overrides)
    multirun = any(f in ("-m", "--multirun") for f in flags)
    checked = _first_of_sweeps(overrides) if multirun else overrides
    try:
        cfg = compose_config(config_name, checked)
    except HydraException as e:
        msg = str(e)
        if "Error parsing override" in msg or "LexerNoViableAlt" in msg or "mismatched input" in msg:
            hint = _parse_hint(prog, checked)
            if hint:
                raise ConfigError(hint) from e
        m = re.search(r"Could not override '([^']+)'\.\s*To append to your config use", msg)
        if m:
            key = m.group(1)
            others = [o for o in checked if o.lstrip("+~").split("=", 1)[0].split("@")[0] != key]
            raise _unknown_key(prog, key, config_name, others) from e
        m = re.search(r"Could not find '([^']+)/([^'/]+)'", msg)
        if m:
            hint = _did_you_mean(m.group(2), group_options(m.group(1)))
            raise ConfigError(f"{prog}: unknown option {m.group(2)!r} for the config group {m.group(1)!r}"
                              f"{hint}; expected one of {group_options(m.group(1))}") from e
        raise ConfigError(f"{prog}: {_hydra_message(e)}") from e
    _check_additions(prog, config_name, cfg, checked)
    _check_interpolations(prog, cfg)  # first: an unset ${oc.env:...} would break the checks below
    _check_work(prog, cfg)  # before the fixed bounds: the memory a bootstrap needs says more
    try:
        check_options(cfg, prog, config_name)
    except OptionError as e:
        raise ConfigError(str(e)) from e
    if not multirun:
        _check_output_dir(prog, cfg, overrides)
        check_output_clash(prog, cfg)
    return cfg
