"""The ``memento optimize-curator`` command: tune the JitMem curator's instructions (GEPA or MIPROv2) on a bank.

The executor's immediate task reward (the task's metric on the answer it gives with the curated payload) scores each
candidate curator, as the JitMem paper trains its curator; only the curator's predictor changes, and nothing is
written to the bank. The tuned agent is saved as a program state that ``memento eval --method jitmem --program``
reloads.

Example:
    memento optimize-curator --task multihop --train train.jsonl --memory runs/mem --optimizer gepa --budget 40 \\
        --lm openai/gpt-4o-mini --corpus examples/multihop/corpus.jsonl --out runs/curator
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.markup import escape

from memento.commands._common import (
    APIBaseOpt,
    ConfigOpt,
    JudgeLMOpt,
    LMOpt,
    cli_errors,
    console,
    settings_from_flags,
)
from memento.commands._method_options import JitMemPayloadTokens, section
from memento.errors import ConfigError, DataError
from memento.files import save_program

__all__ = ["register", "optimize_curator_command"]

PROGRAM_FILE = "program.json"


@cli_errors
def optimize_curator_command(
    task: Annotated[str, typer.Option("--task", help="Task spec: qa, multihop, legal, opinion, sales.")],
    train: Annotated[Path, typer.Option("--train", help="Labelled examples the curator is tuned on.")],
    memory: Annotated[
        Path, typer.Option("--memory", help="Memory directory holding the JitMem bank (jitmem/); read only.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory: program.json and curator.json.")],
    optimizer: Annotated[
        Literal["gepa", "miprov2"], typer.Option("--optimizer", help="gepa (reflective) or miprov2 (proposals).")
    ] = "gepa",
    budget: Annotated[
        int, typer.Option("--budget", min=1, help="GEPA metric calls / MIPROv2 trials (each runs the executor).")
    ] = 40,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Use the first N training examples.")] = None,
    metric: Annotated[str, typer.Option("--metric", help="The task's metric: default, judge, em, f1 ...")] = "default",
    corpus: Annotated[
        Path | None, typer.Option("--corpus", help="Offline corpus: an index directory or a JSONL source.")
    ] = None,
    threads: Annotated[int | None, typer.Option("--threads", min=1, help="Parallel metric calls.")] = None,
    payload_tokens: JitMemPayloadTokens = None,
    config: ConfigOpt = None,
    lm: LMOpt = None,
    api_base: APIBaseOpt = None,
    judge_lm: JudgeLMOpt = None,
) -> None:
    """Tune the JitMem curator on the executor's task reward; writes the tuned agent for `memento eval --program`."""
    import memento
    from memento.commands.run import resolve_task
    from memento.optimize.curator_optimizer import optimize_curator
    from memento.programs.registry import build_program

    if not train.exists():
        raise DataError(f"training file not found: {train}")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory")
    settings = settings_from_flags(
        config,
        lm,
        api_base,
        judge_lm,
        web={"corpus": corpus},
        run={"threads": threads},
        jitmem=section(payload_tokens=payload_tokens),
    )
    roles = memento.configure(settings)
    task_spec = resolve_task(task, roles=roles, threads=settings.run.threads)
    examples = task_spec.load(train, limit=limit)
    if not examples:
        raise DataError(f"no examples in {train}")
    # the bank is opened read-only: optimisation retrieves and curates, it never judges or stores
    agent = build_program("jitmem", task=task_spec, settings=settings, roles=roles, memory_dir=memory, frozen=True)
    if len(agent.bank) == 0:
        raise DataError(
            f"the JitMem bank under {memory} is empty: fill it first (memento compare or run --method jitmem)"
        )
    before = agent.curator.curate.signature.instructions
    curator = optimize_curator(
        agent,
        [task_spec.preprocess(ex) for ex in examples],
        task_spec.make_metric(metric, roles=roles),
        optimizer=optimizer,
        budget=budget,
        reflection_lm=roles.reflection_lm,
        seed=settings.run.seed,
        threads=settings.run.threads,
    )
    out.mkdir(parents=True, exist_ok=True)
    save_program(agent, out / PROGRAM_FILE)  # atomic, secrets scrubbed
    after = curator.curate.signature.instructions
    summary = {
        "task": task_spec.name,
        "optimizer": optimizer,
        "budget": budget,
        "train_examples": len(examples),
        "bank": str(memory),
        "changed": after != before,
        "instructions": after,
    }
    from memento.files import atomic_write_text

    atomic_write_text(out / "curator.json", json.dumps(summary, indent=2))
    console.print(
        f"curator instructions {'changed' if after != before else 'unchanged'} ({optimizer}, budget {budget})"
    )
    console.print(escape(after[:600]))
    console.print(
        f"reload: memento eval --task {task_spec.name} --method jitmem --memory {escape(str(memory))} "
        f"--program {escape(str(out / PROGRAM_FILE))} --data TEST_DATA"
    )


def register(app: typer.Typer) -> None:
    """Add `optimize-curator` to the CLI."""
    app.command("optimize-curator")(optimize_curator_command)
