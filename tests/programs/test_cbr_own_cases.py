"""A run never reads its own executor tool cases, even when a parallel sub-task of the run stores one while another
sub-task retrieves (the race behind a flaky test_executor_bank_never_shows_a_task_its_own_tool_cases)."""

from __future__ import annotations

from memento.core.types import Case
from memento.programs.case_based_agent import _retrieve_not_own


class RacingBank:
    """Lists the run's cases, then a parallel sub-task stores one before the retrieval runs."""

    def __init__(self) -> None:
        self.cases = {
            "own-1": Case(id="own-1", task_text="s1", plan="p", reward=1.0, trajectory_ref="t-run"),
            "other": Case(id="other", task_text="s9", plan="p", reward=1.0, trajectory_ref="t-other"),
        }
        self.listings = 0

    def case_ids_for_ref(self, ref: str) -> list[str]:
        self.listings += 1
        if self.listings == 1:  # right after this listing, another sub-task of the run stores its case
            ids = [cid for cid, case in self.cases.items() if case.trajectory_ref == ref]
            self.cases["own-2"] = Case(id="own-2", task_text="s2", plan="p", reward=1.0, trajectory_ref=ref)
            return ids
        return [cid for cid, case in self.cases.items() if case.trajectory_ref == ref]

    def retrieve(self, query, k, *, exclude_ids=(), dates=None):
        ranked = [case for cid, case in sorted(self.cases.items(), reverse=True) if cid not in set(exclude_ids)]
        return [(case, 1.0) for case in ranked[:k]]


def test_a_case_stored_by_a_parallel_sub_task_of_the_run_is_not_retrieved():
    bank = RacingBank()
    hits = _retrieve_not_own(bank, "s", 2, ref="t-run")  # type: ignore[arg-type]  # a bank racing a writer
    assert [case.id for case, _ in hits] == ["other"]
    assert bank.listings >= 3  # listed again after the retrieval, which was repeated without the new case


def test_without_a_race_one_retrieval_suffices():
    bank = RacingBank()
    bank.listings = 1  # no case is added any more
    hits = _retrieve_not_own(bank, "s", 1, ref="t-run")  # type: ignore[arg-type]  # a bank racing a writer
    assert [case.id for case, _ in hits] == ["other"] and bank.listings == 3
