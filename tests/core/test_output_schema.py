"""The JSON schema of a signature's outputs: strict, closed, bounded so that constrained decoding fits max_tokens."""

from __future__ import annotations

from typing import Any, Literal

import dspy
import pytest
from pydantic import BaseModel

from memento.llm.output_schema import (
    CHARS_PER_TOKEN,
    MAX_CHARS,
    SCHEMA_KEY,
    OpenSchemaError,
    limit,
    output_schema,
    tool_args_schema,
)
from memento.programs.bound_react import tool_spec
from memento.signatures.decompose import Decompose
from memento.signatures.distill_web_rules import DistillWebRules
from memento.signatures.reflect import Reflect


class _Item(BaseModel):
    name: str
    score: int | None = None


class _Sig(dspy.Signature):
    """Test."""

    question: str = dspy.InputField()
    budget: int = dspy.InputField()
    answer: str = dspy.OutputField()
    items: list[_Item] = limit(dspy.OutputField(), max_items_from="budget")
    verdict: Literal["yes", "no"] = dspy.OutputField()
    note: str = limit(dspy.OutputField(), max_chars=50)


def _strings(schema: Any) -> list[dict[str, Any]]:
    if isinstance(schema, list):
        return [s for item in schema for s in _strings(item)]
    if not isinstance(schema, dict):
        return []
    own = [schema] if schema.get("type") == "string" and "enum" not in schema else []
    return own + [s for value in schema.values() for s in _strings(value)]


def test_schema_is_strict_and_closed_with_references_inlined() -> None:
    schema = output_schema(_Sig, max_tokens=1000, inputs={"budget": 2})
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == ["answer", "items", "verdict", "note"] == list(schema["properties"])
    item = schema["properties"]["items"]["items"]
    assert item["type"] == "object" and item["additionalProperties"] is False and item["required"] == ["name", "score"]
    assert "$ref" not in str(schema) and "$defs" not in schema and "title" not in str(schema)
    assert schema["properties"]["verdict"]["enum"] == ["yes", "no"]


def test_bounds_from_inputs_fields_and_the_token_budget() -> None:
    schema = output_schema(_Sig, max_tokens=1000, inputs={"budget": 2})
    props = schema["properties"]
    assert props["items"]["maxItems"] == 2  # from this call's input
    assert props["note"]["maxLength"] == 50  # the field's own bound
    # every free string is bounded; all of them together fit the reply's budget in characters
    strings = _strings(schema)
    assert strings and all("maxLength" in s for s in strings)
    total = props["answer"]["maxLength"] + 2 * props["items"]["items"]["properties"]["name"]["maxLength"] + 50
    assert total <= 1000 * CHARS_PER_TOKEN
    # a smaller budget gives shorter strings; without the input the list takes the default bound
    small = output_schema(_Sig, max_tokens=200)
    assert small["properties"]["answer"]["maxLength"] < props["answer"]["maxLength"]
    assert small["properties"]["items"]["maxItems"] == 8
    assert output_schema(_Sig, max_tokens=100_000)["properties"]["answer"]["maxLength"] == MAX_CHARS


def test_the_research_budgets_bound_the_lists_the_model_may_write() -> None:
    assert output_schema(Decompose, inputs={"max_questions": 3})["properties"]["sub_questions"]["maxItems"] == 3
    reflect = output_schema(Reflect, inputs={"remaining_budget": 0})
    assert reflect["properties"]["new_questions"]["maxItems"] == 0  # no budget left: nothing may be proposed
    rules = output_schema(DistillWebRules)["properties"]["operations"]["items"]
    assert rules["properties"]["op"]["enum"] == ["add", "reinforce", "contradict", "remove"]


def test_open_mapping_needs_a_schema_of_its_own() -> None:
    class Open(dspy.Signature):
        """Test."""

        q: str = dspy.InputField()
        args: dict[str, Any] = dspy.OutputField()

    with pytest.raises(OpenSchemaError, match="args"):
        output_schema(Open)
    closed = Open.with_updated_fields(
        "args", **{SCHEMA_KEY: {"type": "object", "properties": {"x": {"type": "string"}}}}
    )
    assert output_schema(closed)["properties"]["args"]["required"] == ["x"]


def test_react_tool_arguments_take_the_tools_own_types() -> None:
    tools = [tool_spec("search", "Search.", {"query": "string"}), tool_spec("open", "Open.", {"url": "string"})]
    schema = tool_args_schema(tools)
    assert [option["required"] for option in schema["anyOf"]] == [["query"], ["url"]]
    assert all(option["additionalProperties"] is False for option in schema["anyOf"])

    from memento.programs.sub_question_agent import SubQuestionAgent

    react = SubQuestionAgent(max_steps=3).agent.react.signature
    props = output_schema(react, max_tokens=512)["properties"]
    assert props["next_tool_name"]["enum"] == ["search_memory", "search_web", "scrape", "finish"]
    options = props["next_tool_args"]["anyOf"]
    assert {tuple(o["required"]) for o in options} == {("query",), ("url",), ()}  # finish takes no arguments
