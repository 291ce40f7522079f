"""Secrets out of text we print or store: the API key, and anything that looks like a credential.

A server may echo the request's ``Authorization`` header in an error body; that text goes into
records (``error_message``) and one-line errors. The client passes every such text through
``redact`` once, where it enters our records and errors (``tokenpace.client``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

MASK = "***"

# "Bearer <token>" / "Basic <token>" (an echoed Authorization header), and OpenAI-style "sk-..." keys;
# six characters at least, so that prose ("bearer of news") stays as it was.
_CREDENTIAL = re.compile(r"\b(?P<scheme>bearer|basic)(?P<gap>\s+)[^\s\"',;]{6,}|\bsk-[A-Za-z0-9_-]{6,}", re.IGNORECASE)


def _mask(match: re.Match[str]) -> str:
    if match["scheme"]:
        return f"{match['scheme']}{match['gap']}{MASK}"
    return f"sk-{MASK}"


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` (e.g. the API key) and any credential-looking token masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return _CREDENTIAL.sub(_mask, text)


def url_has_credentials(url: str) -> bool:
    """True when ``url`` carries a user name or password (``http://user:pass@host/...``)."""
    return "@" in urlsplit(url).netloc


def strip_url_credentials(url: str) -> str:
    """``url`` with its user name and password replaced by ``***``, for messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=f"{MASK}@{parts.netloc.rpartition('@')[2]}"))
