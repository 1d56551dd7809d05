"""The structured operation both rule distillers return: add, reinforce, contradict or remove a rule."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["RuleOp"]


class RuleOp(BaseModel):
    """One proposed change to a rule book.

    ``add`` needs ``text``; ``reinforce``, ``contradict`` and ``remove`` name an existing rule by its number in
    the list shown (``rule``).
    """

    op: Literal["add", "reinforce", "contradict", "remove"]
    rule: int | None = Field(default=None, description="number of the existing rule (reinforce/contradict/remove)")
    text: str = Field(default="", description="the new rule (add)")
    reason: str = Field(default="", description="one short justification")
