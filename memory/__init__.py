"""memento.memory: persistent stores — MEMENTO's M1–M4 (MementoMemory), the CBR case bank with its Q-gate,
JitMem's trajectory bank — and the embedders they share. torch, faiss and sentence-transformers load lazily."""

from memento.memory.canonicalizer import Canonicalizer
from memento.memory.case_bank import CaseBank
from memento.memory.craft_knowledge import CraftKnowledge
from memento.memory.domain_store import DomainStore
from memento.memory.embedder import Embedder, HashingEmbedder, SentenceTransformerEmbedder, default_embedder
from memento.memory.memento_memory import MementoMemory, MemoryBudgets, MemoryView, open_memory
from memento.memory.rule_book import RuleBook
from memento.memory.trajectory_bank import TrajectoryBank

__all__ = [
    "Canonicalizer",
    "CaseBank",
    "CraftKnowledge",
    "DomainStore",
    "Embedder",
    "HashingEmbedder",
    "MementoMemory",
    "MemoryBudgets",
    "MemoryView",
    "RuleBook",
    "SentenceTransformerEmbedder",
    "TrajectoryBank",
    "default_embedder",
    "open_memory",
]
