"""The original authors' code, fetched from PyPI, for tests that compare ts2 with it.

``fetch(dist)`` downloads one pinned wheel with ``pip download --no-deps`` and unpacks it (once
per folder); ``import_module(root, name, stubs)`` imports ONE module of it by file, with its
parent packages as empty namespaces (their ``__init__`` would import the whole project and its
dependencies) and ``stubs`` standing in for the modules it imports that the test does not need;
``sys.modules`` is restored afterwards, so nothing of the original leaks into other tests.
"""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
import types
import zipfile
from pathlib import Path

__all__ = ["PINS", "OriginalUnavailable", "fetch", "import_module", "stub"]

# The versions the fidelity tests were written against (docs/metrics.md cites their files and lines).
PINS = {"t2v-metrics": "3.0", "hpsv2": "1.2.0", "image-reward": "1.5"}


class OriginalUnavailable(RuntimeError):
    """The original package could not be downloaded (no network) or unpacked."""


def fetch(dist: str, root: Path, timeout: float = 300.0) -> Path:
    """Folder holding the unpacked wheel of ``dist`` (pinned in :data:`PINS`), fetched into ``root``."""
    version = PINS[dist]
    target = root / f"{dist}-{version}"
    if (target / ".done").exists():
        return target
    wheels = root / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-q", "-d", str(wheels), f"{dist}=={version}"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise OriginalUnavailable(f"pip download {dist}=={version} failed: {e}") from e
    stem = dist.replace("-", "_")
    found = sorted(wheels.glob(f"{stem}-{version}-*.whl"))
    if res.returncode != 0 or not found:
        last = (res.stderr.strip().splitlines() or ["no wheel found"])[-1]
        raise OriginalUnavailable(f"pip download {dist}=={version} failed (no network?): {last[:300]}")
    try:
        with zipfile.ZipFile(found[0]) as z:
            z.extractall(target)
    except zipfile.BadZipFile as e:
        raise OriginalUnavailable(f"{found[0]}: not a wheel: {e}") from e
    (target / ".done").write_text(found[0].name)
    return target


@contextlib.contextmanager
def import_module(root: Path, name: str, stubs: dict[str, types.ModuleType] | None = None):
    """Import module ``name`` (dotted) from the unpacked package under ``root``; yields the module."""
    saved = dict(sys.modules)
    try:
        parts = name.split(".")
        for i in range(1, len(parts)):
            pkg = ".".join(parts[:i])
            mod = types.ModuleType(pkg)
            mod.__path__ = [str(root.joinpath(*parts[:i]))]
            sys.modules[pkg] = mod
        for k, v in (stubs or {}).items():
            sys.modules[k] = v
        path = root.joinpath(*parts).with_suffix(".py")
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.clear()
        sys.modules.update(saved)


def stub(name: str, **attrs) -> types.ModuleType:
    """A module ``name`` holding ``attrs``."""
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    return mod
