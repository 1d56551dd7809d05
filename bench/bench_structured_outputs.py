"""Parse failures per stage with structured outputs on and off, on the same real model (issue 21 item 3).

Runs the Adaptive Exploration Tree on the first N multi-hop questions of ``examples/multihop`` over the shipped
offline corpus twice with the same model: ``structured_outputs = auto`` (JSON adapter, the signature's schema as
``response_format``, decoded under the schema) and ``off`` (DSPy's ChatAdapter, its JSON fallback included). Every
LM call is logged (``--log-lm`` format) and the rates come from the logs alone: per stage, the LM calls whose reply
did not parse (``parsed`` false) over the calls that were parsed, and the stage failures (a reply that failed even
after the retry / fallback, so the stage recorded a failure).

The model is the bundled SmolLM2-135M-Instruct (``--lm local``) unless ``--lm`` names another (``local/<gguf>``, or
``openai/<name> --api-base URL`` for a server)::

    MEMENTO_LOCAL_THREADS=1 python bench/bench_structured_outputs.py --questions 3
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "multihop" / "corpus.jsonl"
QUESTIONS = ROOT / "examples" / "multihop" / "questions.jsonl"


def run_mode(mode: str, args: argparse.Namespace, questions: list[str], log: Path, work: Path) -> dict[str, Any]:
    """Run the program on every question with one structured-outputs mode; returns wall time and failures."""
    import memento
    from memento.cli.commands.run import resolve_task
    from memento.core.config import load_settings
    from memento.programs.registry import build_program
    from memento.records.lm_log import LMCallLog

    role = {"model": args.lm, "structured_outputs": mode, "cache": False}
    if args.api_base:
        role["api_base"] = args.api_base
    settings = load_settings(
        flags={
            "lm": role,
            "web": {"corpus": str(CORPUS), "cache_dir": str(work / "web")},
            "budgets": {"initial_questions": 2, "total_questions": 3, "steps_per_question": 2},
            "run": {"threads": 1},
        }
    )
    roles = memento.configure(settings)
    task = resolve_task("multihop", roles=roles, threads=1)
    program = build_program(args.method, task=task, settings=settings, roles=roles, memory_dir=work / f"mem-{mode}")
    started = time.perf_counter()
    stage_failures: Counter[str] = Counter()
    with LMCallLog(log, roles=roles):
        for question in questions:
            trajectory = program(question=question).trajectory
            for node in trajectory.nodes:
                if node.status == "failed" and "AdapterParseError" in str(node.error or ""):
                    stage_failures["solve" if node.parent_id is not None else "decompose"] += 1
            if trajectory.error and "AdapterParseError" in trajectory.error:
                stage_failures["answer"] += 1
    return {"seconds": time.perf_counter() - started, "stage_failures": stage_failures}


def rates(log: Path) -> dict[str, tuple[int, int]]:
    """Per stage: (calls whose reply was parsed, calls whose reply did not parse)."""
    out: dict[str, list[int]] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["parsed"] is None:
            continue
        counts = out.setdefault(str(record["stage"]), [0, 0])
        counts[0] += 1
        counts[1] += 0 if record["parsed"] else 1
    return {stage: (calls, failed) for stage, (calls, failed) in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lm", default="local")
    parser.add_argument("--api-base", default=None)
    parser.add_argument("--method", default="aet")
    parser.add_argument("--questions", type=int, default=3)
    args = parser.parse_args()
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()[: args.questions]]
    questions = [row["question"] for row in rows]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        results, tables = {}, {}
        for mode in ("auto", "off"):
            log = work / f"{mode}.jsonl"
            results[mode] = run_mode(mode, args, questions, log, work)
            tables[mode] = rates(log)
    stages = sorted(set(tables["auto"]) | set(tables["off"]))
    print(f"model {args.lm}, method {args.method}, {len(questions)} questions (budgets 2/3/2)")
    print(f"{'stage':<12} {'on: calls':>9} {'failed':>6} {'rate':>6}   {'off: calls':>10} {'failed':>6} {'rate':>6}")
    for stage in stages:
        cells = []
        for mode in ("auto", "off"):
            calls, failed = tables[mode].get(stage, (0, 0))
            cells.append(f"{calls:>9} {failed:>6} {failed / calls if calls else 0:>6.0%}")
        print(f"{stage:<12} {cells[0]}   {cells[1]}")
    for mode in ("auto", "off"):
        label = "on " if mode == "auto" else "off"
        failures = dict(results[mode]["stage_failures"]) or "none"
        print(f"structured outputs {label}: {results[mode]['seconds']:.0f} s, stage failures: {failures}")


if __name__ == "__main__":
    main()
