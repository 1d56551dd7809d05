"""``memento memory qgate-stats``: how well the CBR case bank's learned Q-gate predicts rewards, versus cosine.

Registered by :mod:`memento.cli.commands.memory` as ``memento memory qgate-stats --memory DIR``. ``DIR`` is a case bank
directory (holding ``cases.db``) or a memory directory whose ``cbr/`` sub-directory holds the bank (where the ``cbr``
method keeps it). Nothing is written; the model the bank was built with is not loaded.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from memento.cli.commands._common import cli_errors, console, memory_lock
from memento.cli.commands._options import ConfigOpt, NoWaitOpt
from memento.core.config import load_settings
from memento.memory.location import Location, parse_location

__all__ = ["qgate_stats", "qgate_fit", "case_reward", "resolve_bank_dir"]


def resolve_bank_dir(path: str | Path | Location) -> Location:
    """The case bank for ``--memory``: ``path`` itself or ``path/cbr`` (a directory or a PostgreSQL location)."""
    from memento.memory.case_bank import DB_NAME, CaseBankError
    from memento.memory.case_store import bank_exists

    location = parse_location(path)
    for candidate in (location, location / "cbr"):
        if bank_exists(candidate):
            return candidate
    raise CaseBankError(f"no case bank under {location} (looked for {DB_NAME} in it and in {location / 'cbr'})")


def _fmt(value: float) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


@cli_errors
def qgate_stats(
    memory: Annotated[
        str, typer.Option("--memory", help="Case bank, or a memory holding cbr/ (a directory or postgresql://...).")
    ],
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="Only pairs logged in this namespace (default: all).")
    ] = None,
    holdout: Annotated[
        float, typer.Option("--holdout", min=0.05, max=0.9, help="Latest fraction of pairs held out for the refit.")
    ] = 0.2,
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Epochs of the offline refit.")] = 30,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Q-gate AUC on logged (query, case, reward) pairs: prequential, held-out refit, and the cosine baseline."""
    settings = load_settings(config)
    from memento.memory.case_bank import CaseBank, StoredEmbedder
    from memento.memory.q_gate import gate_report

    bank_dir = resolve_bank_dir(memory)
    bank = CaseBank(bank_dir, StoredEmbedder.of(bank_dir), frozen=True, seed=settings.run.seed)
    try:
        pairs = bank.logged_pairs(namespace)
        threshold = settings.trainer.success_threshold  # the one success rule: reward strictly above it
        report = gate_report(pairs, holdout=holdout, epochs=epochs, seed=settings.run.seed, threshold=threshold)
        report.update(
            bank=str(bank_dir),
            namespace=namespace,
            cases=bank.count(namespace) if namespace else sum(bank.count(ns) for ns in bank.namespaces()),
            gate_updates=bank.gate.updates if bank.gate_trained else 0,
        )
    finally:
        bank.close()  # frozen: nothing is written
    if as_json:
        console.print_json(
            json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in report.items()})
        )
        return
    table = Table(title=f"Q-gate on {bank_dir}" + (f" (namespace {namespace})" if namespace else ""))
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        ("cases", str(report["cases"])),
        ("logged pairs", str(report["pairs"])),
        (f"useful share (reward > {report['threshold']:g})", _fmt(report["positive_rate"])),
        ("online gate updates", str(report["gate_updates"])),
        (
            f"prequential AUC ({report['prequential_pairs']} pairs scored before learning)",
            _fmt(report["prequential_auc"]),
        ),
        (f"held-out AUC, refit gate (latest {report['holdout_pairs']} pairs)", _fmt(report["holdout_auc"])),
        ("held-out AUC, cosine", _fmt(report["holdout_cosine_auc"])),
        ("cosine AUC, all pairs", _fmt(report["cosine_auc"])),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)


@cli_errors
def qgate_fit(
    memory: Annotated[Path, typer.Option("--memory", help="Case bank directory, or a memory dir holding cbr/.")],
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Passes over the logged pairs.")] = 20,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="Only pairs logged in this namespace (default: all).")
    ] = None,
    no_wait: NoWaitOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Fit the Q-gate offline on every logged (query, case, reward) pair and save it (``CaseBank.fit_gate``)."""
    with _writable_bank(memory, config, no_wait) as bank:
        report = bank.fit_gate(epochs=epochs, namespace=namespace)
    console.print(
        f"Q-gate fitted on {report['pairs']} logged pairs ({report['epochs']} epochs, final loss "
        f"{_fmt(report['final_loss'])}); saved in {bank.dir}"
    )


@cli_errors
def case_reward(
    memory: Annotated[Path, typer.Option("--memory", help="Case bank directory, or a memory dir holding cbr/.")],
    case: Annotated[str, typer.Option("--case", help="The case's id (memento memory stats / the run's cbr record).")],
    reward: Annotated[float, typer.Option("--reward", min=0.0, max=1.0, help="Its new reward in [0, 1].")],
    no_wait: NoWaitOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Change a stored case's reward, e.g. a judgement that came later (``CaseBank.update_reward``)."""
    with _writable_bank(memory, config, no_wait) as bank:
        before = bank.get(case).reward
        after = bank.update_reward(case, reward).reward
    console.print(f"case {case}: reward {before:.2f} -> {after:.2f}")


@contextlib.contextmanager
def _writable_bank(memory: Path, config: Path | None, no_wait: bool) -> Iterator[Any]:
    """The case bank under ``memory`` opened for writing, under the lock ``cbr`` runs take (one writer), without its
    embedding model (neither command embeds text); the gate's options and seed from the settings."""
    from memento.memory.case_bank import CaseBank, StoredEmbedder

    settings = load_settings(config)
    bank_dir = resolve_bank_dir(memory)
    with memory_lock(memory, no_wait=no_wait):
        bank = CaseBank(
            bank_dir,
            StoredEmbedder.of(bank_dir),
            seed=settings.run.seed,
            gate_options={"lr": settings.cbr.qgate_lr, "hidden": settings.cbr.qgate_hidden},
        )
        try:
            yield bank
        finally:
            bank.close()
