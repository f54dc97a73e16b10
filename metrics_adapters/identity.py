"""What a cache key knows about the code that computes a result.

A score cache is only safe if its key changes whenever the result could. Settings (model id,
revision, template, decoding) reach the key through ``settings()``; the *code* reaches it here:

* every class carries a ``version`` (a class attribute, bumped by whoever changes what the class
  computes in the installed ts2 packages, which are released and reviewed as a whole), and
* a class defined **outside** the ts2 packages (a user's own metric in their module, the path
  ``docs/metrics.md`` teaches) also contributes a hash of its source: the bytes of its module file,
  for it and for every base class that is outside ts2 too. Editing ``score_batch`` there and
  scoring again re-scores instead of returning the old cached values.

One place for both, so that metrics (:class:`metrics_adapters.base.Metric`) and swappable model
parts (:class:`metrics_adapters.model_part.ModelPart`) cannot key their code differently.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import sys
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["OWN_PACKAGES", "callable_identity", "code_identity", "fingerprint_hash", "source_hash"]

log = logging.getLogger(__name__)

#: Top-level packages of this project: their classes are keyed by ``version`` alone.
OWN_PACKAGES = frozenset({"ts2", "seg_data", "metrics_adapters", "analysis"})


def fingerprint_hash(fingerprint: Mapping[str, Any]) -> str:
    """Stable 32-hex-digit hash of a fingerprint dict (key order does not matter).

    Values that are not JSON types are hashed through ``str``.
    """
    blob = json.dumps(fingerprint, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _is_own(cls: type) -> bool:
    return cls.__module__.split(".", 1)[0] in OWN_PACKAGES


@lru_cache(maxsize=256)
def _file_hash(path: str, mtime_ns: int, size: int) -> str:
    # Keyed by (path, mtime, size) so an edited file is read again within one process.
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def source_hash(cls: type | Any) -> str | None:
    """Hash of the source that defines ``cls`` (a class or a function): its module file's bytes.

    Falls back to :func:`inspect.getsource` of the object (classes and functions defined in a
    notebook or in ``__main__`` without a file). Returns ``None`` only where Python keeps no
    source at all; the caller then logs that edits cannot be detected.
    """
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    if path and Path(path).is_file() and path.endswith(".py"):
        st = Path(path).stat()
        return _file_hash(str(Path(path).resolve()), st.st_mtime_ns, st.st_size)
    try:
        src = inspect.getsource(cls)
    except (OSError, TypeError):
        return None
    return hashlib.sha256(src.encode()).hexdigest()[:16]


def code_identity(cls: type) -> dict[str, Any]:
    """The code part of a fingerprint: ``{"version": ..., ["source": {...}]}``.

    ``version`` is ``cls.version`` (``"1"`` when a class declares none). ``source`` maps
    ``"module:qualname"`` to :func:`source_hash` for ``cls`` and each base class defined outside
    :data:`OWN_PACKAGES` (omitted when there are none, so the keys of ts2's own classes depend on
    ``version`` only and survive unrelated edits of their modules).
    """
    out: dict[str, Any] = {"version": str(getattr(cls, "version", "1"))}
    sources = {}
    for c in cls.__mro__:
        if _is_own(c) or c.__module__.split(".", 1)[0] in sys.stdlib_module_names:
            continue
        h = source_hash(c)
        if h is None:
            log.warning("no source found for %s.%s: the score cache cannot notice edits to it; "
                        "bump its `version` attribute when you change what it computes",
                        c.__module__, c.__qualname__)
            h = "unknown"
        sources[f"{c.__module__}:{c.__qualname__}"] = h
    if sources:
        out["source"] = sources
    return out


def callable_identity(fn: Any) -> dict[str, Any]:
    """The code part of a fingerprint for a plain callable (a function scored as a metric).

    ``{"function": "module:qualname", "source": hash[, "partial": ...]}``: the source is
    :func:`source_hash` of the function (its module file, or its own source in a notebook), of
    the class of a callable object, or of the function under a bound method or
    :func:`functools.partial` (whose bound arguments enter the key too). ``"unknown"`` with a
    warning where Python keeps no source (builtins, C extensions): bump the ``version`` given
    with it when what it computes changes.

    Raises
    ------
    TypeError
        ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"expected a callable f(images, prompts) -> scores, got {type(fn).__name__}")
    out: dict[str, Any] = {}
    target = fn
    if isinstance(target, functools.partial):
        # contents, not repr: numpy abbreviates a large array's repr, so two arrays would share a key
        out["partial"] = value_digest((target.args, sorted(target.keywords.items())))
        target = target.func
    target = getattr(target, "__func__", target)  # a bound method: its function
    if not (inspect.isfunction(target) or inspect.isclass(target)):
        target = type(target)  # a callable object: the class that defines __call__
    out["function"] = f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', repr(target))}"
    h = source_hash(target)
    body = function_body_hash(target)
    if h is None and body is None:
        log.warning("no source found for %s: the score cache cannot notice edits to it; pass a new `version` "
                    "when you change what it computes", out["function"])
    out["source"] = "unknown" if h is None else h
    if body is not None:
        # the module file's hash misses a function redefined in the same file with a new body
        out["body"] = body
    return out


def function_body_hash(fn: Any) -> str | None:
    """Hash of a function's own code: its compiled body (bytecode, constants, names, recursively
    through nested code objects) and its closure's values. None for a class or where there is
    no ``__code__``.

    Two definitions of one name in one file (a notebook cell run again with a new body) differ
    here although their module's file hash is the same.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    h = hashlib.sha256()

    def feed(c) -> None:
        h.update(c.co_code)
        h.update(repr(c.co_names).encode())
        for k in c.co_consts:
            feed(k) if inspect.iscode(k) else h.update(value_digest(k).encode())

    feed(code)
    cells = getattr(fn, "__closure__", None) or ()
    for cell in cells:
        try:
            h.update(value_digest(cell.cell_contents).encode())
        except ValueError:  # an empty cell (a name not yet bound)
            h.update(b"<empty>")
    return h.hexdigest()[:16]


def value_digest(value: Any) -> str:
    """A stable digest of a value for a cache key: arrays by dtype, shape and bytes; containers
    element by element; everything else by ``repr``.

    Examples
    --------
    >>> import numpy as np
    >>> a, b = np.zeros(5000), np.zeros(5000)
    >>> b[2500] = 1
    >>> repr(a) == repr(b), value_digest(a) == value_digest(b)
    (True, False)
    """
    h = hashlib.sha256()

    def feed(v: Any) -> None:
        if hasattr(v, "__array__") and hasattr(v, "dtype") and hasattr(v, "shape"):
            import numpy as np

            arr = np.ascontiguousarray(np.asarray(v))
            h.update(f"array:{arr.dtype.str}:{arr.shape}:".encode())
            h.update(arr.tobytes() if arr.dtype != object else repr(arr.tolist()).encode())
        elif isinstance(v, (list, tuple)):
            h.update(f"{type(v).__name__}[{len(v)}](".encode())
            for x in v:
                feed(x)
            h.update(b")")
        elif isinstance(v, dict):
            h.update(f"dict[{len(v)}](".encode())
            for k in sorted(v, key=repr):
                feed(k)
                feed(v[k])
            h.update(b")")
        else:
            r = repr(v)
            if " at 0x" in r:  # an object's default repr holds its address: differs between processes
                r = f"<{type(v).__module__}.{type(v).__qualname__}>"
            h.update(r.encode())

    feed(value)
    return h.hexdigest()[:16]
