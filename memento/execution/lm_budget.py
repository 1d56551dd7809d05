"""One LM budget for a Ray cluster: a named actor grants permits per role, so ``max_concurrency`` and
``requests_per_minute`` hold across every process of a run (the driver and each node's workers).

Under the threads executor :mod:`memento.llm.lm_limiter` bounds a role's requests inside one process. Under the Ray
executor every process of the run asks one actor instead: :class:`LMBudget` keeps one
:class:`~memento.llm.lm_limiter.LMLimiter` per limited role and grants a permit per request; :class:`BudgetClient` is
what :func:`memento.llm.lm_limiter.limiter_for` hands :class:`memento.llm.lm.MementoLM` in each process. A permit is
asked for with a short wait and asked again, so a cancel (Ctrl-C on the driver, a cancel sent to a worker) is seen
between asks and an abandoned ask holds nothing. A granted permit is a lease: a process that dies while holding one (a
node lost, a worker killed) never gives it back, so the actor takes it back once the lease has run for ``lease_seconds``
(default 10 minutes, far above one LM request); a late release of a lease already taken back is ignored.

Example:
    >>> budget = start_budget({"lm": (2, None)}, name="memento-budget-x")  # doctest: +SKIP
    >>> client = BudgetClient(budget, roles={"lm"})  # doctest: +SKIP
    >>> with client.limiter("lm").slot():  # doctest: +SKIP
    ...     ...  # one request of role lm: at most 2 in flight across the cluster
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from memento.core.cancel import check_cancelled
from memento.llm.lm_limiter import LMLimiter

__all__ = ["LMBudget", "BudgetClient", "role_limits", "start_budget"]

logger = logging.getLogger(__name__)

_ASK_SECONDS = 0.5  # one ask waits this long in the actor at most; the caller checks for a cancel and asks again
LEASE_SECONDS = 600.0  # a permit not given back within this long is taken back (its holder is presumed dead)


class LMBudget:
    """The budget actor's class (wrapped with ``ray.remote`` by :func:`start_budget`): one limiter per role.

    Args:
        limits: ``{role: (max_concurrency, requests_per_minute)}``; roles not listed are unbounded.
        lease_seconds: how long a granted permit may be held before the actor takes it back.

    Example:
        >>> budget = LMBudget({"lm": (1, None)}, lease_seconds=60)
        >>> permit = budget.acquire("lm", 0.1)
        >>> budget.acquire("lm", 0.1) is None  # the one permit is held
        True
        >>> budget.release("lm", permit)
    """

    def __init__(
        self, limits: dict[str, tuple[int | None, float | None]], *, lease_seconds: float = LEASE_SECONDS
    ) -> None:
        self.limiters = {
            role: LMLimiter(max_concurrency=conc, requests_per_minute=rpm) for role, (conc, rpm) in limits.items()
        }
        self.lease_seconds = lease_seconds
        self.leases: dict[int, tuple[str, float]] = {}  # permit -> (role, when its lease ends, monotonic)
        self.expired: dict[str, int] = {role: 0 for role in self.limiters}  # leases taken back, per role
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def _reclaim(self) -> None:
        """Take back every permit whose lease has ended (its holder never released it)."""
        now = time.monotonic()
        with self._lock:
            ended = [(permit, role) for permit, (role, until) in self.leases.items() if until <= now]
            for permit, _ in ended:
                del self.leases[permit]
        for permit, role in ended:
            self.expired[role] += 1
            self.limiters[role].release()
            logger.warning("LM permit %d of role %s taken back: not released within %.0f s", permit, role,
                           self.lease_seconds)  # fmt: skip

    def acquire(self, role: str, wait: float) -> int | None:
        """A permit for one request of ``role`` within ``wait`` seconds (``None``: none yet, ask again)."""
        self._reclaim()
        if not self.limiters[role].acquire(timeout=wait):
            return None
        with self._lock:
            permit = next(self._ids)
            self.leases[permit] = (role, time.monotonic() + self.lease_seconds)
        return permit

    def release(self, role: str, permit: int | None = None) -> None:
        """Give a permit back; a permit whose lease already ended (and was taken back) is not released twice."""
        if permit is not None:
            with self._lock:
                if self.leases.pop(permit, None) is None:
                    return
        self.limiters[role].release()

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per role: the limits, requests in flight now, the peak and the permits granted."""
        return {
            role: {
                "max_concurrency": lim.max_concurrency,
                "requests_per_minute": lim.requests_per_minute,
                "in_flight": lim.in_flight,
                "peak": lim.peak,
                "granted": lim.granted,
                "expired": self.expired[role],
            }
            for role, lim in self.limiters.items()
        }


def role_limits(settings: Any) -> dict[str, tuple[int | None, float | None]]:
    """The limited roles of ``settings``: ``{role: (max_concurrency, requests_per_minute)}``."""
    from memento.core.config import ROLES

    out = {}
    for name in ROLES:
        role = settings.role(name)
        if role.max_concurrency is not None or role.requests_per_minute is not None:
            out[name] = (role.max_concurrency, role.requests_per_minute)
    return out


def start_budget(
    limits: dict[str, tuple[int | None, float | None]], *, name: str, lease_seconds: float = LEASE_SECONDS
) -> Any:
    """Start the budget actor ``name`` on the connected cluster (a threaded actor: each waiting ask holds a thread)."""
    import ray

    actor = ray.remote(LMBudget).options(name=name, num_cpus=0, max_concurrency=512)
    return actor.remote(limits, lease_seconds=lease_seconds)


class _RemoteSlot:
    """The limiter of one role as :class:`memento.llm.lm.MementoLM` uses it: ``with limiter.slot(): request``."""

    def __init__(self, actor: Any, role: str) -> None:
        self.actor = actor
        self.role = role

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        import ray

        while True:
            check_cancelled()
            permit = ray.get(self.actor.acquire.remote(self.role, _ASK_SECONDS))
            if permit is not None:
                break
        try:
            yield
        finally:
            ray.get(self.actor.release.remote(self.role, permit))


class BudgetClient:
    """A process's view of the cluster budget: :meth:`limiter` is a :func:`memento.llm.lm_limiter.set_limiter_source`.

    Args:
        actor: the :class:`LMBudget` actor handle.
        roles: the roles the budget limits (others get no limiter: unbounded, no round trip).
    """

    def __init__(self, actor: Any, *, roles: set[str]) -> None:
        self.actor = actor
        self.roles = set(roles)
        self._slots = {role: _RemoteSlot(actor, role) for role in self.roles}

    def limiter(self, role: str) -> _RemoteSlot | None:
        return self._slots.get(role)

    def stats(self) -> dict[str, dict[str, Any]]:
        """The actor's :meth:`LMBudget.stats`."""
        import ray

        return dict(ray.get(self.actor.stats.remote()))
