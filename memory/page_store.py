"""A trajectory bank's page store: every page text a stored trajectory read, kept once by its sha256.

Example:
    >>> store = PageStore(db)  # doctest: +SKIP
    >>> store.load(record).pages()[0].text_loaded  # doctest: +SKIP
    True
"""

from __future__ import annotations

from typing import Any

from memento.core.types import Trajectory
from memento.memory.database import Database
from memento.utils.scrub import scrub

__all__ = ["PageStore", "page_str", "pages_of"]


def page_str(value: Any) -> str:
    """A stored page text (PostgreSQL keeps UTF-8 bytes)."""
    return bytes(value).decode() if isinstance(value, bytes | memoryview) else str(value)


def pages_of(trajectory: Trajectory) -> dict[str, str]:
    """The page texts a trajectory holds in memory, by hash (pages read back without their text are skipped)."""
    return {page.sha256: page.text for page in trajectory.pages() if page.sha256 and page.text and page.text_loaded}


class PageStore:
    """The content-addressed page texts of a trajectory bank (the ``pages`` table, keyed by sha256): a page read by
    many trajectories is stored once; a stored record carries each page's hash and length, and :meth:`load` puts
    the text back.

    Args:
        db: the bank's database.
        available: ``False`` for a read-only bank written before the page store (its records carry no hashes).
    """

    def __init__(self, db: Database, *, available: bool = True) -> None:
        self.db = db
        self.available = available

    def text(self, sha256: str) -> str | None:
        """The stored text of a page by its content hash (``None`` when no such page is stored)."""
        if not self.available:
            return None
        rows = self.db.query("SELECT text FROM pages WHERE sha256 = ?", (sha256,))
        return page_str(rows[0][0]) if rows else None

    def store(self, pages: dict[str, str]) -> None:
        """Insert page texts not stored yet (inside the caller's transaction)."""
        as_bytes = self.db.backend != "sqlite"
        self.db.executemany(
            "INSERT INTO pages(sha256, chars, text) VALUES (?, ?, ?) ON CONFLICT (sha256) DO NOTHING",
            [(sha, len(text), scrub(text).encode() if as_bytes else scrub(text)) for sha, text in pages.items()],
        )

    def load(self, record: str) -> Trajectory:
        """A stored record as a trajectory with its pages' full text put back (from the page store)."""
        trajectory = Trajectory.model_validate_json(record)
        pages = [page for page in trajectory.pages() if page.sha256 and not page.text_loaded]
        if pages and self.available:
            wanted = sorted({page.sha256 for page in pages})
            marks = ",".join("?" * len(wanted))
            rows = self.db.query(f"SELECT sha256, text FROM pages WHERE sha256 IN ({marks})", wanted)
            texts = {sha: page_str(text) for sha, text in rows}
            for page in pages:
                if page.sha256 in texts:
                    page.text = texts[page.sha256]
        return trajectory
