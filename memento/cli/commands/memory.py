"""The ``memento memory`` commands: show, stats, diff, rollback, forget and export a memory directory.

Example:
    memento memory stats --memory runs/mem
    memento memory show --source evil.example --memory runs/mem
    memento memory forget --source evil.example --memory runs/mem
    memento memory diff 1 2 --memory runs/mem
    memento memory diff --memory runs/mem --against runs/mem-replayed
    memento memory rollback 1 --memory runs/mem
    memento memory export runs/mem-export --memory runs/mem
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from memento.cli.commands._common import (
    cli_errors,
    console,
    memory_lock,
)
from memento.cli.commands._observe import JsonOpt, print_json
from memento.cli.commands._options import ConfigOpt, NoWaitOpt
from memento.core.config import load_settings
from memento.memory.location import DirectoryLocation, Location, parse_location
from memento.utils.text import one_line

__all__ = ["register", "app"]

logger = logging.getLogger(__name__)

app = typer.Typer(help="Inspect and manage a MEMENTO memory directory (M1-M4, versions).", no_args_is_help=True)

MemoryOpt = Annotated[
    str | None,
    typer.Option("--memory", help="Memory: a directory or postgresql://user@host:port/db (default: memory.dir)."),
]


def _location(memory: str | Location | None, config: Path | None) -> Location:
    """The memory ``--memory`` names (one parser: :func:`memento.memory.location.parse_location`), else the
    settings' ``[memory] dir``."""
    return parse_location(memory) if memory is not None else load_settings(config).memory.dir


def _open(memory: str | Location | None, config: Path | None, *, write: bool = False) -> Any:
    from memento.memory.memento_memory import MementoMemory

    return MementoMemory(_location(memory, config), read_only=not write)


def _dated(evidence: Any) -> str:
    """`` dated 2007-06-01, 3 pages`` of an item's evidence (``undated`` when it has no date)."""
    day = evidence.dated.isoformat() if evidence.dated is not None else "undated"
    pages = len(evidence.pages)
    return f"{day}, {pages} page{'s' if pages != 1 else ''}"


@app.command("show")
@cli_errors
def show(
    memory: MemoryOpt = None,
    store: Annotated[
        str | None, typer.Option("--store", help="Only this store: craft, decomposition, web_action, facts.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="Items shown per store.", min=1)] = 20,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="List only what this source taught (a page URL or a domain), in every store of the directory: "
            "M1-M4 items, CBR cases, JitMem trajectories.",
        ),
    ] = None,
    config: ConfigOpt = None,
) -> None:
    """Print the memory's items: M1 entries, M2/M3 rules (heaviest first) and M4 facts, each with its date and the
    pages behind it; with --source, every item of the directory that source backs."""
    from memento.memory.memento_memory import STORES

    if source is not None:
        _show_source(_location(memory, config), source)
        return
    with _open(memory, config) as mem:
        if store is not None and store not in STORES:
            from memento.core.errors import ConfigError

            raise ConfigError(f"unknown store {store!r}; one of {', '.join(STORES)}")
        console.print(f"memory {escape(str(mem.directory))} · version {mem.version}", soft_wrap=True)

        def line(text: str) -> None:
            console.print(text, soft_wrap=True, highlight=False)

        if store in (None, "craft"):
            line("\n[bold]M1 craft knowledge[/bold]")
            for e in sorted(mem.craft.all(), key=lambda e: (-e.support, e.id))[:limit]:
                meta = f"{e.id}, support {e.support}, batch {e.batch}; {_dated(e.evidence)}"
                line(f"- {escape(e.text)} [dim]({meta})[/dim]")
        for name, book, title in (
            ("decomposition", mem.decomposition, "M2 decomposition rules"),
            ("web_action", mem.web_action, "M3 web-action rules"),
        ):
            if store not in (None, name):
                continue
            line(f"\n[bold]{title}[/bold] (heaviest first)")
            for r in sorted(book.all(), key=lambda r: (-book.weight(r), r.id))[:limit]:
                line(
                    f"- {escape(f'[{r.status}]')} {escape(r.text)} [dim]({r.id}, support {r.support}, contradiction "
                    f"{r.contradiction}, batches {r.created_batch}-{r.updated_batch}; {_dated(r.evidence)})[/dim]"
                )
        if store in (None, "facts"):
            line("\n[bold]M4 domain facts[/bold] (current)")
            for f in mem.facts.all(include_superseded=False)[:limit]:
                sources = escape(", ".join(f.sources[:3])) or "-"
                line(
                    f"- {escape(f'[{f.entity}]')} {escape(f.text)} [dim]({f.id}, sources {sources}; "
                    f"{_dated(f.evidence)})[/dim]"
                )


