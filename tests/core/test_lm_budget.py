"""The cluster's LM budget (memento.execution.lm_budget.LMBudget, the class behind the budget actor): permits are
leases, so a
holder that dies with a permit does not hold it for the rest of the run."""

from __future__ import annotations

import threading
import time

from memento.execution.lm_budget import LMBudget


def test_a_permit_never_released_is_taken_back_when_its_lease_ends_and_its_late_release_is_ignored():
    budget = LMBudget({"lm": (1, None)}, lease_seconds=0.3)
    dead = budget.acquire("lm", 0.1)  # its holder dies: never released
    assert dead is not None
    assert budget.acquire("lm", 0.05) is None  # the role's one permit is held
    time.sleep(0.35)
    alive = budget.acquire("lm", 0.1)  # the lease ended: the permit was taken back and granted again
    assert alive is not None and alive != dead
    stats = budget.stats()["lm"]
    assert stats["in_flight"] == 1 and stats["expired"] == 1 and stats["granted"] == 2
    budget.release("lm", dead)  # the dead holder's release arrives late: ignored, the live permit is still held
    assert budget.stats()["lm"]["in_flight"] == 1
    assert budget.acquire("lm", 0.05) is None
    budget.release("lm", alive)
    assert budget.stats()["lm"]["in_flight"] == 0


def test_a_waiting_ask_gets_a_permit_taken_back_from_a_dead_holder():
    budget = LMBudget({"lm": (1, None)}, lease_seconds=0.2)
    assert budget.acquire("lm", 0.1) is not None  # never released
    got: list[int | None] = []

    def ask() -> None:  # as a BudgetClient does: short asks, asked again
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            permit = budget.acquire("lm", 0.05)
            if permit is not None:
                got.append(permit)
                return

    waiter = threading.Thread(target=ask)
    waiter.start()
    waiter.join(timeout=60)
    assert len(got) == 1 and budget.stats()["lm"]["expired"] == 1


def test_permits_released_in_time_are_not_taken_back_and_the_limit_holds():
    budget = LMBudget({"lm": (2, None)}, lease_seconds=60)
    first, second = budget.acquire("lm", 0.1), budget.acquire("lm", 0.1)
    assert first is not None and second is not None and budget.acquire("lm", 0.05) is None
    budget.release("lm", first)
    third = budget.acquire("lm", 0.1)
    assert third is not None
    stats = budget.stats()["lm"]
    assert stats["in_flight"] == 2 and stats["peak"] == 2 and stats["expired"] == 0
