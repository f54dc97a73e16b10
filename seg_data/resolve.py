"""The one resolver of ``"module:attr"`` strings (registry entries, command targets, config callables).

Every package may import ``seg_data``, so the metric registry, the meta-metric registry, the
command table and ``CallableLM`` all resolve their lazy targets here, with one error wording.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["parse_spec", "resolve"]


def parse_spec(spec: str) -> tuple[str, str]:
    """Split ``"package.module:attr.sub"`` into ``("package.module", "attr.sub")``.

    Raises
    ------
    ValueError
        If ``spec`` is not a string with a non-empty module and attribute around one ``":"``.
    """
    if not isinstance(spec, str):
        raise ValueError(f"expected 'module:attr', got {type(spec).__name__} {spec!r}")
    module, sep, attr = spec.partition(":")
    if not (module.strip() and sep and attr.strip()) or ":" in attr:
        raise ValueError(f"expected 'module:attr', got {spec!r}")
    return module.strip(), attr.strip()


def resolve(spec: str) -> Any:
    """The object named by ``"module:attr"``; ``attr`` may be dotted (``"mod:Class.method"``).

    The module is imported now (lazy registries call this only when an entry is used).

    Raises
    ------
    ValueError
        If ``spec`` is not ``"module:attr"``.
    ImportError
        If the module cannot be imported, or it has no such attribute (the message names which);
        the original error is chained.
    """
    module, attr = parse_spec(spec)
    try:
        obj = import_module(module)
    except ImportError as e:
        raise ImportError(f"cannot resolve {spec!r}: module {module!r} failed to import: {e}") from e
    parts = attr.split(".")
    for i, part in enumerate(parts):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            where = f"module {module!r}" if i == 0 else repr(f"{module}:{'.'.join(parts[:i])}")
            raise ImportError(f"cannot resolve {spec!r}: {where} has no attribute {part!r}") from e
    return obj
