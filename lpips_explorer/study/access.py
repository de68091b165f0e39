"""Who is who in a class study: participant tokens, lecturer keys, the admin key for creating studies.

Nothing is kept in server memory: a person is recognised by a token in their link.

- A **participant** (student) has ``p=TOKEN`` in the link, set by the page on the first visit
  (:func:`new_token`), so a reload or a reopened tab keeps it. The database stores only
  :func:`participant_id` of it, a one-way hash: the lecturer's per-answer CSV cannot be turned
  back into a link that answers for someone.
- The **lecturer** has ``key=KEY`` (:func:`new_token`, 192 bits) in the lecturer link; the store
  keeps its SHA-256 (:func:`lpips_explorer.study.store.key_hash`).
- **Creating studies** is open unless the server names an admin key
  (``[study] admin_key = "…"`` in ``.streamlit/secrets.toml``, read by the page): then
  :func:`admin_ok` must accept the key typed in the form.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any

__all__ = ["TOKEN_RE", "admin_ok", "new_token", "participant_id", "valid_token"]

#: A token as :func:`new_token` writes it (URL-safe base64, 16 to 64 characters; 32 from new_token).
TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{16,64}")


def new_token() -> str:
    """A fresh random token for a link: 32 URL-safe characters (192 bits)."""
    return secrets.token_urlsafe(24)


def valid_token(token: Any) -> bool:
    """Whether ``token`` has the form of a token (:data:`TOKEN_RE`)."""
    return isinstance(token, str) and TOKEN_RE.fullmatch(token) is not None


def participant_id(token: str) -> str:
    """The anonymous id stored with a participant's answers: 32 hex digits of SHA-256 of the token.

    Raises:
        ValueError: ``token`` is not a token (:func:`valid_token`).
    """
    if not valid_token(token):
        raise ValueError(f"a participant token is 16 to 64 URL-safe characters, got {token!r}")
    return hashlib.sha256(b"lpips-explorer participant:" + token.encode()).hexdigest()[:32]


def admin_ok(configured: Any, given: Any) -> bool:
    """Whether ``given`` may create a study: always when no admin key is configured (``None`` or
    empty), else only when it equals ``configured`` (constant-time comparison)."""
    if configured is None or configured == "":
        return True
    if not isinstance(configured, str):
        raise TypeError(f"[study] admin_key must be a string, got {type(configured).__name__}")
    if not isinstance(given, str) or not given:
        return False
    return hmac.compare_digest(configured.encode(), given.encode())
