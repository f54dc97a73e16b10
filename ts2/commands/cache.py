"""``ts2 cache info | clear [cache_dir=DIR] [name=METRIC] [key=PREFIX] [json=true]``.

Covers the score cache (``scores.sqlite``) and the analysis store (``analysis/``,
:mod:`analysis.column_store`). ``name`` is a metric's column name (``metric=`` is taken by the
metric config group); ``name`` and ``key`` select scores only, so ``clear`` with either keeps the
analysis store, and without them empties both.
"""

from __future__ import annotations

import json
import logging
import sys
import time

from omegaconf import DictConfig

log = logging.getLogger(__name__)


def main(cfg: DictConfig) -> int:
    from metrics_adapters.cache import ScoreCache
    from metrics_adapters.sqlite_store import StoreUnavailableError, StoreUnreadableError, set_aside

    try:
        cache = ScoreCache.at(cfg.get("cache_dir"))
    except StoreUnreadableError as e:  # not SQLite, damaged, another schema: clear always works
        if cfg.action != "clear":
            log.error("ts2 cache: %s", e)
            return 2
        moved = set_aside(e.path)
        sys.stdout.write(f"set aside the unreadable score cache {e.path} as {moved} (nothing deleted); "
                         "the next run starts a new cache\n")
        if not (cfg.get("name") or cfg.get("key")):
            _clear_store(cfg)
        return 0
    except (StoreUnavailableError, RuntimeError) as e:  # not a folder, read-only, locked
        log.error("ts2 cache: %s", e)
        return 2
    with cache:
        return ACTIONS[cfg.action](cfg, cache)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _store(cfg: DictConfig):
    from analysis.column_store import ColumnStore

    return ColumnStore.at(cfg.get("cache_dir"))


def _clear_store(cfg: DictConfig) -> None:
    store = _store(cfg)
    n = store.clear()
    sys.stdout.write(f"deleted {n} analysis store entr{'y' if n == 1 else 'ies'} from {store.folder}\n")


def info(cfg: DictConfig, cache) -> int:
    from dataclasses import asdict

    inf = cache.info()
    st = _store(cfg).info()
    if cfg.json:
        sys.stdout.write(json.dumps({**asdict(inf), "analysis_store": asdict(st)}) + "\n")
        return 0
    lines = [f"cache: {inf.path} ({_size(inf.size_bytes)})",
             f"{inf.n_scores} scores under {len(inf.metrics)} metric key(s); {inf.n_file_hashes} image hashes"]
    for m in inf.metrics:
        fp = m.fingerprint.get("fingerprint", {})
        settings = ", ".join(f"{k}={v}" for k, v in fp.items() if k != "metric")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(m.last_used))
        lines.append(f"  {m.key[:12]}  {m.name:<16} {m.n_scores:>8} scores  last used {when}  "
                     f"{fp.get('metric', '?')} [{settings}] precision={m.fingerprint.get('precision')}")
    lines.append(f"analysis store: {st.path} ({_size(st.size_bytes)} of at most {_size(st.max_bytes)}), "
                 f"{st.n_entries} column result(s) (per-SEG values and chance levels, reused by ts2 analyze)")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def clear(cfg: DictConfig, cache) -> int:
    n = cache.clear(name=cfg.get("name"), key=cfg.get("key"))
    path = cache.path
    what = " and ".join(x for x in (f"name={cfg.name}" if cfg.get("name") else "",
                                    f"key={cfg.key}" if cfg.get("key") else "") if x) or "all metrics"
    sys.stdout.write(f"deleted {n} cached score(s) ({what}) from {path}\n")
    if not (cfg.get("name") or cfg.get("key")):
        _clear_store(cfg)
    return 0


ACTIONS = {"info": info, "clear": clear}