def _show_source(directory: Location, source: str) -> None:
    """Every live item of the directory backed by ``source``, by store, with its date and the matching pages."""
    from memento.core.types import source_matches
    from memento.memory.forget import ForgetQuery, memory_items

    items = memory_items(directory, ForgetQuery(sources=(source,)))
    console.print(f"{len(items)} items taught by {escape(source)} in {escape(str(directory))}", soft_wrap=True)
    for item in items:
        pages = [p.url for p in item.evidence.pages if source_matches(p.url, source)]
        console.print(
            f"- {item.store} {item.id}: {escape(one_line(item.text, 110))} [dim]({_dated(item.evidence)}; "
            f"from {escape(', '.join(pages[:3]) or source)})[/dim]",
            highlight=False,
            soft_wrap=True,
        )


@app.command("stats")
@cli_errors
def stats(
    memory: MemoryOpt = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Counts per store and the version history; the JitMem trajectory bank's size on disk when there is one."""
    from memento.memory.sqlite_store import memory_exists
    from memento.memory.trajectory_bank import disk_usage

    directory = _location(memory, config)
    bank = disk_usage(directory / "jitmem")  # where `run`/`eval --method jitmem` keep the bank (programs/jitmem_agent)
    if bank is not None and not memory_exists(directory):  # a JitMem memory: the bank alone
        if as_json:
            print_json({"directory": str(directory), "jitmem_bank": asdict(bank)})
        else:
            _print_bank(bank)
        return
    with _open(memory, config) as mem:
        s = mem.stats()
        if as_json:
            extra = {"jitmem_bank": asdict(bank)} if bank is not None else {}
            print_json({"directory": str(mem.directory), **s, "versions": mem.versions(), **extra})
            return
        table = Table(title=f"memory {escape(str(mem.directory))} · version {s['version']}")
        table.add_column("store", no_wrap=True)
        for col in ("items", "retired", "support", "contra", "contradicted", "chars"):
            table.add_column(col, justify="right")
        table.add_row("M1 craft", str(s["craft"]["entries"]), "-", "-", "-", "-", str(s["craft"]["chars"]))
        for key, label in (("decomposition", "M2 decomposition"), ("web_action", "M3 web-action")):
            r = s[key]
            table.add_row(
                label,
                str(r["rules"]),
                str(r["retired"]),
                str(r["total_support"]),
                str(r["total_contradiction"]),
                str(r["rules_contradicted"]),
                str(r["chars"]),
            )
        f = s["facts"]
        table.add_row("M4 facts", str(f["facts"]), f"{f['superseded']} superseded", "-", "-", "-", str(f["chars"]))
        console.print(table)
        versions = Table(title="versions")
        for col in ("version", "parent", "batch", "status", "created", "note"):
            versions.add_column(col)
        for v in mem.versions():
            versions.add_row(
                str(v["version"]),
                str(v["parent"] or "-"),
                str(v["batch"]),
                v["status"],
                v["created_at"],
                escape(one_line(v["note"], 60)),
            )
        console.print(versions)
        if bank is not None:
            _print_bank(bank)


def _print_bank(bank: Any) -> None:
    """One line: the JitMem trajectory bank's size on disk (database with its page store, index) and its pages."""
    mib = 1024 * 1024
    console.print(
        f"jitmem trajectory bank {escape(bank.directory)}: {bank.total_bytes / mib:.2f} MiB on disk "
        f"(database {bank.db_bytes / mib:.2f} MiB incl. {bank.pages} pages of {bank.page_bytes / mib:.2f} MiB, "
        f"index {bank.index_bytes / mib:.2f} MiB)",
        soft_wrap=True,
    )


@app.command("diff")
@cli_errors
def diff(
    a: Annotated[int | None, typer.Argument(help="The older version.")] = None,
    b: Annotated[int | None, typer.Argument(help="The newer version.")] = None,
    memory: MemoryOpt = None,
    against: Annotated[
        str | None,
        typer.Option(
            "--against",
            help="Compare with another memory (a directory or postgresql://...) by content (M1-M4, case bank, "
            "trajectory bank), ignoring ids and timestamps; exit 1 when they differ.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """What changed between two versions, per store (items and characters added/deleted/modified); or, with
    --against OTHER, which items only one of two memories holds.

    An item counts as modified when its text, support, contradiction or status changed.
    """
    if against is not None:
        if a is not None or b is not None:
            from memento.core.errors import ConfigError

            raise ConfigError("memory diff --against compares the current contents of two memories: give no versions")
        _diff_against(_location(memory, config), parse_location(against), as_json=as_json)
        return
    if a is None or b is None:
        from memento.core.errors import ConfigError

        raise ConfigError("memory diff needs two versions (memory diff 1 2), or --against OTHER_DIRECTORY")
    with _open(memory, config) as mem:
        result = mem.diff(a, b)
        old, new = mem.db.state_at(a), mem.db.state_at(b)
        table = Table(
            title=f"memory diff {a} -> {b}",
            caption="~items: items whose text, support, contradiction or status changed; ~chars: text changes only",
        )
        for col in ("store", "+items", "-items", "~items", "+chars", "-chars", "~chars", "chars after"):
            table.add_column(col, justify="right")
        for name, d in result.stores.items():
            table.add_row(
                name,
                str(len(d.added)),
                str(len(d.removed)),
                str(len(d.modified)),
                str(d.chars_added),
                str(d.chars_deleted),
                str(d.chars_modified),
                str(d.chars_after),
            )
        console.print(table)
        for name, d in result.stores.items():
            for sign, ids, state in (("+", d.added, new), ("-", d.removed, old), ("~", d.modified, new)):
                for item_id in ids:
                    text = state.get((name, item_id), {}).get("text", "")
                    extra = (
                        _field_changes(old.get((name, item_id), {}), new.get((name, item_id), {}))
                        if sign == "~"
                        else ""
                    )
                    console.print(
                        f"{sign} {name} {item_id}: {escape(one_line(text, 110))}{escape(extra)}",
                        highlight=False,
                        soft_wrap=True,
                    )


def _diff_against(this: Location, other: Location, *, as_json: bool) -> None:
    """Print the content diff of two memory directories (``--json``: as JSON); exit 1 when they differ."""
    from memento.memory.memory_contents import diff_items, memory_items

    result = diff_items(memory_items(this), memory_items(other))
    if as_json:
        print_json({"this": str(this), "other": str(other), **result.as_json()})
    else:
        table = Table(title=f"memory {escape(str(this))} against {escape(str(other))}")
        for col in ("store", "items", "other's items", "only here", "only in other"):
            table.add_column(col, justify="right")
        for name, d in result.stores.items():
            table.add_row(name, str(d.this), str(d.other), str(len(d.only_this)), str(len(d.only_other)))
        console.print(table)
        for name, d in result.stores.items():
            for sign, records in (("-", d.only_this), ("+", d.only_other)):
                for record in records:
                    console.print(f"{sign} {name}: {escape(record.summary())}", highlight=False, soft_wrap=True)
        console.print("same contents" if result.empty else "the memories differ (- only here, + only in other)")
    if not result.empty:
        raise typer.Exit(1)


def _field_changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    """`` (support 2 -> 3, status active -> downweighted)`` for the counters and status of a modified item."""
    parts = [
        f"{key} {before.get(key)} -> {after.get(key)}"
        for key in ("support", "contradiction", "status")
        if before.get(key) != after.get(key)
    ]
    return f" ({', '.join(parts)})" if parts else ""


@app.command("rollback")
@cli_errors
def rollback(
    version: Annotated[int, typer.Argument(help="The version to restore.")],
    memory: MemoryOpt = None,
    no_wait: NoWaitOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Restore a version (the change log keeps everything; later versions are marked rolled back)."""
    directory = _location(memory, config)
    with memory_lock(directory, no_wait=no_wait):  # never while a trainer writes the same memory
        with _open(directory, config, write=True) as mem:
            before = mem.version
            changed = mem.rollback(version)
    what = "the empty memory" if version == 0 else f"version {version}"
    console.print(
        f"memory {escape(str(mem.directory))}: version {before} -> {what} ({changed} items restored; the change log "
        "keeps every version)",
        soft_wrap=True,
    )


@app.command("forget")
@cli_errors
def forget(
    item_id: Annotated[
        list[str] | None, typer.Option("--id", help="An item id (c-, r-, f-, case-, traj-N, or a task id).")
    ] = None,
    source: Annotated[
        list[str] | None,
        typer.Option("--source", help="Everything a source backs: a page URL, or a domain (its host and subdomains)."),
    ] = None,
    text: Annotated[list[str] | None, typer.Option("--text", help="Items whose text contains this.")] = None,
    memory: MemoryOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be forgotten; change nothing.")] = False,
    no_wait: NoWaitOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Forget items by id, source or text in every store of a memory directory.

    M1-M4 items are removed as a new memory version (each removal a change-log line: `memory diff` shows them,
    `memory rollback` to the version before brings them back); CBR cases and JitMem trajectories get tombstones in
    their bank's change log and are never retrieved again.
    """
    from memento.memory.forget import ForgetQuery, forget_items

    query = ForgetQuery(ids=tuple(item_id or ()), sources=tuple(source or ()), texts=tuple(text or ()))
    directory = _location(memory, config)
    if isinstance(directory, DirectoryLocation) and not directory.path.is_dir():
        from memento.core.errors import DataError

        raise DataError(f"no memory directory at {directory}")
    with memory_lock(directory, no_wait=no_wait):  # never while a trainer or a learning run writes it
        report = forget_items(directory, query, dry_run=dry_run)
    for item in report.items:
        console.print(
            f"- {item.store} {item.id}: {escape(one_line(item.text, 100))} [dim]({escape(item.reason)})[/dim]",
            highlight=False,
            soft_wrap=True,
        )
    counts = ", ".join(f"{store} {n}" for store, n in report.counts().items()) or "nothing matched"
    verb = "would forget" if dry_run else "forgot"
    version = ""
    if not dry_run and report.version_after != report.version_before:
        version = (
            f"; memory version {report.version_before} -> {report.version_after} (undo: memento memory rollback "
            f"{report.version_before} --memory {directory})"
        )
    console.print(f"{verb} {len(report.items)} items ({counts}){version}", highlight=False, soft_wrap=True)


@app.command("export")
@cli_errors
def export(
    out: Annotated[Path, typer.Argument(help="Output directory (memory.json and one markdown file per store).")],
    memory: MemoryOpt = None,
    version: Annotated[int | None, typer.Option("--version", help="Export this version (default: current).")] = None,
    config: ConfigOpt = None,
) -> None:
    """Write the memory (or one version) as readable markdown and JSON; deterministic output."""
    with _open(memory, config) as mem:
        path = mem.export(out, version=version)
        console.print(
            f"exported memory version {version if version is not None else mem.version} to {escape(str(path))}"
        )


from memento.cli.commands.memory_copy import memory_copy  # noqa: E402 - registered with the group below

app.command("copy")(memory_copy)

try:  # the Q-gate statistics live with the case bank (helper module, optional)
    from memento.cli.commands.memory_qgate import case_reward, qgate_fit, qgate_stats

    app.command("qgate-stats")(qgate_stats)
    app.command("qgate-fit")(qgate_fit)
    app.command("case-reward")(case_reward)
except ModuleNotFoundError as exc:  # pragma: no cover - depends on what is installed
    if exc.name != "memento.cli.commands.memory_qgate":
        raise


def register(root: typer.Typer) -> None:
    """Add the `memory` command group to the CLI."""
    root.add_typer(app, name="memory")
