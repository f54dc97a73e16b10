"""The one secret-scrubbing layer of every outbound client.

Every API key ts2 holds passes through here:

- :func:`read_api_key` reads it from the environment and validates it (printable ASCII, no
  control characters); a bad key is refused with a message that names the variable and the
  position of the bad character, never the key;
- :func:`check_base_url` refuses credentials in an endpoint URL (``http://user:KEY@host``, or a
  query parameter named like a key: ``?api-key=KEY``, ``&token=``, ``&sig=``): the URL is part
  of fingerprints, ``run.json``, the caches and Hydra's ``.hydra/*.yaml``;
- :func:`scrub` masks a secret, and every piece of it of :data:`MIN_PIECE` or more characters
  (so a key a server echoes cut short, or cut by our own truncation, is masked too);
  :func:`quote` scrubs a server body in full *before* cutting it to a length;
- :func:`register_secret` adds a key to the process-wide set masked in every log record: a
  log-record factory (installed when the first key is registered) scrubs each record's message
  and traceback as it is made, so every handler (Hydra's ``ts2.log``, stderr, pytest's) sees
  only the masked text.

Examples
--------
>>> scrub("key=sk-abcdefgh12345678 and again bcdefgh1234", ["sk-abcdefgh12345678"])
'key=*** and again ***'
>>> quote("x" * 5 + "sk-abcdefgh12345678", 10, ["sk-abcdefgh12345678"])
'xxxxx***'
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["InvalidAPIKeyError", "MissingAPIKeyError", "read_api_key", "check_base_url", "has_url_credentials",
           "url_credential_params", "mask_url_credentials", "scrub", "quote",
           "register_secret", "registered_secrets", "SecretFilter", "MIN_PIECE", "MASK"]

MIN_PIECE = 8   # pieces of a key this long or longer are masked wherever they appear
MASK = "***"

_lock = threading.Lock()
_secrets: set[str] = set()


class MissingAPIKeyError(RuntimeError):
    """The environment variable that should hold the API key is not set (or empty)."""


class InvalidAPIKeyError(ValueError):
    """The API key read from the environment is malformed (the message never contains the key)."""


def read_api_key(env: str | None) -> str | None:
    """The API key in the environment variable ``env`` (``None`` when ``env`` is ``None``).

    Surrounding whitespace (a trailing newline from ``$(cat file)``) is stripped; what remains
    must be printable ASCII without spaces (codes 33 to 126): no HTTP bearer token has others,
    and a newline inside a header value would make ``requests`` quote the whole header in its error.
    The key is registered with :func:`register_secret`.

    Raises
    ------
    MissingAPIKeyError
        The variable is unset or empty.
    InvalidAPIKeyError
        A control character, space or non-ASCII character inside the key (message names the
        variable and the position, not the key).
    """
    if env is None:
        return None
    raw = os.environ.get(env, "")
    key = raw.strip()
    if not key:
        raise MissingAPIKeyError(
            f"expected the API key in the environment variable {env!r}, but it is not set; "
            f"export {env}=... (or set api_key_env: null for a server without authentication)")
    for i, ch in enumerate(key):
        if not 33 <= ord(ch) <= 126:
            what = "a newline" if ch in "\r\n" else ("a space" if ch == " " else
                                                    "a control character" if ord(ch) < 32 or ord(ch) == 127
                                                    else "a non-ASCII character")
            register_secret(key)  # it is still a secret: mask it should it surface anywhere
            raise InvalidAPIKeyError(
                f"expected the API key in ${env} to be printable ASCII without spaces, got {what} at character "
                f"{i + 1} of {len(key)}; check how the variable was set (the key itself is not shown)")
    register_secret(key)
    return key


def check_base_url(url: str) -> str:
    """``url`` without a trailing ``/``, after checking it carries no credentials.

    Raises
    ------
    ValueError
        Empty, not ``http(s)://host...``, or with userinfo (``user:password@``); the message
        shows the URL with the userinfo replaced by ``***``.
    """
    if not url:
        raise ValueError("expected a base_url such as 'http://127.0.0.1:8000/v1', got an empty value")
    url = str(url).strip()
    parts = urlsplit(url)
    params = url_credential_params(url)
    if params:
        for _, value in params:
            register_secret(value)
        raise ValueError(f"expected a base_url without credentials, got {mask_url_credentials(url)!r} (a key in the "
                         f"query parameter {params[0][0]!r}); put the API key in an environment variable and name it "
                         "with api_key_env")
    if "@" in parts.netloc or has_url_credentials(url):
        host = parts.netloc.rsplit("@", 1)[1]
        for piece in parts.netloc.rsplit("@", 1)[0].split(":"):
            if piece:
                register_secret(piece)
        raise ValueError(f"expected a base_url without credentials, got '{parts.scheme}://***@{host}{parts.path}'; "
                         "put the API key in an environment variable and name it with api_key_env")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected a base_url like 'http://127.0.0.1:8000/v1' or 'https://api.openai.com/v1', "
                         f"got {url!r}")
    return url.rstrip("/")


_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s@?#]*@")


# A query parameter whose name says it carries a credential (Azure's api-key, a SAS sig, tokens...);
# api-version and the like pass.
_KEY_PARAM = re.compile(r"(?i)key|token|secret|passw|pwd|sig|auth|credential")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+")


def url_credential_params(text: str) -> list[tuple[str, str]]:
    """``(name, value)`` of every non-empty query parameter named like a credential in the URLs of ``text``.

    Examples
    --------
    >>> url_credential_params("base_url=https://x.azure.com/v1?api-version=2024-06&api-key=abc123")
    [('api-key', 'abc123')]
    """
    from urllib.parse import parse_qsl

    out = []
    for url in _URL.findall(str(text)):
        query = urlsplit(url).query
        out += [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if v and _KEY_PARAM.search(k)]
    return out


def mask_url_credentials(text: str) -> str:
    """``text`` with userinfo and credential query values of its URLs replaced by ``***``.

    Examples
    --------
    >>> mask_url_credentials("http://u:pw@host/v1?api-key=abc&api-version=1")
    'http://***@host/v1?api-key=***&api-version=1'
    """
    text = _USERINFO.sub(lambda m: m.group(0).split("//", 1)[0] + "//***@", str(text))
    for name, value in url_credential_params(text):
        text = re.sub(rf"([?&;]{re.escape(name)}=){re.escape(value)}", rf"\g<1>{MASK}", text)
    return text


def has_url_credentials(text: str) -> bool:
    """Whether ``text`` holds a URL with userinfo (``scheme://user:password@host``) or a query
    parameter named like a credential (``?api-key=...``, ``&token=...``).

    The command line checks its overrides with this before Hydra records them in
    ``.hydra/overrides.yaml`` and ``config.yaml``.

    Examples
    --------
    >>> has_url_credentials("metric.vqa.base_url=http://u:k@host/v1"), has_url_credentials("x=http://host/v1")
    (True, False)
    >>> has_url_credentials("x=https://h/v1?api-version=2024-06"), has_url_credentials("x=https://h/v1?api-key=K")
    (False, True)
    """
    return bool(_USERINFO.search(str(text))) or bool(url_credential_params(text))


def register_secret(secret: str | None) -> None:
    """Add ``secret`` to what is masked in every log record of this process.

    Secrets shorter than :data:`MIN_PIECE` are not registered: masking a short word (a local
    server's placeholder key ``EMPTY``, a user name) everywhere would garble the logs; the client
    still scrubs its own key of any length from what it quotes and returns.
    """
    if not secret or len(secret) < MIN_PIECE:
        return
    with _lock:
        _secrets.add(secret)
    _install_filter()


def registered_secrets() -> tuple[str, ...]:
    with _lock:
        return tuple(_secrets)


def _pieces(secret: str) -> set[str]:
    if len(secret) < MIN_PIECE:
        return set()
    return {secret[i:i + MIN_PIECE] for i in range(len(secret) - MIN_PIECE + 1)}


def scrub(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with each secret, and each run of its pieces of >= :data:`MIN_PIECE` characters, as ``***``.

    ``secrets`` defaults to every registered secret. A secret shorter than :data:`MIN_PIECE` is
    masked only where it appears whole.
    """
    text = str(text)
    secrets = [s for s in (registered_secrets() if secrets is None else secrets) if s]
    if not secrets or not text:
        return text
    for s in sorted(secrets, key=len, reverse=True):
        text = text.replace(s, MASK)
    grams: set[str] = set()
    for s in secrets:
        grams |= _pieces(s)
    if not grams or len(text) < MIN_PIECE:
        return text
    covered = _covered(text, grams)
    return _mask_runs(text, covered) if any(covered) else text


def _covered(text: str, grams: set[str]) -> list[bool]:
    """For each character of ``text``, whether it lies in an occurrence of one of ``grams``
    (pieces of :data:`MIN_PIECE` characters of a secret)."""
    covered = [False] * len(text)
    for i in range(len(text) - MIN_PIECE + 1):
        if text[i:i + MIN_PIECE] in grams:
            covered[i:i + MIN_PIECE] = [True] * MIN_PIECE
    return covered


def _mask_runs(text: str, covered: list[bool]) -> str:
    """``text`` with each run of covered characters replaced by one :data:`MASK`."""
    out, i = [], 0
    while i < len(text):
        if covered[i]:
            while i < len(text) and covered[i]:
                i += 1
            out.append(MASK)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def quote(text: str, limit: int, secrets: Iterable[str] | None = None) -> str:
    """At most ``limit`` characters of ``text`` for an error message, scrubbed before and after the cut.

    Scrubbing the whole text first means no key survives because the cut split it; scrubbing
    again after the cut masks a piece of a key that was already partial in the text.
    """
    secrets = list(registered_secrets() if secrets is None else secrets)
    return scrub(scrub(text, secrets)[:int(limit)], secrets)


def _scrub_record(record: logging.LogRecord) -> logging.LogRecord:
    try:
        msg = record.getMessage()
    except Exception:  # a broken format string: scrub what there is
        msg = f"{record.msg} {record.args}"
    record.msg, record.args = scrub(msg), None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = scrub(record.exc_text)
    if record.stack_info:
        record.stack_info = scrub(record.stack_info)
    return record


class SecretFilter(logging.Filter):
    """A logging filter masking registered secrets (for handlers outside the record factory's reach)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if registered_secrets():
            _scrub_record(record)
        return True


_installed = False


def _install_filter() -> None:
    """Wrap the log-record factory once: every record made after a key is known is scrubbed."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        previous = logging.getLogRecordFactory()

    def factory(*args, **kwargs):
        record = previous(*args, **kwargs)
        return _scrub_record(record) if _secrets else record

    logging.setLogRecordFactory(factory)
