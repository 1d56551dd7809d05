"""Shared fixture of the legal protocol tests: a small JUSTICE-shaped CSV, a dated corpus of "case reports" and a
scripted leakage agent.

The cases are made up (the columns are JUSTICE's, as in ``shared/data/justice``); each has one keyword that its
facts and its report pages share, so the agent's search finds them. Outcomes:

* ``101`` harbour permit (term 2014, cutoff 2009-01-01): a 2008 page states the decision -> dropped;
* ``109`` tax credit (2017, cutoff 2012-01-01): a 2011 snippet states it -> dropped;
* ``102`` salmon fishery (2012, cutoff 2007-01-01): its only report is dated 2012, after the cutoff -> kept;
* ``103`` border search (2013): a page before the cutoff names the other party (a lower court) -> kept;
* ``104`` pension reform (2015): the agent claims the outcome from memory, no page holds its quote -> kept;
* ``105`` (term ``2009-2010``: its last year counts), ``106``-``108``, ``114``: nothing found -> kept;
* ``110`` (2012) has a blank label: the loader skips it; ``111`` (2009) and ``112`` (2005) are before 2010 and
  ``113`` has no term: never screened (``111`` has a leaking page that must not be read).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from memento.testing import ScriptedCall, ScriptedEngine, script_search_read_finish

COLUMNS = [
    "", "ID", "name", "href", "docket", "term", "first_party", "second_party", "facts", "facts_len", "majority_vote",
    "minority_vote", "first_party_winner", "decision_type", "disposition", "issue_area",
]  # fmt: skip

#: (ID, term, keyword, first party, second party, first_party_winner)
CASES = [
    ("101", "2014", "harbour permit", "Alder Shipping Co.", "Port Authority of Brill", "True"),
    ("102", "2012", "salmon fishery", "Cask Fisheries", "State of Oran", "True"),
    ("103", "2013", "border search", "Dana Ruiz", "United States", "True"),
    ("104", "2015", "pension reform", "Ellis Union", "Fenwick Steel", "False"),
    ("105", "2009-2010", "railway tariff", "Gorse Rail", "Harlan Freight", "False"),
    ("106", "2011", "water rights", "Ivy County", "Juniper Farms", "True"),
    ("107", "2016", "copyright music", "Kestrel Records", "Linden Radio", "False"),
    ("108", "2010", "prison mail", "Milo Grant", "Norris Warden", "True"),
    ("109", "2017", "tax credit", "Orla Partners", "Commissioner of Revenue", "False"),
    ("110", "2012", "zoning appeal", "Pike Homes", "Quill Township", ""),
    ("111", "2009", "mining lease", "Rowan Mines", "Sable Tribe", "True"),
    ("112", "2005", "school funding", "Tamsin District", "Umber State Board", "False"),
    ("113", "", "bank merger", "Vale Bank", "Wren Trust", "True"),
    ("114", "2013", "airline noise", "Xylo Air", "Yarrow Village", "True"),
]
KEYWORDS = [case[2] for case in CASES]

DOCS = [
    {"doc_id": "harbour-ruling", "title": "Harbour permit dispute decided", "published": "2008-05-01",
     "text": "Report on the harbour permit case. The Supreme Court ruled for the petitioner, reversing the court of "
             "appeals and reinstating the permit."},
    {"doc_id": "tax-credit-note", "title": "Tax credit case: the Supreme Court ruled for the respondent",
     "published": "2011-03-01",
     "text": "Tax credit case: the Supreme Court ruled for the respondent, affirming the tax court."},
    {"doc_id": "salmon-fishery-ruling", "title": "Salmon fishery decision", "published": "2012-07-01",
     "text": "In the salmon fishery case the Supreme Court ruled for the petitioner and struck down the quota."},
    {"doc_id": "border-search-appeal", "title": "Border search appeal", "published": "2007-02-01",
     "text": "On the border search, the court of appeals ruled for the respondent and admitted the evidence."},
    {"doc_id": "pension-reform-brief", "title": "Pension reform brief", "published": "2013-02-01",
     "text": "Amicus briefs on the pension reform dispute argue about vested benefits."},
    {"doc_id": "mining-lease-ruling", "title": "Mining lease", "published": "2002-01-01",
     "text": "The mining lease case: the Supreme Court ruled for the petitioner."},
    {"doc_id": "zoning-general", "title": "Zoning", "published": "2001-01-01",
     "text": "Zoning boards hear appeals about land use."},
]  # fmt: skip

MEMORY_QUOTE = "The Court sided with the respondent on pension reform after long argument."  # in no page
_RULED = re.compile(r"([^.\n\]\[]*ruled for the (petitioner|respondent)[^.\n]*\.)")
_URL = re.compile(r"corpus://[\w-]+")


def write_justice(path: Path) -> Path:
    """The cases as a JUSTICE CSV (facts as HTML that names the parties, as upstream)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for index, (case_id, term, keyword, first, second, winner) in enumerate(CASES):
            facts = (
                f"<p>{first} and {second} disagreed about the {keyword}. The district court ruled for {second}; "
                f"the court of appeals affirmed. {first} petitioned the Supreme Court.</p>"
            )
            writer.writerow({
                "": str(index), "ID": case_id, "name": f"{first} v. {second}", "href": f"https://x.org/{case_id}",
                "docket": f"{case_id}-1", "term": term, "first_party": first, "second_party": second,
                "facts": facts, "facts_len": str(len(facts)), "majority_vote": "5", "minority_vote": "4",
                "first_party_winner": winner, "decision_type": "majority opinion",
                "disposition": "reversed" if winner == "True" else "affirmed", "issue_area": "Economic Activity",
            })  # fmt: skip
    return path


def write_corpus(path: Path) -> Path:
    """The dated report pages as a corpus JSONL."""
    path.write_text("".join(json.dumps(doc) + "\n" for doc in DOCS), encoding="utf-8")
    return path


def keyword(facts: str) -> str:
    """The case keyword its facts mention."""
    return next((k for k in KEYWORDS if k in facts), "")


def _claim(call: ScriptedCall) -> dict[str, Any]:
    """What the agent reports: a "ruled for" sentence it read, or (pension reform) a claim from memory."""
    if "pension reform" in call.inputs.get("facts", ""):
        return {"found": True, "winning_party": "respondent", "quote": MEMORY_QUOTE, "source": "corpus://nowhere"}
    seen = "\n".join(v for k, v in sorted(call.inputs.items()) if k.startswith("observation_"))  # tool results
    found = _RULED.search(seen)
    if found is None:
        return {"found": False, "winning_party": "unknown", "quote": "", "source": ""}
    urls = _URL.findall(seen)
    return {"found": True, "winning_party": found.group(2), "quote": found.group(1).strip(),
            "source": urls[-1] if urls else ""}  # fmt: skip


def make_engine(*, first: list[dict[str, Any]] | None = None) -> ScriptedEngine:
    """A scripted leakage agent: search the case keyword, scrape the first hit, report what it read.

    ``first``: :meth:`ScriptedEngine.when` keyword sets that take precedence over the defaults.
    """
    engine = ScriptedEngine()
    for rule in first or []:
        engine.when(**rule)
    script_search_read_finish(engine, lambda c: keyword(c.inputs.get("facts", "")))
    engine.when(
        predicate=lambda c: "found" in c.output_fields,
        found=lambda c: _claim(c)["found"],
        winning_party=lambda c: _claim(c)["winning_party"],
        quote=lambda c: _claim(c)["quote"],
        source=lambda c: _claim(c)["source"],
        disposition=lambda c: "reversed" if _claim(c)["found"] else "",
    )
    return engine
