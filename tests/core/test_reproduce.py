"""docs/reproduce.md works (issue 24 item 6): every command it gives is extracted and run, in order, against a local
OpenAI-compatible test server with scripted replies, on tiny data, with its variables pointed at test files and the
``tiny`` budget. The scores mean nothing; that each command runs, and writes what the next one reads, is the test."""

from __future__ import annotations

import csv
import json
import re
import shlex
import sys
from pathlib import Path

from typer.testing import CliRunner

from memento.cli import app
from memento.testing import OpenAICompatServer, ScriptedEngine

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared corpus and questions
from memento_training_fixture import QUESTIONS, write_data  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "reproduce.md"
_VAR = re.compile(r"^[A-Z_]+=")


def commands(text: str) -> tuple[list[str], list[str]]:
    """The doc's variables (``NAME=value`` lines) and its ``memento`` commands (continuation lines joined), in order."""
    names: list[str] = []
    found: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip() if not line.strip().startswith("memento") else line.strip()
            if _VAR.match(line):
                names.append(line.split("=", 1)[0])
            elif line.startswith("memento "):
                found.append(line)
    return names, found


def _justice(path: Path) -> Path:
    columns = ["ID", "name", "docket", "term", "first_party", "second_party", "facts", "first_party_winner"]
    cases = [
        ("Peter Stanley", "Illinois", "Stanley sued Illinois over custody of his children.", "True"),
        ("John Giglio", "United States", "Giglio was convicted; a witness had been promised leniency.", "True"),
        ("Sally Reed", "Cecil Reed", "Sally Reed and Cecil Reed both applied to administer an estate.", "True"),
        ("Ann Lee", "Ohio", "Lee challenged a state search of her home.", "False"),
        ("Bo Park", "Texas", "Park contested a sentencing rule.", "False"),
        ("Cy Moe", "Utah", "Moe appealed a denial of benefits.", "True"),
    ]
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for i, (first, second, facts, winner) in enumerate(cases):
            writer.writerow(
                {"ID": str(i), "name": f"{first} v. {second}", "docket": f"d{i}", "term": str(2012 + i),
                 "first_party": first, "second_party": second, "facts": f"<p>{facts}</p>",
                 "first_party_winner": winner}
            )  # fmt: skip
    return path


def _sales(path: Path) -> Path:
    rows = [
        {
            "id": f"s{i}",
            "seller": "Acme Analytics, a data-platform vendor",
            "products": ["Acme Stream: real-time ingestion"],
            "customer": f"Globex {i}, a logistics company",
            "value_propositions": [{"pain_point": "late shipments", "mechanism": "streaming", "evidence": "42%"}],
            "date": "2024-05-17",
        }
        for i in range(6)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _engine() -> ScriptedEngine:
    engine = ScriptedEngine()
    engine.when(predicate=lambda c: "sub_questions" in c.output_fields, sub_questions=["Who are the parties?"])
    engine.when(predicate=lambda c: "new_questions" in c.output_fields, new_questions=[], reflection="enough")
    engine.when(predicate=lambda c: "sub_tasks" in c.output_fields, sub_tasks=["Find the key fact"], done=True)
    engine.when(predicate=lambda c: "retire" in c.output_fields, insights=["Read the primary source."], retire=[])
    engine.when(predicate=lambda c: "next_tool_name" in c.output_fields, next_tool_name="finish", next_tool_args={})
    engine.when(predicate=lambda c: "new_instruction" in c.output_fields, new_instruction="Curate carefully.")
    engine.when(  # the multi-hop answers are right (JitMem's ground-truth gate keeps the trajectory)
        predicate=lambda c: "answer" in c.output_fields and "question" in c.inputs,
        answer=lambda c: next((q["answers"][0] for q in QUESTIONS if q["question"] in c.inputs["question"]), "?"),
        sources=[],
    )
    return engine


def test_every_command_of_reproduce_md_runs_on_a_test_server(tmp_path, monkeypatch):
    names, found = commands(DOC.read_text(encoding="utf-8"))
    corpus, questions = write_data(tmp_path / "data")
    values = {
        "LM": "openai/test-model",
        "JUDGE": "openai/test-model",
        "JUSTICE": str(_justice(tmp_path / "justice.csv")),
        "MULTIHOP": str(questions),
        "CORPUS": str(corpus),
        "SALES": str(_sales(tmp_path / "sales.jsonl")),
        "N_TRAIN": "3",
        "N_TEST": "2",
        "BUDGET": "tiny",
        "CURATOR_BUDGET": "4",
    }
    assert set(names) == set(values), "docs/reproduce.md's variables and this test's differ"
    assert len(found) >= 15 and all(c.startswith("memento ") for c in found)
    used = {name for command in found for name in re.findall(r"\$([A-Z_]+)", command)}
    assert used <= set(values)
    with OpenAICompatServer(_engine()) as server:
        monkeypatch.setenv("MEMENTO_LM_API_BASE", server.api_base)
        monkeypatch.setenv("MEMENTO_LM_CACHE", "false")
        monkeypatch.setenv("MEMENTO_RUN_THREADS", "2")
        for command in found:
            argv = shlex.split(re.sub(r"\$([A-Z_]+)", lambda m: values[m.group(1)], command))
            result = CliRunner().invoke(app, argv[1:])
            assert result.exit_code == 0, f"{command}\n{result.output[-3000:]}"
        assert server.chat_requests > 0
    # what the commands promise is there: a comparison per row, the trained memory, the tuned curator's test
    assert (Path("runs/memento-legal/results.md")).is_file() and Path("runs/cbr-kernel/results.json").is_file()
    legal = json.loads(Path("runs/memento-legal/results.json").read_text())
    assert {"closed_book_memory", "few_shot_memory", "memento"} <= set(legal["methods"])
    assert Path("runs/mem-legal/memory.db").is_file()
    assert json.loads(Path("runs/jitmem-curator/curator.json").read_text())["staged_refresh"]["stage_budgets"] == [2, 2]
    assert json.loads(Path("runs/jitmem-curator/test/results.json").read_text())["stream"]["orderings"] == 3
