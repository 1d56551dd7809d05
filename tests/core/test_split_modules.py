"""Long modules split by concept (issue 27 item 3): every public name still imports from its old module, as the
same object its new home defines, and each new module says what it holds (a docstring and an ``__all__``)."""

from __future__ import annotations

import importlib

import pytest

#: old module -> {public name: the module that now defines it}
MOVED: dict[str, dict[str, str]] = {
    "memento.web.fetcher": {
        "Fetcher": "memento.web.fetcher",
        "Page": "memento.web.page",
        "ALLOWED_CONTENT_TYPES": "memento.web.http_answer",
        "DEFAULT_USER_AGENT": "memento.web.fetcher",
    },
    "memento.tasks.pii": {
        "PartyAnonymizer": "memento.tasks.pii",
        "PartySegment": "memento.tasks.party_parser",
        "Party": "memento.tasks.party_parser",
        "parse_party": "memento.tasks.party_parser",
        "Leak": "memento.tasks.party_leaks",
        "find_leaks": "memento.tasks.party_leaks",
        "leak_terms": "memento.tasks.party_leaks",
        "LEAK_STOPWORDS": "memento.tasks.party_leaks",
        "court_spans": "memento.tasks.court_names",
        "GENERIC_TOKENS": "memento.tasks.party_vocabulary",
        "ORG_TOKENS": "memento.tasks.party_vocabulary",
        "ORG_ABBREVIATIONS": "memento.tasks.party_vocabulary",
    },
}

#: the modules the splits created
NEW_MODULES = sorted(
    {home for names in MOVED.values() for home in names.values()}
    | {"memento.web.address_policy", "memento.web.robots_rules", "memento.web.request_deadline"}
    | {"memento.web.page_extraction", "memento.tasks.name_patterns", "memento.tasks.name_spelling"}
)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_public_names_still_import_from_the_old_module(old: str) -> None:
    module = importlib.import_module(old)
    assert set(MOVED[old]) <= set(module.__all__), sorted(set(MOVED[old]) - set(module.__all__))
    for name, home in MOVED[old].items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name


@pytest.mark.parametrize("name", NEW_MODULES)
def test_each_new_module_has_a_docstring_and_exports_what_it_lists(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__ and len(module.__doc__.strip()) > 40, name
    assert module.__all__, name
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names {missing}, which it does not define"
