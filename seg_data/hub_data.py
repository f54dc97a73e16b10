"""The one download of a *data set* from the Hugging Face hub (the TS2 release, the hub-only human sets).

Models are loaded by :mod:`metrics_adapters.hub`; data sets are plain files, fetched here with
``huggingface_hub.snapshot_download``. Offline (``HF_HUB_OFFLINE=1``, no network: the hub is not
reachable from CI or the dev machines) the download fails at once and the error says how to get
the files elsewhere and where to point ts2 instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

__all__ = ["download_dataset"]

log = logging.getLogger(__name__)


def download_dataset(repo_id: str, hint: str, patterns: Sequence[str] | None = None, revision: str | None = None,
                     cache_dir: str | Path | None = None) -> Path:
    """The local folder of a hub dataset snapshot (only the files matching ``patterns``).

    Parameters
    ----------
    repo_id : str
        ``org/name`` of a dataset repository.
    hint : str
        What to pass ts2 instead, ending the error (e.g. ``pass path=DIR with a local copy``).
    patterns : sequence of str, optional
        ``allow_patterns`` (file names or globs); None: the whole repository.
    revision, cache_dir
        Passed to ``snapshot_download``.

    Raises
    ------
    RuntimeError
        The download failed (offline, network, authorisation, a gated repository): the message
        names the repository and files, the ``hf download`` command that fetches them where
        there is network, and ``hint``.
    """
    from huggingface_hub import snapshot_download

    files = list(patterns) if patterns else None
    log.info("downloading %s%s from the Hugging Face hub", repo_id, f" ({', '.join(files)})" if files else "")
    try:
        local = snapshot_download(repo_id=repo_id, repo_type="dataset", revision=revision, allow_patterns=files,
                                  cache_dir=None if cache_dir is None else str(cache_dir))
    except Exception as e:  # network errors come in many classes; say what to do instead
        what = " ".join(files) if files else ""
        raise RuntimeError(
            f"could not download {repo_id} from the Hugging Face hub ({type(e).__name__}: {e}); download it "
            f"where there is network (hf download {repo_id} {what + ' ' if what else ''}--repo-type dataset "
            f"--local-dir DIR) and {hint}") from e
    return Path(local)
