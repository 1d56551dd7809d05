"""Odd inputs at the entry points: null fields, repeated example ids, an --out that names a new directory."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.core.errors import DataError
from memento.tasks.task import get_task

LM = ["--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1"]  # never reached: bad input fails first

ROWS: dict[str, dict[str, Any]] = {
    "qa": {"question": "Who wrote Dune?", "answers": ["Frank Herbert"]},
    "multihop": {"question": "Who wrote Dune?", "answers": ["Frank Herbert"]},
    "opinion": {"question": "Q?", "options": ["Yes", "No"], "subgroup": "adults", "distribution": [0.4, 0.6]},
    "sales": {"seller": "S", "products": "P", "customer": "C", "value_propositions": ["p"], "date": "2024-05-17"},
}
NULLS = {"qa": "question", "multihop": "question", "opinion": "subgroup", "sales": "customer"}


def _lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("task", sorted(ROWS))
@pytest.mark.parametrize("value", [None, "  "])
def test_a_null_or_blank_input_is_refused_naming_file_line_and_field(tmp_path, task, value):
    field = NULLS[task]
    path = _jsonl(tmp_path / "rows.jsonl", [ROWS[task], {**ROWS[task], field: value}])
    kind = "null" if value is None else "blank"
    with pytest.raises(DataError, match=rf"rows.jsonl:2: .*'{field}' is {kind}"):
        get_task(task).load(path)


def test_eval_with_a_null_question_is_one_line_and_sends_nothing(tmp_path):
    path = _jsonl(tmp_path / "rows.jsonl", [{"question": None, "answers": ["x"]}])
    args = ["eval", "--task", "qa", "--data", str(path), "--method", "closed_book", "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(app, [*args, *LM], env={"COLUMNS": "300"})
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert _lines(result.output) == [f"memento: error: {path}:1: not a question row ('question' is null: a required "
                                     "field needs a value)"]  # fmt: skip
    assert not (tmp_path / "o").exists()


def test_run_with_a_null_input_in_the_example_file_is_refused(tmp_path):
    example = tmp_path / "row.json"
    example.write_text(json.dumps({"question": None}))
    result = CliRunner().invoke(app, ["run", "--example", str(example), "--method", "closed_book", *LM])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert len(_lines(result.output)) == 1 and "needs question" in result.output


@pytest.mark.parametrize("task", sorted(ROWS))
def test_duplicate_ids_are_refused_naming_both_lines(tmp_path, task):
    rows = [{**ROWS[task], "id": 7}, {**ROWS[task], "id": "x"}, {**ROWS[task], "id": "7"}]  # 7 and "7": one id
    with pytest.raises(DataError, match=r"rows.jsonl:3: duplicate id '7' \(also on line 1\)"):
        get_task(task).load(_jsonl(tmp_path / "rows.jsonl", rows))
    rows = [{**ROWS[task], "id": None}, {**ROWS[task]}, {**ROWS[task], "id": ""}]  # no id: ids come from the inputs
    assert len(get_task(task).load(_jsonl(tmp_path / "rows.jsonl", rows))) == 3


def test_duplicate_justice_ids_are_refused(tmp_path):
    path = tmp_path / "justice.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ID", "docket", "term", "first_party", "second_party", "facts", "first_party_winner"])
        writer.writerow(["11", "d1", "2012", "A", "B", "<p>Facts one.</p>", "True"])
        writer.writerow(["11", "d2", "2013", "C", "D", "<p>Facts two.</p>", "False"])
    with pytest.raises(DataError, match=r"justice.csv:3: duplicate id '11' \(also on line 2\)"):
        get_task("legal").load(path)


def test_compare_with_duplicate_ids_is_one_line_before_any_work(tmp_path):
    rows = [{**ROWS["multihop"], "id": f"q{i % 3}"} for i in range(6)]
    path = _jsonl(tmp_path / "rows.jsonl", rows)
    args = ["compare", "--task", "multihop", "--data", str(path), "--n-train", "2", "--n-test", "2",
            "--methods", "closed_book", "--out", str(tmp_path / "cmp")]  # fmt: skip
    result = CliRunner().invoke(app, [*args, *LM], env={"COLUMNS": "300"})
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert _lines(result.output) == [f"memento: error: {path}:4: duplicate id 'q0' (also on line 1): give every row "
                                     "its own id"]  # fmt: skip


@pytest.mark.parametrize("suffix", ["/", "/."])
def test_run_out_with_a_trailing_slash_is_a_new_directory(tmp_path, openai_server, suffix):
    out = tmp_path / "newdir"
    result = CliRunner().invoke(
        app,
        ["run", "-q", "Who wrote Dune?", "--method", "closed_book", "--out", str(out) + suffix,
         "--lm", "openai/x", "--api-base", openai_server.api_base],
        env={"COLUMNS": "300"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert out.is_dir(), "--out newdir/ wrote a file named newdir"
    written = list(out.iterdir())
    assert len(written) == 1 and written[0].name.startswith("run-") and written[0].suffix == ".json"
    assert json.loads(written[0].read_text())["task_text"] == "Who wrote Dune?"


def test_run_out_slash_under_a_file_is_one_line(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("a file\n")
    result = CliRunner().invoke(app, ["run", "-q", "Who?", "--method", "closed_book", "--out", f"{plain}/", *LM])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert len(_lines(result.output)) == 1 and str(plain) in result.output
