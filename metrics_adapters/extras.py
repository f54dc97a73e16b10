"""Which optional extra of ts2 provides a module a metric could not import.

The base install (``pip install -e .``) has no torch: the metrics that need no model (controls,
the shapes detector, blur) run on it, and a metric that needs the model stack stops at once with
one line naming the extra to install (:class:`MissingExtraError`), instead of failing on every
image. The table maps the import name to the distribution and extra of ``pyproject.toml``
(``tests/test_light_install.py`` checks it against that file).
"""

from __future__ import annotations

__all__ = ["MissingExtraError", "MODULE_EXTRAS", "missing_extra", "require_module"]

# import name -> (distribution on PyPI, extra of ts2 that installs it)
MODULE_EXTRAS: dict[str, tuple[str, str]] = {
    "torch": ("torch", "models"),
    "torchvision": ("torchvision", "models"),
    "open_clip": ("open_clip_torch", "models"),
    "transformers": ("transformers", "models"),
    "tokenizers": ("tokenizers", "models"),
    "sentencepiece": ("sentencepiece", "models"),
    "safetensors": ("safetensors", "models"),
    "sentence_transformers": ("sentence-transformers", "models"),
    "requests": ("requests", "models"),
    "gguf": ("gguf", "models"),
    "accelerate": ("accelerate", "models"),
    "pyiqa": ("pyiqa", "iqa"),
    "krippendorff": ("krippendorff", "human"),
}


class MissingExtraError(ModuleNotFoundError):
    """A metric needs a module of an optional extra that is not installed (one line for the CLI)."""


def missing_extra(error: BaseException, what: str) -> MissingExtraError | None:
    """The :class:`MissingExtraError` for ``error`` if it names a module of an extra, else ``None``.

    Parameters
    ----------
    error : BaseException
        Raised while ``what`` loaded; a ``ModuleNotFoundError`` whose ``name`` is a module of an
        extra (``torch`` also for ``torch.nn``) gives an error, anything else ``None``.
    what : str
        Who needed it, for the message (e.g. ``"metric clipscore"``).

    Examples
    --------
    >>> str(missing_extra(ModuleNotFoundError("No module named 'torch'", name="torch"), "metric clipscore"))
    'metric clipscore needs torch, which is not installed: pip install "ts2[models]"'
    """
    top = (getattr(error, "name", None) or "").partition(".")[0]
    if not isinstance(error, ModuleNotFoundError) or top not in MODULE_EXTRAS:
        return None
    extra = MODULE_EXTRAS[top][1]
    return MissingExtraError(f'{what} needs {top}, which is not installed: pip install "ts2[{extra}]"', name=top)


def require_module(module: str, what: str) -> None:
    """Raise :class:`MissingExtraError` when ``module`` (a key of :data:`MODULE_EXTRAS`) cannot
    be imported, without importing it.

    Raises
    ------
    MissingExtraError
        ``module`` is not installed; the message names ``what`` and the extra.
    """
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise missing_extra(ModuleNotFoundError(f"No module named {module!r}", name=module), what)
