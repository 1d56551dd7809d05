"""What deadlines, the journal and pinning cost: per LM call, per finished example, per read-only memory open.

* **LM call**: µs per call of a ``dspy.LM`` on an in-process scripted engine (cache off), plain against
  :class:`memento.llm.lm.MementoLM` (cancel check, limiter lookup, and the call run in a worker thread under its
  deadline by :func:`memento.llm.lm_deadline.call_with_deadline`); the ratio is the deadline's cost on the cheapest call
  there is (a real provider's call takes 0.3-30 s).
* **journal**: ms per finished example appended to the evaluation journal (one scrubbed JSON line with its
  trajectory, flush + fsync), against appending the same line with a flush only.
* **pinned open**: ms to open a read-only MEMENTO memory of ``--items`` rules when its head is clean (a read
  snapshot) and when a batch is half applied (the snapshot copied to memory and the batch undone there).

Run: python bench/bench_deadlines.py [--calls 300] [--examples 100] [--items 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from memento.core.types import Node, Trajectory  # noqa: E402
from memento.llm.lm import MementoLM  # noqa: E402
from memento.memory.memento_memory import MementoMemory  # noqa: E402
from memento.metrics.eval_journal import EvalJournal  # noqa: E402
from memento.metrics.evaluation import ExampleResult  # noqa: E402
from memento.testing import ScriptedEngine  # noqa: E402


def per_call_us(lm: dspy.LM, calls: int) -> float:
    lm("warm up")
    started = time.perf_counter()
    for i in range(calls):
        lm(f"question {i}")
    return (time.perf_counter() - started) / calls * 1e6


def _record(index: int, trajectory: Trajectory) -> ExampleResult:
    record = ExampleResult(index=index, id=f"q{index}", prediction={"answer": "the Ouse"}, score=1.0)
    record.trajectory = trajectory
    return record


def journal_ms(examples: int) -> tuple[float, float]:
    """ms per example: the journal (scrubbed line, flush, fsync) and a plain append of the same line (flush only)."""
    from memento.utils.files import scrubbed_json

    trajectory = Trajectory(
        task_text="Which river runs through York?",
        nodes=[Node(id=f"n{i}", question=f"sub-question {i}", answer="the Ouse " * 20) for i in range(20)],
    )
    records = [_record(i, trajectory) for i in range(examples)]
    with tempfile.TemporaryDirectory() as tmp:
        journal = EvalJournal.in_dir(tmp, run_key={"bench": True})
        started = time.perf_counter()
        for record in records:
            journal.append(record)
        synced = time.perf_counter() - started
        journal.close()
        started = time.perf_counter()
        with (Path(tmp) / "plain.jsonl").open("w", encoding="utf-8") as handle:
            for record in records:
                line = {"example": record.model_dump(mode="json"), "trajectory": trajectory.model_dump(mode="json")}
                handle.write(scrubbed_json(line) + "\n")
                handle.flush()
        plain = time.perf_counter() - started
    return synced / examples * 1e3, plain / examples * 1e3


def open_ms(items: int, repeats: int = 5) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        writer = MementoMemory(Path(tmp) / "mem")
        with writer.transaction(batch=1) as tx:
            for i in range(items):
                writer.web_action.add(f"Rule {i}: search the exact title of item {i} in quotes.", batch=1, tx=tx)
        writer.commit_version(batch=1)
        clean = []
        for _ in range(repeats):
            started = time.perf_counter()
            MementoMemory(Path(tmp) / "mem", read_only=True).close()
            clean.append(time.perf_counter() - started)
        with writer.transaction(batch=2) as tx:  # a batch half applied: 10% of the rules changed, none committed
            for i in range(0, items, 10):
                writer.web_action.add(f"Batch 2 rule {i}: check the date.", batch=2, tx=tx)
        half = []
        for _ in range(repeats):
            started = time.perf_counter()
            MementoMemory(Path(tmp) / "mem", read_only=True).close()
            half.append(time.perf_counter() - started)
        writer.close()
    return statistics.median(clean) * 1e3, statistics.median(half) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--items", type=int, default=2000)
    args = parser.parse_args()

    plain_lm = dspy.LM("scripted/x", engine=ScriptedEngine(), cache=False)
    guarded = MementoLM("scripted/x", engine=ScriptedEngine(), cache=False)
    guarded.memento_role = "lm"
    rounds = [(per_call_us(plain_lm, args.calls), per_call_us(guarded, args.calls)) for _ in range(5)]
    plain = min(r[0] for r in rounds)  # alternated rounds, best of 5: the machine is shared and noisy
    deadline = min(r[1] for r in rounds)
    print(f"LM call (best of 5 rounds of {args.calls} calls, scripted engine): plain dspy.LM {plain:.0f} µs, "
          f"MementoLM with deadline {deadline:.0f} µs, ratio {deadline / plain:.2f} "
          f"(+{deadline - plain:.0f} µs per call)")  # fmt: skip

    synced, plain = journal_ms(args.examples)
    print(f"journal ({args.examples} examples, 20-node trajectories): {synced:.2f} ms per example appended with "
          f"fsync, {plain:.2f} ms for the same line without, ratio {synced / plain:.1f}")  # fmt: skip

    clean, half = open_ms(args.items)
    print(f"pinned read-only open ({args.items} rules): clean head {clean:.1f} ms, half-applied batch undone in "
          f"memory {half:.1f} ms, ratio {half / clean:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
