"""memento.memory: persistent stores — MEMENTO's M1–M4 (MementoMemory), the CBR case bank with its Q-gate,
JitMem's trajectory bank — and the embedders they share. torch, faiss and sentence-transformers load lazily.

Its public names are imported on first use (:mod:`memento.utils.lazy_exports`): importing one module of the package does
not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.utils.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memento.memory.canonicalizer import Canonicalizer
    from memento.memory.case_bank import CaseBank
    from memento.memory.craft_knowledge import CraftKnowledge
    from memento.memory.domain_store import DomainStore
    from memento.memory.embedder import Embedder, HashingEmbedder, SentenceTransformerEmbedder, default_embedder
    from memento.memory.forget import ForgetQuery, forget_items, memory_items
    from memento.memory.memento_memory import MementoMemory, MemoryBudgets, MemoryView, open_memory
    from memento.memory.memory_guard import MemoryGuard
    from memento.memory.pins import memory_pins
    from memento.memory.rule_book import RuleBook
    from memento.memory.trajectory_bank import TrajectoryBank

_HOMES: dict[str, str] = {
    "Canonicalizer": "canonicalizer",
    "CaseBank": "case_bank",
    "CraftKnowledge": "craft_knowledge",
    "DomainStore": "domain_store",
    "Embedder": "embedder",
    "HashingEmbedder": "embedder",
    "SentenceTransformerEmbedder": "embedder",
    "default_embedder": "embedder",
    "ForgetQuery": "forget",
    "forget_items": "forget",
    "memory_items": "forget",
    "MementoMemory": "memento_memory",
    "MemoryBudgets": "memento_memory",
    "MemoryView": "memento_memory",
    "open_memory": "memento_memory",
    "MemoryGuard": "memory_guard",
    "memory_pins": "pins",
    "RuleBook": "rule_book",
    "TrajectoryBank": "trajectory_bank",
}

__all__ = [
    "Canonicalizer",
    "CaseBank",
    "CraftKnowledge",
    "DomainStore",
    "Embedder",
    "ForgetQuery",
    "HashingEmbedder",
    "MementoMemory",
    "MemoryBudgets",
    "MemoryGuard",
    "MemoryView",
    "RuleBook",
    "SentenceTransformerEmbedder",
    "TrajectoryBank",
    "default_embedder",
    "forget_items",
    "memory_items",
    "memory_pins",
    "open_memory",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
