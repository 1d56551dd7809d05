"""CLI edges: an unknown provider is one line, -v after the subcommand, LM flags only where an LM is called,
--method help lists every method."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from memento.cli import app, hoist_verbose
from memento.programs.registry import method_names

CASES = [(["--lm", "foo/bar"], "--lm 'foo/bar'"), (["--lm", "openai/x", "--judge-lm", "nope"], "--judge-lm 'nope'")]


@pytest.mark.parametrize(("flags", "named"), CASES)
def test_unknown_provider_or_model_is_one_line_before_any_call(tmp_path, flags, named) -> None:
    result = CliRunner().invoke(
        app, ["run", "--task", "qa", "--method", "closed_book", "--question", "q", "--out", str(tmp_path), *flags]
    )
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert named in lines[0] and "unknown" in lines[0] and "--api-base" in lines[0]


def test_a_model_string_dspy_refuses_is_one_line_too(tmp_path) -> None:
    args = ["run", "--task", "qa", "--method", "closed_book", "--question", "q", "--out", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, "--lm", "openai/"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip() == (
        "memento: error: --lm 'openai/': model 'openai/' has a provider prefix but no model id after it"
    )


def test_verbose_after_the_subcommand() -> None:
    assert hoist_verbose(["config", "show", "-v"]) == ["-v", "config", "show"]
    assert hoist_verbose(["eval", "--task", "qa", "-vv", "--", "-v"]) == ["-vv", "eval", "--task", "qa", "--", "-v"]
    assert CliRunner().invoke(app, ["config", "show", "-v"]).exit_code == 2  # what main() fixes
    assert CliRunner().invoke(app, hoist_verbose(["config", "show", "-v"])).exit_code == 0


def test_lm_flags_only_on_commands_that_call_an_lm() -> None:
    runner = CliRunner()
    for command in (["memory", "stats"], ["memory", "rollback", "1"], ["corpus", "search", "x", "q"]):
        result = runner.invoke(app, [*command, "--lm", "openai/x"])
        assert result.exit_code == 2 and "--lm" in result.output, command
    for name in ("run", "eval", "train", "compare"):
        assert "--lm" in runner.invoke(app, [name, "--help"], env={"COLUMNS": "300"}).output


@pytest.mark.parametrize("command", ["run", "eval"])
def test_method_help_lists_every_method(command: str) -> None:
    help_text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "400"}).output
    listed = set(re.findall(r"[a-z_]+", help_text.split("One of:", 1)[1].split(".", 1)[0]))
    assert set(method_names()) <= listed
