"""The base of memento's pydantic records, their random ids and their UTC time stamps.

Example:
    >>> from memento.core.record import new_id
    >>> len(new_id("n-"))
    14
"""

from __future__ import annotations

import datetime as dt
import uuid

from pydantic import BaseModel, ConfigDict

__all__ = ["new_id", "utcnow"]


def new_id(prefix: str = "") -> str:
    """A short random identifier, optionally prefixed (``"n-3f2a9c1d"``)."""
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.UTC)


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)
