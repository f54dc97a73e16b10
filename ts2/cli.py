"""Front end: ``ts2 COMMAND [SUBCOMMAND] key=value ... [-m]``.

Each command is a Hydra app whose primary config is ``conf/<command>.yaml``; the handler is a
lazy ``"module:function"`` entry, so ``ts2 data`` and ``ts2 analyze`` never import torch.
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack, contextmanager, nullcontext

from seg_data.resolve import resolve

from .commands.table import ALIASES, COMMANDS, Command, register_command

__all__ = ["main", "COMMANDS", "Command", "register_command"]


def _usage() -> str:
    lines = ["usage: ts2 COMMAND [ACTION] [key=value ...] [-m] [--cfg job]", "", "commands:"]
    for name, c in COMMANDS.items():
        acts = f" ({' | '.join(c.actions)})" if c.actions else ""
        alias = f" (also: {', '.join(c.aliases)})" if c.aliases else ""
        lines.append(f"  {name:<10} {c.help}{acts}{alias}")
    lines += ["", "`ts2 COMMAND --help` lists a command's keys with their defaults and meanings, and examples."]
    return "\n".join(lines)


class UsageError(Exception):
    """A command line ts2 refuses before Hydra sees it; its message is the one stderr line (exit 2)."""


def _command(name: str) -> Command:
    """The command called ``name`` (an alias already replaced), or a :class:`UsageError` with the closest name."""
    if name in COMMANDS:
        return COMMANDS[name]
    import difflib

    close = difflib.get_close_matches(name, [*COMMANDS, *ALIASES], n=1)
    hint = f"; did you mean {ALIASES.get(close[0], close[0])!r}?" if close else ""
    raise UsageError(f"ts2: unknown command {name!r}{hint} (expected one of {sorted(COMMANDS)})")


def _check_current_folder(prog: str) -> None:
    """Hydra's relative folders and the inputs' paths need the current folder: a deleted one is said in one line."""
    try:
        os.getcwd()
    except FileNotFoundError:
        raise UsageError(f"{prog}: the current folder no longer exists (deleted or moved since this shell entered "
                         "it); cd into an existing folder and run the command again") from None


def _hydra_overrides(cmd: Command, prog: str, rest: list[str]) -> list[str]:
    """The Hydra overrides of the words after the command: a command with actions takes its action
    first (``ts2 data make-synthetic ...`` becomes ``action=make-synthetic ...``)."""
    if not cmd.actions:
        return rest
    if not rest or "=" in rest[0] or rest[0].startswith("-"):
        raise UsageError(f"{prog}: expected an action, one of {list(cmd.actions)}")
    if rest[0] not in cmd.actions:
        raise UsageError(f"{prog}: unknown action {rest[0]!r}; expected one of {list(cmd.actions)}")
    return [f"action={rest[0]}", *rest[1:]]


def _check_no_credentials(prog: str, overrides: list[str]) -> None:
    """Refuse a URL with credentials before Hydra writes the overrides to .hydra/*.yaml and echoes them in its
    errors."""
    if not any("://" in o for o in overrides):
        return
    from metrics_adapters.api.secrets import has_url_credentials

    bad = [o.partition("=")[0] for o in overrides if has_url_credentials(o)]
    if bad:
        raise UsageError(f"{prog}: expected URLs without credentials, got user:password@ or a key-like query "
                         f"parameter (api-key=, token=, sig=, ...) in {bad}; put an API key in an environment "
                         "variable and name it with api_key_env (see docs/security.md)")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0
    name, rest = ALIASES.get(argv[0], argv[0]), argv[1:]
    prog = f"ts2 {name}"
    try:
        cmd = _command(name)
        _check_current_folder(prog)
        if any(a in ("-h", "--help") for a in rest):
            return print_help(cmd, [a for a in rest if a not in ("-h", "--help")], prog=prog)
        overrides = _hydra_overrides(cmd, prog, rest)
        _check_no_credentials(prog, overrides)
    except UsageError as e:
        print(e, file=sys.stderr)
        return 2
    return run_hydra(cmd, overrides, prog=prog)


def print_help(cmd: Command, overrides: list[str], prog: str) -> int:
    """Print ``ts2 COMMAND --help`` (overrides given with it choose the groups shown)."""
    from ts2.config_check import ConfigError, compose_config, split_args
    from ts2.help import command_help

    overrides = [o for o in split_args(overrides)[1] if o not in cmd.actions]
    try:
        cfg = compose_config(cmd.config, overrides)
    except Exception as e:  # noqa: BLE001 - help without the overrides rather than no help
        print(f"{prog}: ignoring the overrides for --help ({ConfigError(e)})", file=sys.stderr)
        cfg = compose_config(cmd.config, [])
    print(command_help(prog, cmd, cfg))
    return 0


def _explicit_output_dir(overrides: list[str]) -> str | None:
    """The ``output_dir=`` (or ``hydra.run.dir=``) of a single run's command line, if given as a path."""
    if any(o in ("-m", "--multirun") for o in overrides):
        return None
    for o in overrides:
        key, sep, value = o.lstrip("+").partition("=")
        if sep and key in ("output_dir", "hydra.run.dir") and value and "${" not in value:
            return value
    return None


def _check_output_override(overrides: list[str]) -> None:
    """Check an ``output_dir=`` given on the command line before Hydra creates it.

    Hydra makes the run folder and writes ``.hydra/`` and the log there before any handler runs,
    and reports a failure as a bare traceback; a read-only or full disk gets a clear message
    instead. Sweeps (``-m``) are left to each job.
    """
    value = _explicit_output_dir(overrides)
    if value is not None:
        from seg_data.result_sets import check_swappable
        from ts2.common import check_output_dir

        check_swappable(value)  # ValueError: the current folder or one above it, however written
        check_output_dir(value)



def _file_written(exc: BaseException) -> str | None:
    """The file a failed ``write`` was writing (an ``OSError`` from ``write()`` names none): the
    innermost file object opened for writing among the locals of the traceback's frames."""
    import io

    tb, found = exc.__traceback__, None
    while tb is not None:
        for v in tb.tb_frame.f_locals.values():
            mode = getattr(v, "mode", "")
            if isinstance(v, io.IOBase) and isinstance(getattr(v, "name", None), str) and isinstance(mode, str) \
                    and any(c in mode for c in "wax+"):
                found = v.name
        tb = tb.tb_next
    return found


def error_line(prog: str, exc: BaseException, output_dir: object = None,
               nothing_written: bool = False) -> tuple[str, int] | None:
    """The one stderr line and the exit code for an exception that reached the command line.

    ``KeyboardInterrupt`` (Ctrl-C) is ``interrupted`` (with ``; nothing written`` for a command
    whose result set is swapped in whole: ``nothing_written``) and 130, the shell's code for
    SIGINT; a metric that needs an optional extra that is not installed
    (:class:`metrics_adapters.extras.MissingExtraError`) names the extra, exit 2; a model that
    is not cached with the hub unreachable (:class:`metrics_adapters.hub.ModelUnavailableError`)
    is its message, which names the model and the key for a local copy, exit 2; a URL that
    cannot be reached names the reason; any other ``OSError`` (a full disk
    ``ENOSPC``, a file-size limit ``EFBIG``, ``EACCES``, ``EROFS``, ``EDQUOT``, ...) names the file
    (the error's, else the file being written, else ``output_dir``) and the errno's name, exit 2.
    ``None`` for anything else: a bug, left to its traceback.
    """
    if isinstance(exc, KeyboardInterrupt):
        return f"{prog}: interrupted" + ("; nothing written" if nothing_written else ""), 130
    if _explains_itself(exc):
        return f"{prog}: {exc}", 2
    if isinstance(exc, OSError):
        return _os_error_line(prog, exc, output_dir), 2
    return None


# Errors whose message is the whole answer (a damaged cache names the file and the fix; a missing extra names
# the extra; an uncached model with the hub unreachable names the model and the key for a local copy), each
# with the built-in base it derives from, so its module is imported only for an error of that base.
_SELF_EXPLAINING = (
    (RuntimeError, "metrics_adapters.sqlite_store", "StoreUnreadableError"),
    (ModuleNotFoundError, "metrics_adapters.extras", "MissingExtraError"),
    (OSError, "metrics_adapters.hub", "ModelUnavailableError"),
)


def _explains_itself(exc: BaseException) -> bool:
    """Whether ``exc`` is one of :data:`_SELF_EXPLAINING`."""
    from importlib import import_module

    return any(isinstance(exc, base) and isinstance(exc, getattr(import_module(module), name))
               for base, module, name in _SELF_EXPLAINING)


def _os_error_line(prog: str, exc: OSError, output_dir: object) -> str:
    """An ``OSError``'s line: a URL's reason, else the file (the error's, the file being written or
    ``output_dir``) with the errno's name and its text."""
    import errno
    import urllib.error

    if isinstance(exc, urllib.error.URLError):
        return f"{prog}: cannot read from the network: {getattr(exc, 'reason', exc)}"
    name = errno.errorcode.get(exc.errno, "") if exc.errno is not None else ""
    where = exc.filename if exc.filename is not None else _file_written(exc)
    if where is None and output_dir:
        where = f"writing into {output_dir}"
    what = " ".join(x for x in (name, f"({exc.strerror})" if exc.strerror else str(exc)) if x)
    return f"{prog}: {where}: {what}" if where else f"{prog}: {what}"


def _one_line_errors(handler, prog: str, nothing_written: bool = False):
    """``handler`` with :func:`error_line`'s exceptions turned into one stderr line and an exit code
    (Hydra would print them as a traceback and exit 1). Ctrl-C is re-raised for :func:`run_hydra`."""

    def call(cfg):
        try:
            return handler(cfg)
        except Exception as e:  # noqa: BLE001 - only those error_line knows; the rest re-raised
            try:
                where = cfg.get("output_dir")
            except Exception:  # noqa: BLE001 - no folder to name then
                where = None
            out = error_line(prog, e, where, nothing_written)
            if out is None:
                raise
            print(out[0], file=sys.stderr)
            return out[1]

    return call


def _drop_unwritten_folder(folder) -> None:
    """Remove the run folder of a failed command when it holds only Hydra's own files, so a
    failed ``ts2 analyze`` or ``ts2 report`` leaves no empty ``outputs/<cmd>/<timestamp>/``
    (the error was printed; the log said nothing more)."""
    import os
    import shutil

    from seg_data.result_sets import RUN_DIR_FILES

    try:
        names = set(os.listdir(folder))
    except OSError:
        return
    if names <= RUN_DIR_FILES:
        shutil.rmtree(folder, ignore_errors=True)


class JobFailed(RuntimeError):
    """A job of a multirun returned a non-zero exit code."""


def _in_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def _job_label() -> str:
    """``job N (key=value ...)`` of the running sweep job."""
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    return f"job {hc.job.get('num', '?')} ({' '.join(str(o) for o in hc.overrides.task)})"


def cfg_job_name() -> str:
    from hydra.core.hydra_config import HydraConfig

    return str(HydraConfig.get().job.get("num", "?"))


def _back_to_the_calling_folder() -> None:
    """Under ``hydra.job.chdir=true`` Hydra runs the job inside its output folder; ts2 reads every
    relative input path (``scores=``, ``path=``, ``results=``, ...) from the folder the command
    ran from, so it goes back there (outputs go to the absolute output folder either way)."""
    import os

    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        cwd = HydraConfig.get().runtime.cwd
        if cwd and os.getcwd() != cwd:
            os.chdir(cwd)


@contextmanager
def _compose_once(cfg, name: str, overrides: list[str], multirun: bool):
    """Let Hydra run with the config precheck composed instead of composing it twice more.

    Hydra composes the whole config once to read ``hydra.mode`` (``Hydra.get_mode``) and once more
    to run (``Hydra.compose_config``); precheck composed the same config already, before Hydra made
    any folder. Its value of ``hydra.mode`` is handed over, and for a single run (not ``-m``) the
    config itself: with the two fields Hydra's own compose sets differently (``hydra.mode=RUN``,
    which Hydra adds to the overrides when no mode is configured, recorded in
    ``hydra.overrides.hydra``; ``hydra.job.name``, the task's name) it is Hydra's config
    (tests/test_cli_compose.py composes both and compares them). Any other compose, or another
    Hydra without these methods, composes as before.
    """
    try:
        from hydra._internal.hydra import Hydra
        from hydra.core.utils import JobRuntime
        from hydra.types import RunMode
    except ImportError:  # pragma: no cover - another Hydra layout: it composes as before
        yield
        return
    if cfg is None or not hasattr(Hydra, "get_mode") or not hasattr(Hydra, "compose_config"):
        yield
        return
    from omegaconf import OmegaConf, open_dict

    mode = OmegaConf.select(cfg, "hydra.mode", default=None)
    expected = list(overrides) + (["hydra.mode=RUN"] if mode is None else [])
    pending = [None if multirun else cfg]
    original_mode, original_compose = Hydra.get_mode, Hydra.compose_config

    def compose_config(self, config_name, overrides, run_mode, with_log_configuration=False, from_shell=True,
                       validate_sweep_overrides=True):  # Hydra's signature: it calls with these keywords
        reuse = pending[0]
        if reuse is None or run_mode != RunMode.RUN or config_name != name or list(overrides) != expected:
            return original_compose(self, config_name, overrides, run_mode, with_log_configuration, from_shell,
                                    validate_sweep_overrides)
        pending[0] = None
        with open_dict(reuse):
            reuse.hydra.job.name = JobRuntime().get("name")
            if mode is None:
                reuse.hydra.mode = RunMode.RUN
                reuse.hydra.overrides.hydra.append("hydra.mode=RUN")
        if with_log_configuration:
            from hydra.core.utils import configure_log

            configure_log(reuse.hydra.hydra_logging, reuse.hydra.verbose)
        return reuse

    Hydra.get_mode = lambda self, config_name, overrides: mode
    Hydra.compose_config = compose_config
    try:
        yield
    finally:
        Hydra.get_mode, Hydra.compose_config = original_mode, original_compose


def run_hydra(cmd: Command, overrides: list[str], prog: str = "ts2") -> int:
    """Run ``cmd`` as a Hydra app with ``overrides`` (so ``-m``, ``--cfg`` and launchers work)."""
    import hydra

    from ts2.config_check import ConfigError, precheck, split_args

    try:
        # Before Hydra makes any folder: typo'd keys, keys nobody reads, option types, output_dir.
        checked = precheck(prog, cmd.config, overrides)
        _check_output_override(overrides)
    except (ConfigError, ValueError) as e:
        print(str(e) if prog in str(e) else f"{prog}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{prog}: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; nothing written", file=sys.stderr)
        return 130
    handler = _one_line_errors(resolve(cmd.target), prog, cmd.writes_folder)
    result: dict[str, int] = {"rc": 0}
    failed: list[str] = []  # the failed jobs of a sweep run in this process, each said at the end

    def task(cfg) -> None:
        from ts2.common import output_dir

        folder = output_dir(cfg)
        _back_to_the_calling_folder()
        rc = 1  # until the handler returns: an exception it raises is a failure too
        try:
            with folder_lock(folder, prog) if cmd.writes_folder else nullcontext():
                try:
                    rc = int(handler(cfg) or 0)
                finally:
                    if rc:
                        _drop_unwritten_folder(folder)
        except FolderLockedError as e:  # another writer's folder: never ours to tidy
            print(f"{prog}: {e}", file=sys.stderr)
            rc = 2
        result["rc"] = max(result["rc"], rc)
        if rc and _in_multirun():
            failed.append(_job_label())
            # Launchers such as joblib run jobs in other processes, where `result` is not ours:
            # raising marks the job failed, and Hydra fails the multirun after all jobs ran.
            raise JobFailed(f"{prog} job {cfg_job_name()} exited with code {rc}")

    from seg_data.result_sets import FolderLockedError, folder_lock

    old = sys.argv
    sys.argv = [prog, *overrides]
    try:
        with ExitStack() as stack:
            folder = _explicit_output_dir(overrides) if cmd.writes_folder else None
            if folder is not None:
                # The folder's one-writer lock before Hydra writes its .hydra/ files there: a second
                # writer refuses at once (a sweep's jobs, each in its own folder, lock in `task`).
                stack.enter_context(folder_lock(folder, prog))
            flags, plain = split_args(overrides)
            stack.enter_context(_compose_once(checked, cmd.config, plain, multirun=bool(flags)))
            hydra.main(version_base="1.3", config_path="pkg://conf", config_name=cmd.config)(task)()
    except SystemExit as e:  # hydra exits on bad overrides (and failed multirun jobs) with its message
        if failed:  # Hydra's message names the first failed job only
            print(f"{prog}: {len(failed)} job(s) of the sweep failed (each said above): {'; '.join(failed)}",
                  file=sys.stderr)
        return max(int(e.code or 0), result["rc"])
    except FolderLockedError as e:  # only the lock above: `task` answers its own
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C: Hydra lets it through
        print(error_line(prog, e, nothing_written=cmd.writes_folder)[0], file=sys.stderr)
        return 130
    finally:
        sys.argv = old
    return result["rc"]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
