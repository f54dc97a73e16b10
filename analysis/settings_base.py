"""What every settings object of a door-independent entry point shares: its keys, how it is read from a composed
config or a plain mapping, and how single settings are replaced.

A settings class is a frozen dataclass whose field defaults are the defaults (the YAML file of its config group
states the same values, and a test composes it and compares). It derives from :class:`PlainSettings` and, when a
config value needs turning into the field's type (a list into a tuple, ``null`` into ``{}``), says how in
``_coerce``. The command line reads it with :meth:`~PlainSettings.from_mapping`; Python callers build it or call
:meth:`~PlainSettings.updated` with keywords, without Hydra.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

S = TypeVar("S", bound="PlainSettings")


def plain(value: Any) -> Any:
    """A config value as plain Python (a DictConfig/ListConfig resolved into dicts and lists)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def as_tuple(value: Any) -> tuple[str, ...] | None:
    """``None`` stays ``None``; one name becomes a 1-tuple; a list a tuple of its names."""
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def names_or_none(value: Any) -> tuple[str, ...] | None:
    """:func:`as_tuple`, with an empty list read as ``None`` (every one / the default)."""
    return as_tuple(value) or None


def text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def mapping(value: Any) -> dict:
    """A mapping setting; ``None`` (a config's ``null``) is the empty mapping."""
    return dict(value or {})


class PlainSettings:
    """``keys()``, ``from_mapping()`` and ``updated()`` for a frozen settings dataclass.

    ``KINDS`` maps a setting to the function that turns a config or keyword value into the field's type
    (``int``, ``bool``, :func:`as_tuple`, :func:`mapping`, ...); a setting not named there is taken as given.
    """

    KINDS: ClassVar[dict[str, Any]] = {}

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The setting names."""
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    @classmethod
    def _coerce(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Config or keyword values -> field values, through :attr:`KINDS`."""
        return {k: cls.KINDS[k](v) if k in cls.KINDS else v for k, v in values.items()}

    @classmethod
    def from_mapping(cls: type[S], cfg: Mapping[str, Any]) -> S:
        """The settings a composed config (or a plain mapping) holds; keys it lacks keep their defaults and keys
        that are not settings are ignored."""
        return cls(**cls._coerce({k: plain(cfg[k]) for k in cls.keys() if k in cfg}))

    def updated(self: S, **changes: Any) -> S:
        """A copy with ``changes`` (setting name -> value).

        Raises
        ------
        TypeError
            A name that is not a setting (the valid ones named).
        """
        unknown = sorted(set(changes) - set(self.keys()))
        if unknown:
            raise TypeError(f"expected {type(self).__name__} keys among {list(self.keys())}, got {unknown}")
        return dataclasses.replace(self, **type(self)._coerce(dict(changes))) if changes else self  # type: ignore
