"""Where an LM's API base is: on this machine or a private network (a self-hosted server) or elsewhere.

Example:
    >>> from memento.llm.api_base import is_local
    >>> is_local("http://127.0.0.1:8000/v1"), is_local("https://api.openai.com/v1")
    (True, False)
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["is_local"]


def is_local(api_base: str) -> bool:
    """Whether an API base is on this machine or a private network (a self-hosted server)."""
    host = (urlsplit(api_base).hostname or "").lower()
    if host in ("localhost", "") or host.endswith((".local", ".localhost", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local
