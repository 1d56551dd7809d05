"""The ``memento data`` commands: build evaluation sets as the papers did.

``memento data legal`` runs MEMENTO's legal protocol (§4.1) on the JUSTICE CSV: the cases decided in 2010 or later,
a leakage filter (a web agent given each case's facts under its search cutoff; a case whose exact outcome it
retrieves is dropped, with its evidence), then a seeded split (60 train / 120 test, seed 42) equal to the one
``memento compare --data kept.csv --n-train 60 --n-test 120 --seed 42`` makes. See
:mod:`memento.optimize.legal_protocol`.

Example:
    memento data legal --data ../shared/data/justice/justice.csv --out runs/legal --lm openai/gpt-4o-mini
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memento.cli.commands._common import cancellable, cli_errors, console, err_console
from memento.cli.commands._options import Flags, LimitOpt, with_flags
from memento.core.errors import ConfigError

__all__ = ["register", "data_app"]

data_app = typer.Typer(help="Build evaluation data sets as the papers did (legal: MEMENTO §4.1).", no_args_is_help=True)


@data_app.command("legal")
@cli_errors
@cancellable
@with_flags("lm", "corpus", "threads", "seed", "log_lm")
def legal(
    data: Annotated[Path, typer.Option("--data", help="The JUSTICE CSV (e.g. shared/data/justice/justice.csv).")],
    out: Annotated[
        Path, typer.Option("--out", help="Directory for kept.csv, dropped.jsonl, train.csv, test.csv, summary.json.")
    ],
    min_term: Annotated[
        int, typer.Option("--min-term", help="Screen cases whose decision term (a range's last year) is this or later.")
    ] = 2010,
    n_train: Annotated[int, typer.Option("--n-train", min=1, help="Training cases of the split.")] = 60,
    n_test: Annotated[int, typer.Option("--n-test", min=1, help="Test cases of the split.")] = 120,
    cutoff_years: Annotated[
        int, typer.Option("--cutoff-years", min=0, help="The search cutoff: January 1st of (term - N).")
    ] = 5,
    max_steps: Annotated[
        int | None,
        typer.Option(
            "--max-steps", min=1, help="Tool steps of the leakage agent per case (default: budgets.steps_per_question)."
        ),
    ] = None,
    limit: LimitOpt = None,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Screen again from scratch instead of resuming OUT/screening.jsonl.")
    ] = False,
    *,
    flags: Flags,
) -> None:
    """MEMENTO's legal protocol: cases of 2010 or later, the leakage filter, the seeded split (60/120, seed 42).

    The leakage agent searches with the configured LM and web (--corpus, else the live web) under each case's
    cutoff, January 1st of (term - 5): JUSTICE holds decision terms, not decision dates. Rerunning the same command
    resumes the screening; cases whose screening failed are tried again.
    """
    import memento
    from memento.cli.commands._observe import observe
    from memento.cli.progress import ScoreProgress
    from memento.core.paths import readable_file, writable_dir
    from memento.optimize.legal_protocol import LegalProtocol
    from memento.programs.leakage_probe import LeakageProbe
    from memento.tasks.legal import LegalTask
    from memento.web.factory import web_tools_factory

    readable_file(data, what="JUSTICE file", error=ConfigError)
    writable_dir(out, what="--out")  # at or under a file: one line, before any work
    settings = flags.settings()
    roles = memento.configure(settings)  # no LM configured: one line naming --lm
    observe(settings, roles)  # --log-lm: every call of the leakage agent
    steps = max_steps or settings.budgets.steps_per_question
    key = {  # what decides a verdict: a journal written under other values is not resumed
        "lm": settings.lm.model,
        "max_steps": steps,
        "web_backend": settings.web.backend,
        "corpus": str(settings.web.corpus) if settings.web.corpus else None,
        "undated": settings.web.undated,
    }
    with ScoreProgress() as bar:
        protocol = LegalProtocol(
            probe=LeakageProbe(web=web_tools_factory(settings), max_steps=steps),
            task=LegalTask(cutoff_years=cutoff_years),
            min_term=min_term,
            n_train=n_train,
            n_test=n_test,
            seed=settings.run.seed,
            threads=settings.run.threads,
            key=key,
            roles=roles,
            on_case=lambda record: bar.advance(
                score=float(record["verdict"] == "dropped"), error=record["verdict"] == "failed"
            ),
        )
        plan = protocol.prepare(data, out, limit=limit, fresh=fresh)
        bar.add("leakage filter (mean: share dropped)", total=len(plan.todo))
        protocol.screen(plan)
    report = protocol.finish(plan)
    for line in describe(report):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if report.failed:
        err_console.print(
            f"memento: {len(report.failed)} cases could not be screened and are left out (first: "
            f"{report.failed[0]}; see {out / 'screening.jsonl'}); rerun the same command to try them again",
            markup=False,
            highlight=False,
        )
    if report.split_error:
        err_console.print(f"memento: error: no split written: {report.split_error}", markup=False, highlight=False)
        raise typer.Exit(1)


def describe(report: Any) -> list[str]:
    """The protocol's outcome in a few lines: counts per stage, the files, the equivalent compare command."""
    c, rules, split = report.counts, report.summary["rules"], report.summary["split"]
    skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(report.skipped.items())) or "none"
    out = report.out_dir
    lines = [
        f"{c['rows']} rows; {c['recent']} with a term of {rules['min_term']} or later; {c['loaded']} usable "
        f"(skipped: {skipped})",
        f"leakage filter: {c['kept']} kept, {c['dropped']} dropped (outcome retrieved before the cutoff), "
        f"{c['failed']} not screened; {c['screened_now']} screened in this run",
        f"cutoff: {rules['cutoff']}",
        f"wrote {out / 'kept.csv'}, {out / 'dropped.jsonl'}, {out / 'summary.json'}",
    ]
    if not report.split_error:
        lines += [
            f"split (seed {split['seed']}): {out / 'train.csv'} ({len(report.train)}), {out / 'test.csv'} "
            f"({len(report.test)}); the same split as: {split['same_as']}",
        ]
    return lines


def register(app: typer.Typer) -> None:
    """Add the `data` command group to the CLI."""
    app.add_typer(data_app, name="data")
