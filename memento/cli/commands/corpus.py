"""The `memento corpus` commands: build an offline corpus index and search it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from memento.cli.commands._common import (
    cli_errors,
    console,
    err_console,
)
from memento.cli.commands._observe import JsonOpt, print_json
from memento.cli.commands._options import ConfigOpt
from memento.core.config import load_settings

if TYPE_CHECKING:
    from memento.web.search_result import SearchResult

__all__ = ["register", "corpus_app"]

corpus_app = typer.Typer(help="Build and search offline corpora (the reproducible local 'web').", no_args_is_help=True)

_MAX_SHOWN_ERRORS = 20


@corpus_app.command("build")
@cli_errors
def build(
    sources: Annotated[
        list[Path],
        typer.Argument(
            help="Corpus files: .jsonl ({doc_id|url, title, text, published}) "
            "or .json (wiki_vital {key: {title, extract}})."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Index directory to (re)build atomically.")],
    strict: Annotated[
        bool, typer.Option("--strict", help="Fail on the first malformed entry instead of skipping.")
    ] = False,
    config: ConfigOpt = None,
) -> None:
    """Build a BM25 index of local documents into DIR (malformed lines are reported with file:line)."""
    from memento.web.offline_corpus import OfflineCorpus

    load_settings(config)  # validates --config and the environment
    shown = 0

    def report(err: Exception) -> None:
        nonlocal shown
        shown += 1
        if shown <= _MAX_SHOWN_ERRORS:
            err_console.print(f"memento: skipped: {err}", markup=False, highlight=False, soft_wrap=True)

    corpus = OfflineCorpus.build(sources, out, strict=strict, on_error=report)
    rep = corpus.report
    if rep.skipped > _MAX_SHOWN_ERRORS:
        err_console.print(
            f"memento: ... and {rep.skipped - _MAX_SHOWN_ERRORS} more malformed entries", markup=False, soft_wrap=True
        )
    console.print(
        f"built {out}: {rep.documents} documents, {rep.skipped} malformed entries skipped, "
        f"{rep.duplicates} duplicate URLs dropped, in {rep.seconds:.2f}s",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@corpus_app.command("search")
@cli_errors
def search(
    corpus: Annotated[
        Path, typer.Argument(help="An index directory, or a .jsonl/.json source (indexed on first use).")
    ],
    query: Annotated[str, typer.Argument(help="The query.")],
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="Number of results.")] = 10,
    before: Annotated[str | None, typer.Option("--before", help="Cutoff date YYYY-MM-DD (exclusive).")] = None,
    undated: Annotated[str, typer.Option("--undated", help="Undated documents under a cutoff: keep | drop.")] = "keep",
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Search an offline corpus and print the top results."""
    from memento.core.errors import ConfigError
    from memento.web.factory import open_corpus

    if undated not in ("keep", "drop"):
        raise ConfigError(f"--undated must be 'keep' or 'drop', not {undated!r}")
    try:
        cutoff = dt.date.fromisoformat(before) if before else None
    except ValueError:
        raise ConfigError(f"--before must be a date YYYY-MM-DD, not {before!r}") from None
    settings = load_settings(config)
    index = open_corpus(corpus, cache_dir=settings.web.cache_dir)
    results = index.search(query, k=k, before=cutoff, undated="drop" if undated == "drop" else "keep")
    if as_json:
        print_json({"query": query, "documents": len(index), "results": [_result_json(r) for r in results]})
        return
    if not results:
        console.print(f"no results for {query!r}", markup=False)
        return
    table = Table(title=f"{query} — {len(index)} documents", show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("title")
    table.add_column("date")
    table.add_column("url", overflow="fold")
    table.add_column("snippet", overflow="fold")
    for i, r in enumerate(results, 1):
        snippet = r.snippet if len(r.snippet) <= 160 else r.snippet[:159] + "…"
        table.add_row(str(i), r.title, r.published.isoformat() if r.published else "", r.url, snippet)
    console.print(table)


def _result_json(result: SearchResult) -> dict[str, Any]:
    return result.model_dump(mode="json")


def register(app: typer.Typer) -> None:
    """Add the `corpus` command group to the CLI."""
    app.add_typer(corpus_app, name="corpus")
