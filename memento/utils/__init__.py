"""memento.utils: small helpers that know nothing of memento's concepts: text, atomic files, BM25, optional
extras, secret scrubbing and lazy package exports. Import each from its module."""

__all__ = [
    "bm25",
    "extras",
    "files",
    "lazy_exports",
    "scrub",
    "text",
]
