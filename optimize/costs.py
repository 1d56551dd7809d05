"""The cost of one phase (training or test) of one compared method: LM calls, tokens, judge calls, web, time, dollars.

LM numbers come from a :class:`memento.records.usage.UsageMeter` wrapped around the phase (every role, thread-safe);
searches and fetches from the programs' trajectories; dollars from litellm's local model cost map when every role
that spent tokens has a known price, else ``None`` (tokens only). The prices are litellm's local model cost map,
read from the JSON file litellm ships (importing litellm itself takes about ten seconds).

Example:
    >>> from memento.optimize.costs import PhaseCost
    >>> from memento.core.types import Usage
    >>> cost = PhaseCost.from_usage(Usage(lm_calls=3, prompt_tokens=90, completion_tokens=12), wall_seconds=1.5)
    >>> cost.lm_calls, cost.dollars is None
    (3, True)
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memento.core.types import StageUsage, Usage

__all__ = ["PhaseCost", "MethodCosts", "role_models", "price_usage", "model_price"]

logger = logging.getLogger(__name__)


class PhaseCost(BaseModel):
    """What one phase spent.

    ``lm_calls`` counts every billed LM request of every role (agent, judge, reflection, curator); ``judge_calls``
    is the part made by the ``judge_lm`` role, reported separately. ``cached_lm_calls`` were served by DSPy's cache
    and reached no server. ``dollars`` is ``None`` when a model's price is unknown.
    """

    model_config = ConfigDict(extra="forbid")

    lm_calls: int = 0
    judge_calls: int = 0
    cached_lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    searches: int = 0
    fetches: int = 0
    wall_seconds: float = 0.0
    dollars: float | None = None
    by_role: dict[str, StageUsage] = Field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def from_usage(
        cls,
        usage: Usage,
        *,
        wall_seconds: float,
        searches: int | None = None,
        fetches: int | None = None,
        models: dict[str, str] | None = None,
    ) -> PhaseCost:
        """Build from a meter's :class:`Usage`; ``searches``/``fetches`` default to the usage's own counts."""
        return cls(
            lm_calls=usage.lm_calls,
            judge_calls=usage.judge_calls,
            cached_lm_calls=usage.cached_lm_calls,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            searches=usage.searches if searches is None else searches,
            fetches=usage.fetches if fetches is None else fetches,
            wall_seconds=round(wall_seconds, 3),
            dollars=price_usage(usage, models or {}),
            by_role={k: v.model_copy() for k, v in usage.by_role.items()},
        )

    def plus(self, other: PhaseCost) -> PhaseCost:
        """The sum of two phases (dollars stay ``None`` if either is unknown)."""
        by_role = {k: v.model_copy() for k, v in self.by_role.items()}
        for key, val in other.by_role.items():
            cur = by_role.setdefault(key, StageUsage())
            cur.lm_calls += val.lm_calls
            cur.prompt_tokens += val.prompt_tokens
            cur.completion_tokens += val.completion_tokens
            cur.cached_calls += val.cached_calls
        dollars = None if self.dollars is None or other.dollars is None else self.dollars + other.dollars
        return PhaseCost(
            lm_calls=self.lm_calls + other.lm_calls,
            judge_calls=self.judge_calls + other.judge_calls,
            cached_lm_calls=self.cached_lm_calls + other.cached_lm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            searches=self.searches + other.searches,
            fetches=self.fetches + other.fetches,
            wall_seconds=round(self.wall_seconds + other.wall_seconds, 3),
            dollars=dollars,
            by_role=by_role,
        )


class MethodCosts(BaseModel):
    """A method's costs split into its training and its test phase."""

    model_config = ConfigDict(extra="forbid")

    train: PhaseCost = Field(default_factory=PhaseCost)
    test: PhaseCost = Field(default_factory=PhaseCost)

    @property
    def total(self) -> PhaseCost:
        return self.train.plus(self.test)


def role_models(roles: Any) -> dict[str, str]:
    """``{role: model string}`` of a :class:`memento.llm.lm.Roles` (empty for ``None``)."""
    if roles is None:
        return {}
    return {name: str(getattr(lm, "model", "")) for name, lm in roles.items()}


@functools.lru_cache(maxsize=1)
def _cost_map() -> dict[str, Any]:
    """litellm's local model cost map, read from the JSON litellm ships (without importing litellm: ~10 s)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return {}
    path = Path(spec.origin).parent / "model_prices_and_context_window_backup.json"
    try:
        table: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return table
    except (OSError, ValueError) as exc:
        logger.warning("cannot read litellm's model cost map %s: %s", path, exc)
        return {}


def model_price(model: str) -> tuple[float, float] | None:
    """``(dollars per prompt token, dollars per completion token)`` of a model string, or ``None`` if unknown.

    ``openai/gpt-4o-mini`` is looked up as given, then without its provider prefix, as litellm does.
    """
    prices = _cost_map()
    for key in (model, model.split("/", 1)[-1]):
        entry = prices.get(key)
        if isinstance(entry, dict) and "input_cost_per_token" in entry and "output_cost_per_token" in entry:
            return float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"])
    return None


def _price(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    price = model_price(model)
    if price is None:
        return None
    return prompt_tokens * price[0] + completion_tokens * price[1]


def price_usage(usage: Usage, models: dict[str, str]) -> float | None:
    """Dollars spent by a usage, pricing each role's tokens at its model's price (``None`` when any is unknown).

    Roles are the keys of ``usage.by_role``; a key that is not in ``models`` is taken to be a model string itself
    (that is how :class:`memento.records.usage.UsageMeter` reports an LM outside the role map).
    """
    total = 0.0
    for role, stage in usage.by_role.items():
        if stage.prompt_tokens == 0 and stage.completion_tokens == 0:
            continue
        model = models.get(role, role)
        price = _price(model, stage.prompt_tokens, stage.completion_tokens)
        if price is None:
            logger.debug("no price known for %s; reporting tokens only", model)
            return None
        total += price
    return round(total, 6)
