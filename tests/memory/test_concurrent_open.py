"""Processes opening a new memory at once (three `memento run` started together) create each part once: the
schema, the columns added after the first layout and the indexes, on both backends (a run once failed with
'column "forgotten_at" of relation "trajectories" already exists' when two banks added the columns at once)."""

from __future__ import annotations

import threading

from memento.memory.case_bank import CaseBank
from memento.memory.embedder import HashingEmbedder
from memento.memory.sqlite_store import SQLiteStore
from memento.memory.trajectory_bank import TrajectoryBank


def _open_all(location) -> None:
    SQLiteStore(location).close()
    CaseBank(location / "cbr", HashingEmbedder(dim=16)).close()
    TrajectoryBank(location / "jitmem").close()


def test_stores_opened_at_once_on_a_new_location_are_created_once(location) -> None:
    from memento.memory.location import parse_location

    for trial in range(4):
        where = parse_location(location(f"fresh{trial}"))
        errors: list[BaseException] = []
        gate = threading.Barrier(4)

        def open_stores(where=where, gate=gate, errors=errors) -> None:
            gate.wait(timeout=60)
            try:
                _open_all(where)
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(exc)

        threads = [threading.Thread(target=open_stores) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert errors == [], f"trial {trial}: {errors[0]!r}"
        bank = TrajectoryBank(where / "jitmem")
        assert {"dated", "forgotten_at"} <= bank._db.columns("trajectories")
        bank.close()
