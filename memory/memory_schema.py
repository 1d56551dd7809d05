"""The layout of MEMENTO's memory database (``memory.db``, or the ``memento`` schema of a PostgreSQL database):
items, versions, the append-only change log, checkpoints and meta; its schema version and migrations.

Example:
    >>> from memento.memory.memory_schema import memory_exists
    >>> memory_exists("/nonexistent")
    False
"""

from __future__ import annotations

from memento.memory.backends import part_exists
from memento.memory.location import LocationLike

__all__ = ["DB_NAME", "SCHEMA_VERSION", "SCHEMA", "FTS_STORES", "DROP_FTS", "memory_exists"]


DB_NAME = "memory.db"

#: 2 adds ``items.dated`` (the ISO date of an item's evidence, NULL: undated); older databases are migrated on a
#: writable open, and a read-only open of one reads every item as undated. 3: no FTS5 tables (lexical retrieval is
#: memory/text_index.py, the same on every backend; a writable open drops them)
SCHEMA_VERSION = 3

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    rowid {serial},
    store TEXT NOT NULL,
    id TEXT NOT NULL,
    text TEXT NOT NULL DEFAULT '',
    entity TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'active',
    weight {real} NOT NULL DEFAULT 0,
    batch INTEGER NOT NULL DEFAULT 0,
    tasks TEXT NOT NULL DEFAULT '',
    data TEXT NOT NULL,
    dated TEXT,
    UNIQUE (store, id)
);
CREATE INDEX IF NOT EXISTS items_rank ON items (store, status, weight DESC);
CREATE INDEX IF NOT EXISTS items_entity ON items (store, entity);
CREATE TABLE IF NOT EXISTS changes (
    seq {serial},
    batch INTEGER,
    op TEXT NOT NULL,
    store TEXT NOT NULL,
    item_id TEXT NOT NULL,
    before TEXT,
    after TEXT,
    at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS versions (
    version BIGINT PRIMARY KEY,
    parent BIGINT,
    batch BIGINT,
    end_seq BIGINT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'committed'
);
CREATE TABLE IF NOT EXISTS checkpoints (
    key TEXT PRIMARY KEY,
    version BIGINT,
    value TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS changes_item ON changes (seq, store, item_id);
"""

FTS_STORES: tuple[str, ...] = ("craft", "decomposition", "web_action", "facts")

# SQLite memories written before version 2 kept an FTS5 index per store, maintained by triggers: dropped on open
DROP_FTS = "".join(
    f"DROP TRIGGER IF EXISTS fts_{store}_{op}; " for store in FTS_STORES for op in ("ai", "ad", "au")
) + "".join(f"DROP TABLE IF EXISTS fts_{store}; " for store in FTS_STORES)


def memory_exists(location: LocationLike) -> bool:
    """Whether a MEMENTO memory is stored at ``location`` (``memory.db`` in the directory, or the ``items`` table of
    its PostgreSQL schema); nothing is created."""
    return part_exists(location, DB_NAME, "items", what="memory")
