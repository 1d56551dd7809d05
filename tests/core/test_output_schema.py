"""The JSON schema of a signature's outputs: strict, closed, bounded so that constrained decoding fits max_tokens."""

from __future__ import annotations

from typing import Any, Literal

import dspy
import pytest
from pydantic import BaseModel

from memento.llm.output_schema import (
    CHARS_PER_TOKEN,
    DEFAULT_MAX_ITEMS,
    MAX_CHARS,
    MIN_CHARS,
    SCHEMA_KEY,
    WANTED_CHARS,
    OpenSchemaError,
    limit,
    output_schema,
    reply_chars,
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
    # a smaller budget gives shorter strings; without the input the list takes the default bound where it fits, and
    # loses items where its strings would get fewer than WANTED_CHARS
    small = output_schema(_Sig, max_tokens=300)
    assert small["properties"]["answer"]["maxLength"] < props["answer"]["maxLength"]
    assert output_schema(_Sig, max_tokens=4096)["properties"]["items"]["maxItems"] == DEFAULT_MAX_ITEMS
    assert 1 <= small["properties"]["items"]["maxItems"] < DEFAULT_MAX_ITEMS
    assert small["properties"]["answer"]["maxLength"] >= MIN_CHARS
    assert reply_chars(small) <= 300
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


def test_a_mapping_keyed_by_an_input_list_gets_one_property_per_item() -> None:
    """An opinion distribution (``dict[str, float]`` over the question's options): a closed object with one number
    per option of this call; without the options (no inputs) it stays open, for JSON mode."""
    from memento.tasks.opinion import PredictOpinionDistribution

    options = ["Strongly agree", "Agree", "Disagree", "Agree"]
    schema = output_schema(PredictOpinionDistribution, max_tokens=384, inputs={"options": options})
    dist = schema["properties"]["distribution"]
    assert list(dist["properties"]) == ["Strongly agree", "Agree", "Disagree"]
    assert dist["required"] == list(dist["properties"]) and dist["additionalProperties"] is False
    assert all(prop == {"type": "number"} for prop in dist["properties"].values())
    assert reply_chars(schema) <= 384
    with pytest.raises(OpenSchemaError, match="distribution"):
        output_schema(PredictOpinionDistribution)


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


def test_reply_chars_counts_every_character_the_grammar_admits() -> None:
    """The longest JSON text under a schema, written out: keys, quotes, colons, commas and one space after each."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 5},
            "n": {"type": "array", "maxItems": 2, "items": {"type": "integer"}},
            "v": {"enum": ["yes", "no"]},
            "b": {"type": "boolean"},
        },
    }
    longest = '{ "a" : "xxxxx" , "n" : [ -1234567890123456 , -1234567890123456 , ] , "v" : "yes" , "b" : false , } '
    assert reply_chars(schema) == len(longest)  # (a trailing comma counted: a bound, never below the real text)
    number = "-1234567890123456.1234567890123456e+1234567890123456 "
    assert reply_chars({"anyOf": [{"type": "null"}, {"type": "number"}]}) == len(number)


# the bounds some signatures take from inputs (list lengths; an opinion distribution's keys)
_SIGNATURE_INPUTS = {"max_questions": 3, "remaining_budget": 8, "options": ["Strongly agree", "Agree", "Disagree"]}


def _signatures() -> list[type[dspy.Signature]]:
    """The package's signatures, the tasks' own, and the sub-question agent's (ReAct's, with the tools' arguments)."""
    import importlib
    import pkgutil

    import memento.signatures
    import memento.tasks
    from memento.programs.sub_question_agent import SubQuestionAgent

    found: dict[str, type[dspy.Signature]] = {}
    for package in (memento.signatures, memento.tasks):
        for module_info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(module_info.name)
            for value in vars(module).values():
                own = isinstance(value, type) and value.__module__ == module.__name__
                if own and issubclass(value, dspy.Signature):
                    found[value.__name__] = value
    for name, predictor in SubQuestionAgent(max_steps=3).named_predictors():
        found[f"agent.{name}"] = predictor.signature
    return [found[name] for name in sorted(found)]


@pytest.mark.parametrize("max_tokens", [256, 384, 512, 1024, 4096])
def test_every_signature_reply_fits_its_token_budget(max_tokens: int) -> None:
    """Constrained decoding ends before max_tokens: the longest reply each signature's schema admits is at most
    max_tokens characters (a token is at least one character of an ASCII reply), at the bundled model's budget and
    above; every free string keeps at least MIN_CHARS."""
    signatures = _signatures()
    assert len(signatures) > 25
    for signature in signatures:
        try:
            schema = output_schema(signature, max_tokens=max_tokens, inputs=_SIGNATURE_INPUTS)
        except OpenSchemaError:  # an output admitting any keys: sent JSON mode, no schema (the structured adapter)
            continue
        assert reply_chars(schema) <= max_tokens * CHARS_PER_TOKEN, signature.__name__
        assert all(s["maxLength"] >= MIN_CHARS for s in _strings(schema) if "maxLength" in s), signature.__name__


def test_nested_lists_lose_items_before_their_strings_get_short() -> None:
    """ExtractFacts (a list of facts, each with a list of sources) at the bundled model's budget: the lists shrink
    (the longest first, the inner one on a tie) so that each string keeps WANTED_CHARS where it can."""
    from memento.signatures.extract_facts import ExtractFacts

    schema = output_schema(ExtractFacts, max_tokens=512)
    facts = schema["properties"]["facts"]
    sources = facts["items"]["properties"]["sources"]
    assert facts["maxItems"] * sources["maxItems"] < DEFAULT_MAX_ITEMS * DEFAULT_MAX_ITEMS
    assert facts["items"]["properties"]["fact"]["maxLength"] >= WANTED_CHARS
    assert reply_chars(schema) <= 512
    assert "memento_default_bound" not in str(schema)  # the working mark is not sent
    big = output_schema(ExtractFacts, max_tokens=100_000)["properties"]["facts"]
    assert big["maxItems"] == DEFAULT_MAX_ITEMS == big["items"]["properties"]["sources"]["maxItems"]


def test_input_bounds_shrink_only_when_the_reply_cannot_fit_otherwise() -> None:
    reflect = output_schema(Reflect, max_tokens=4096, inputs={"remaining_budget": 5})
    assert reflect["properties"]["new_questions"]["maxItems"] == 5
    small = output_schema(Reflect, max_tokens=384, inputs={"remaining_budget": 5})
    assert 1 <= small["properties"]["new_questions"]["maxItems"] < 5
    assert reply_chars(small) <= 384
