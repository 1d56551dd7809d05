"""The CLI's options, each defined once: flags that set a settings value, and the options several commands share.

A flag that sets a setting is a :class:`Flag` (its option and the ``section.field`` it sets). A command takes flags
with :func:`with_flags`: the decorator adds their options to the command's signature (typer reads it) and hands the
command one :class:`Flags` object, whose :meth:`Flags.settings` builds the effective settings (flag > env > TOML >
default; an unset flag, ``None``, never shadows a lower layer). Groups name flags that travel together (``lm``:
``--config --lm --api-base --judge-lm``; ``cbr``; ``jitmem``; ``memory``; ``observe``...).

Example:
    >>> @with_flags("lm", "corpus", "cbr_k")  # doctest: +SKIP
    ... def run(question: QuestionOpt = None, *, flags: Flags) -> None:
    ...     settings = flags.settings()  # settings.cbr.k is --cbr-k when given
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from memento.cli.flags import FLAGS, GROUPS, ConfigOpt, CorpusOpt, Flag
from memento.core.config import Settings, load_settings
from memento.core.errors import ConfigError

__all__ = [
    "Flag",
    "Flags",
    "FLAGS",
    "GROUPS",
    "with_flags",
    "section",
    "embedder_named",
    "ConfigOpt",
    "NoWaitOpt",
    "TaskOpt",
    "OptionalTaskOpt",
    "LimitOpt",
    "MetricOpt",
    "EmbedderOpt",
    "CorpusOpt",
]

F = TypeVar("F", bound=Callable[..., Any])

NoWaitOpt = Annotated[
    bool,
    typer.Option("--no-wait", help="If another process writes the memory directory, exit at once instead of waiting."),
]
TaskOpt = Annotated[str, typer.Option("--task", help="Task spec: qa, multihop, legal, opinion, sales.")]
#: ``config show --task``: optional (what applies to that task, e.g. its undated policy)
OptionalTaskOpt = Annotated[
    str | None,
    typer.Option(
        "--task", help="A task spec, to say what applies to it (its undated policy, the run preset's values)."
    ),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="Use the first N examples of each file.")]
MetricOpt = Annotated[
    str, typer.Option("--metric", help="The task's metric: default, or a kind it offers (judge, em, f1 ...).")
]
EmbedderOpt = Annotated[
    str, typer.Option("--embedder", help="Embeddings of the memory stores: minilm (bundled) or hashing (fast).")
]


def embedder_named(name: str) -> Any:
    """The text embedder an ``--embedder`` value names (``minilm``: the bundled MiniLM, ``hashing``: fast, offline).

    Raises:
        ConfigError: another name.
    """
    from memento.memory.embedder import HashingEmbedder, default_embedder

    if name == "hashing":
        return HashingEmbedder()
    if name == "minilm":
        return default_embedder()
    raise ConfigError(f"unknown embedder {name!r}: use minilm or hashing")


def section(**values: Any) -> dict[str, Any]:
    """The set values of one settings section (``None`` values dropped)."""
    return {key: value for key, value in values.items() if value is not None}


class Flags:
    """The values of a command's settings flags (:func:`with_flags`); ``flags.corpus`` reads one."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = dict(values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def nested(self) -> dict[str, dict[str, Any]]:
        """The settings values the given flags set, by section (unset flags left out)."""
        out: dict[str, dict[str, Any]] = {}
        for name, value in self.values.items():
            flag = FLAGS[name]
            if flag.target is None or value is None:
                continue
            key, _, field = flag.target.partition(".")
            out.setdefault(key, {})[field] = flag.convert(value) if flag.convert is not None else value
        return out

    def argv(self) -> list[str]:
        """The given flags as command-line arguments (``["--corpus", "c.jsonl", "--cold"]``), to repeat them in a
        command this one suggests."""
        out: list[str] = []
        for name, value in self.values.items():
            if value is None:
                continue
            names = FLAGS[name].option_names()
            if isinstance(value, bool):
                out.append(names[0] if value else names[-1] if len(names) > 1 else f"--no-{names[0][2:]}")
            else:
                out += [names[0], str(value)]
        return out

    def settings(self, **sections: dict[str, Any]) -> Settings:
        """The effective settings: these flags plus ``sections`` values (``web={"backend": "offline"}``) over the
        environment, the TOML file (``--config``) and the defaults."""
        nested = self.nested()
        for key, values in sections.items():
            nested.setdefault(key, {}).update(values)
        return load_settings(self.values.get("config"), flags=nested)


def _expand(names: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for name in names:
        for flag in GROUPS.get(name, (name,)):
            if flag not in FLAGS:
                raise KeyError(f"no CLI flag {flag!r}")
            if flag not in out:
                out.append(flag)
    return out


def with_flags(*names: str) -> Callable[[F], F]:
    """Give a command the settings flags ``names`` (flag or group names) as options; it receives them as
    ``flags: Flags`` (a keyword-only parameter of the command, hidden from the CLI).

    Put it under ``@cli_errors`` and ``@cancellable`` (nearest the function).
    """
    chosen = _expand(names)

    def decorate(fn: F) -> F:
        signature = inspect.signature(fn, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "flags"]
        added = [
            inspect.Parameter(
                n, inspect.Parameter.KEYWORD_ONLY, default=FLAGS[n].default, annotation=FLAGS[n].annotation
            )
            for n in chosen
        ]

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            values = {n: kwargs.pop(n, FLAGS[n].default) for n in chosen}
            return fn(*args, flags=Flags(values), **kwargs)

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + added
        command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params} | {"return": signature.return_annotation}
        return command  # type: ignore[return-value]

    return decorate
