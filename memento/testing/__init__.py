"""Offline LMs for tests, examples and benchmarks: a scripted DSPy engine and a local OpenAI-compatible server.

One module per concept, every public name re-exported here: :mod:`~memento.testing.scripted_engine`,
:mod:`~memento.testing.lm_server`, :mod:`~memento.testing.react_scripts`, :mod:`~memento.testing.web_fakes`,
:mod:`~memento.testing.memory_fakes` and :mod:`~memento.testing.ray_nodes`.

:class:`ScriptedEngine` answers any signature's output fields with schema-valid values read from the prompt
DSPy's adapters write (ChatAdapter ``[[ ## field ## ]]`` format, JSON when the JSON adapter asks). Values come
from, in order: the first matching :meth:`ScriptedEngine.when` rule, a per-field override, a type default.
Every call is recorded.

:class:`OpenAICompatServer` serves a ScriptedEngine over ``POST /v1/chat/completions`` on 127.0.0.1 (random
port) and counts requests, so integration tests drive the real ``openai/<model>`` + ``api_base`` path.

Fakes of the web for the same tests: :class:`LocalSite` (a web site on 127.0.0.1 whose routes a subclass writes),
:class:`EchoSearchBackend` (a search backend answering every query with two results naming it) and
:func:`build_corpus` (an offline corpus from a few documents). :func:`react_steps_done`, :func:`is_react_step`,
:func:`script_search_then_scrape` and :func:`script_search_read_finish` script a ReAct agent's tool steps.

Example:
    >>> import dspy
    >>> from memento.testing import ScriptedEngine
    >>> engine = ScriptedEngine(overrides={"answer": "Paris"})
    >>> lm = dspy.LM("scripted/test", engine=engine, cache=False)
    >>> dspy.Predict("question -> answer")(question="Capital of France?", lm=lm).answer
    'Paris'
"""

from __future__ import annotations

from memento.testing.lm_server import OpenAICompatServer, schema_problem
from memento.testing.memory_fakes import LookupEmbedder, judge_reach, load_rule_pairs
from memento.testing.ray_nodes import RayNodes
from memento.testing.react_scripts import (
    is_react_step,
    react_steps_done,
    script_search_read_finish,
    script_search_then_scrape,
)
from memento.testing.scripted_engine import FieldSpec, ScriptedCall, ScriptedEngine, scripted_lm, seq
from memento.testing.web_fakes import EchoSearchBackend, LocalSite, build_corpus, respond

__all__ = [
    "EchoSearchBackend",
    "FieldSpec",
    "LocalSite",
    "LookupEmbedder",
    "OpenAICompatServer",
    "RayNodes",
    "ScriptedCall",
    "ScriptedEngine",
    "build_corpus",
    "is_react_step",
    "judge_reach",
    "load_rule_pairs",
    "react_steps_done",
    "script_search_read_finish",
    "script_search_then_scrape",
    "scripted_lm",
    "respond",
    "schema_problem",
    "seq",
]
