"""memq kg check: answer comparison, constraint removal, the summary, the CLI."""

from __future__ import annotations

import argparse
import json

import pytest
from kg_sample import sample_questions, write_sample

from memq.datasets import GoldParse, GoldQuestion
from memq.kg import OxigraphStore
from memq.kg.check import answer_key, check_gold, constraints, same_answers
from memq.kg.cli import main, register
from memq.sparql import parse_query
from memq.sparql.model import FB, XSD, Iri, Literal

PREFIX = "PREFIX ns: <http://rdf.freebase.com/ns/>\n"
# a CVT query with a constraint triple, the two standard filters, a time filter and ORDER BY/LIMIT
CVT = PREFIX + """SELECT DISTINCT ?x WHERE {
FILTER (?x != ns:m.t)
FILTER (!isLiteral(?x) OR lang(?x) = '' OR langMatches(lang(?x), 'en'))
ns:m.t ns:r.a ?y .
?y ns:r.b ?x .
?y ns:r.kind ns:m.k .
FILTER(NOT EXISTS {?y ns:r.from ?sk0} || EXISTS {?y ns:r.from ?sk1 .
FILTER(xsd:datetime(?sk1) <= "2010-12-31"^^xsd:dateTime) })
} ORDER BY ?x LIMIT 5"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """m.t has three CVTs: two of kind m.k (one starting 2012), one of kind m.other."""
    lines = []
    for cvt, answer, kind, start in [("c1", "a1", "k", "2001"), ("c2", "a2", "k", "2012"), ("c3", "a3", "other", None)]:
        lines += [f"<{FB}m.t> <{FB}r.a> <{FB}m.{cvt}> .", f"<{FB}m.{cvt}> <{FB}r.b> <{FB}m.{answer}> .",
                  f"<{FB}m.{cvt}> <{FB}r.kind> <{FB}m.{kind}> ."]
        if start:
            lines.append(f'<{FB}m.{cvt}> <{FB}r.from> "{start}"^^<{XSD}gYear> .')
    path = tmp_path_factory.mktemp("tiny") / "tiny.nt"
    path.write_text("\n".join(lines) + "\n")
    return OxigraphStore.from_file(path)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    path = tmp_path_factory.mktemp("kg") / "sample.nq.gz"
    return path, write_sample(path, 40)


def test_answer_keys():
    assert answer_key(Iri(FB + "m.06w2sn5")) == "m.06w2sn5"
    assert answer_key(Literal("3", XSD + "integer")) == answer_key("3.0") == "n:3"
    assert answer_key(Literal("123456789.123", XSD + "double")) == answer_key("1.23457e+08")
    assert answer_key(Literal("1961-08-04T00:00:00Z", XSD + "dateTime")) == "d:1961-08-04"
    assert answer_key("2009-05-03T10:00:00") == "d:2009-05-03-10:00:00"
    assert answer_key(Literal("English", None, "en")) == "English"


def test_date_prefix_matching():
    assert same_answers({answer_key("2009-01-01T00:00:00")}, {answer_key("2009")})
    assert same_answers({answer_key("1961-08-04")}, {answer_key("1961-08-04T00:00:00")})
    assert not same_answers({answer_key("1961-09-04")}, {answer_key("1961-08")})
    assert not same_answers({answer_key("20090")}, {answer_key("2009")})
    assert not same_answers({"m.1", "m.2"}, {"m.1"})
    assert same_answers(set(), set())


def test_constraints_found_and_removed():
    query = parse_query(CVT)
    found = constraints(query, "m.t")
    assert [kind for kind, _, _ in found] == ["filter", "triple", "order"]
    _, what, loose = found[1]
    assert what == "?y r.kind m.k"
    assert len(loose.where.triples) == 2 and loose.where.filters == query.where.filters
    assert len(found[0][2].where.filters) == 2  # the time filter went, the two standard ones stayed
    assert found[2][2].limit is None and not found[2][2].order_by
    # a one-hop query has no constraint: the standard filters don't count, its triple is the main path
    simple = parse_query(PREFIX + "SELECT ?x WHERE { FILTER (?x != ns:m.t) ns:m.t ns:r.a ?x . }")
    assert constraints(simple, "m.t") == []


def _question(sparql: str, answers) -> GoldQuestion:
    parse = GoldParse("Q1.P0", sparql, (("m.t", "T"),), tuple((a, a) for a in answers))
    return GoldQuestion("Q1", "q?", "webqsp", "test", (parse,))


def test_check_gold_counts_exact_and_changed(tiny):
    summary = check_gold(tiny, [_question(CVT, ["m.a1"])], drop_constraint=True, timeout=10)
    assert (summary["queries"], summary["executed"], summary["exact"]) == (1, 1, 1)
    assert summary["questions_exact"] == 1 and summary["errors"] == []
    # each of the time filter and the kind triple matters here; ORDER BY/LIMIT 5 does not
    assert summary["constraint_pairs"] == 3 and summary["changed"] == 2
    assert summary["by_kind"]["order"] == {"pairs": 1, "changed": 0}
    wrong = check_gold(tiny, [_question(CVT, ["m.a2"])])
    assert wrong["exact"] == 0 and wrong["inexact"] == ["Q1.P0"] and "changed" not in wrong


def test_check_gold_records_errors(tiny):
    broken = _question(PREFIX + "SELECT ?x WHERE { ns:m.t ns:r.a ", ["m.a1"])
    summary = check_gold(tiny, [broken])
    assert summary["executed"] == 0 and summary["errors"][0]["id"] == "Q1.P0"
    assert summary["errors"][0]["reason"]


def test_check_gold_on_real_sample(sample):
    path, ids = sample
    store = OxigraphStore.from_file(path)
    questions = sample_questions(ids)
    summary = check_gold(store, questions, drop_constraint=True)
    assert summary["queries"] == sum(len(q.parses) for q in questions)
    assert summary["executed"] == summary["queries"]
    assert 0 < summary["exact"] <= summary["nonempty"] <= summary["executed"]
    assert "WebQTest-0.P0" not in summary["inexact"]
    assert summary["constraint_pairs"] >= summary["changed"] > 0


def test_cli_check_json(sample, capsys):
    path, _ = sample
    code = main(["kg", "check", "--dataset", "webqsp", "--split", "test", "--store", str(path),
                 "--no-cache", "--limit", "3", "--json", "--drop-constraint"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {"queries", "executed", "exact", "errors", "constraint_pairs", "changed"} <= set(out)
    assert out["queries"] >= 3 and out["dataset"] == "webqsp"


def test_cli_query_and_missing_store(sample, capsys, tmp_path):
    path, _ = sample
    sparql = PREFIX + "SELECT ?x WHERE { ns:m.03_r3 ns:location.country.languages_spoken ?x }"
    assert main(["kg", "query", sparql, "--store", str(path), "--no-cache"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["x"].startswith(FB)
    assert main(["kg", "query", sparql, "--store", str(tmp_path / "nope.nq.gz")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_register_adds_kg_group():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["kg", "check", "--dataset", "cwq", "--endpoint", "http://127.0.0.1:1/sparql"])
    assert args.handler.__name__ == "_check" and args.split == "test"
    assert parser.parse_args(["kg", "build-benchmark", "--no-progress"]).handler.__name__ == "_build_benchmark"
