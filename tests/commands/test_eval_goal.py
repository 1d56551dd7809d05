"""Done means of issue 18: ``memento eval --method aet`` against a local OpenAI-compatible server that logs every
prompt; the decomposition prompt carries every product of a sales example and the legal goal (which party the Court
ruled for, and the disposition)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from memento.cli import app
from memento.testing import OpenAICompatServer, ScriptedEngine

PRODUCTS = ["Acme Stream: real-time ingestion", "Acme Vault: governed storage", "Acme Lens: fleet dashboards"]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    docs = [
        {"doc_id": "globex", "title": "Globex cold chain", "text": "Globex expands into cold-chain shipping in 2024."},
        {"doc_id": "parole", "title": "Parole hearings", "text": "State parole rules and due process in the 1970s."},
    ]
    path.write_text("\n".join(json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    return path


def _sales(tmp_path: Path) -> Path:
    row = {
        "id": "acme-globex",
        "seller": "Acme Analytics, a data-platform vendor",
        "products": PRODUCTS,
        "customer": "Globex, a logistics company expanding into cold-chain shipping",
        "value_propositions": [{"pain_point": "spoiled cargo", "mechanism": "Acme Stream alerts", "evidence": "2024"}],
        "published": "2024-05-17",
    }
    path = tmp_path / "sales.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return path


def _legal(tmp_path: Path) -> Path:
    path = tmp_path / "justice.csv"
    columns = ["ID", "name", "docket", "term", "first_party", "second_party", "facts", "first_party_winner"]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerow(
            {
                "ID": "1",
                "name": "Morrow v. Brewster",
                "docket": "71-1",
                "term": "1971",
                "first_party": "John Morrow",
                "second_party": "Brewster",
                "facts": "<p>John Morrow, a parolee, challenged the revocation of his parole by Brewster without a "
                "hearing.</p>",
                "first_party_winner": "True",
            }
        )
    return path


def _engine() -> ScriptedEngine:
    engine = ScriptedEngine()
    engine.when(predicate=lambda c: "sub_questions" in c.output_fields, sub_questions=["one focused sub-question"])
    engine.when(predicate=lambda c: "new_questions" in c.output_fields, new_questions=[], reflection="enough")
    engine.when(predicate=lambda c: "ground_truth" in c.inputs, score=3, rationale="soft match")
    return engine


def _eval(server: OpenAICompatServer, task: str, data: Path, corpus: Path, out: Path):
    return CliRunner().invoke(
        app,
        ["eval", "--task", task, "--data", str(data), "--method", "aet", "--corpus", str(corpus),
         "--lm", "openai/x", "--api-base", server.api_base, "--threads", "1", "--out", str(out)],
        env={"COLUMNS": "200", "MEMENTO_BUDGETS_TOTAL_QUESTIONS": "2", "MEMENTO_BUDGETS_STEPS_PER_QUESTION": "2"},
    )  # fmt: skip


def test_eval_aet_decomposition_prompts_carry_products_and_the_legal_goal(tmp_path):
    engine = _engine()
    corpus = _corpus(tmp_path)
    with OpenAICompatServer(engine) as server:
        sales = _eval(server, "sales", _sales(tmp_path), corpus, tmp_path / "sales_out")
        sales_calls = list(engine.calls)
        legal = _eval(server, "legal", _legal(tmp_path), corpus, tmp_path / "legal_out")
        legal_calls = engine.calls[len(sales_calls) :]
    assert sales.exit_code == 0, sales.output
    assert legal.exit_code == 0, legal.output
    sales_decompose = [c for c in sales_calls if "sub_questions" in c.output_fields]
    legal_decompose = [c for c in legal_calls if "sub_questions" in c.output_fields]
    assert len(sales_decompose) == 1 and len(legal_decompose) == 1
    prompt = _flat(sales_decompose[0].prompt)
    for product in PRODUCTS:
        assert product in prompt, f"product {product!r} missing from the decomposition prompt"
    assert "Globex" in prompt and "Acme Analytics" in prompt
    prompt = _flat(legal_decompose[0].prompt)
    assert "which party the Court ruled for" in prompt
    assert "winning_party: the party the Court ruled for" in prompt
    assert "disposition: what the Court did with the lower court's judgment" in prompt
    assert "Do not try to identify the case, and do not rely on any outcome you may remember" in prompt
    assert "John Morrow" not in prompt and "the petitioner" in prompt  # the facts arrive anonymised
    # the sub-question agent sees the same constraint
    solve = [c for c in legal_calls if "next_tool_name" in c.output_fields]
    assert solve and all("do not rely on any outcome you may remember" in _flat(c.prompt) for c in solve)
    saved = json.loads((tmp_path / "sales_out" / "results.json").read_text())
    assert saved["n"] == 1 and saved["examples"][0]["score"] is not None
