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
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from memento.cli.commands._common import cli_errors, console
from memento.cli.commands._observe import observe
from memento.cli.commands._options import Flags, LimitOpt, MetricOpt, TaskOpt, with_flags
from memento.core.errors import ConfigError, DataError
from memento.utils.files import save_program

__all__ = ["register", "optimize_curator_command"]

PROGRAM_FILE = "program.json"


@cli_errors
@with_flags("lm", "preset", "corpus", "threads", "research", "log_lm", "replay_lm", "payload_tokens",
            "curator_optimizer", "curator_budget", "staged_refresh")  # fmt: skip
def optimize_curator_command(
    task: TaskOpt,
    memory: Annotated[
        str, typer.Option("--memory", help="Memory holding the JitMem bank (jitmem/): a directory or postgresql://.")
    ],
    train: Annotated[Path, typer.Option("--train", help="Labelled examples the curator is tuned on.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory: program.json and curator.json.")],
    limit: LimitOpt = None,
    metric: MetricOpt = "default",
    *,
    flags: Flags,
) -> None:
    """Tune the JitMem curator on the executor's task reward; writes the tuned agent for `memento eval --program`."""
    import memento
    from memento.cli.commands.run import resolve_task
    from memento.optimize.curator_optimizer import optimize_curator
    from memento.programs.registry import build_program

    if not train.exists():
        raise DataError(f"training file not found: {train}")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory")
    from memento.core.presets import apply_preset

    settings = apply_preset(flags.settings(), "jitmem", task)
    optimizer, budget = settings.jitmem.curator_optimizer, settings.jitmem.curator_budget
    roles = memento.configure(settings)
    observe(settings, roles)  # --log-lm: every LM call of this command, until it exits
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
    options = {
        "optimizer": optimizer,
        "budget": budget,
        "reflection_lm": roles.reflection_lm,
        "seed": settings.run.seed,
        "threads": settings.run.threads,
    }
    train_set = [task_spec.preprocess(ex) for ex in examples]
    score = task_spec.make_metric(metric, roles=roles)
    refresh: dict[str, Any] = {}
    if settings.jitmem.staged_refresh:  # half the budget, rebuild the training bank with that curator, the rest
        from memento.optimize.curator_optimizer import optimize_curator_staged

        curator, refresh = optimize_curator_staged(
            agent,
            train_set,
            score,
            rebuild_dir=out / "memory" / "jitmem",
            threshold=settings.trainer.success_threshold,
            **options,
        )
        rebuilt = escape(refresh["rebuilt_bank"])
        console.print(f"staged bank refresh: {refresh['stored']} trajectories in the rebuilt bank {rebuilt}")
    else:
        curator = optimize_curator(agent, train_set, score, **options)
    out.mkdir(parents=True, exist_ok=True)
    save_program(agent, out / PROGRAM_FILE)  # atomic, secrets scrubbed
    after = curator.curate.signature.instructions
    summary = {
        "task": task_spec.name,
        "optimizer": optimizer,
        "budget": budget,
        "train_examples": len(examples),
        "bank": str(memory),
        "staged_refresh": refresh or None,
        "changed": after != before,
        "instructions": after,
    }
    from memento.utils.files import atomic_write_text

    atomic_write_text(out / "curator.json", json.dumps(summary, indent=2))
    console.print(
        f"curator instructions {'changed' if after != before else 'unchanged'} ({optimizer}, budget {budget})"
    )
    console.print(escape(after[:600]))
    # every flag that shaped the tuned agent (corpus, payload budget, models...) is repeated, so the eval reproduces it
    read = out / "memory" if refresh else memory  # the refreshed bank is the one the tuned curator learned on
    again = ["memento", "eval", "--task", task_spec.name, "--method", "jitmem", "--memory", str(read)]
    again += ["--program", str(out / PROGRAM_FILE), "--data", "TEST_DATA", *flags.argv()]
    if metric != "default":
        again += ["--metric", metric]
    console.print(f"reload: {escape(shlex.join(again))}", soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `optimize-curator` to the CLI."""
    app.command("optimize-curator")(optimize_curator_command)
