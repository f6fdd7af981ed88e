"""Every real gold query: parse, rewrite, and the reference engines accept the rewrite."""

from __future__ import annotations

import random

import pyoxigraph
import pytest
from rdflib.plugins.sparql.parser import parseQuery

from memq.sparql import parse_query, to_readable, to_standard


def test_all_gold_queries_parse_and_pyoxigraph_accepts_every_rewrite(gold_parses):
    assert len(gold_parses) == 39202
    store = pyoxigraph.Store()
    rejected = []
    for pid, sparql in gold_parses:
        text = to_standard(parse_query(sparql))
        try:
            store.query(text)
        except SyntaxError as exc:
            rejected.append((pid, str(exc)))
    assert rejected == []


def test_rewrites_are_stable(gold_parses):
    for _, sparql in gold_parses[::7]:
        q = parse_query(sparql)
        assert parse_query(to_readable(q)) == q
        standard = to_standard(q)
        assert to_standard(parse_query(standard)) == standard


def _sample(gold_parses, n, seed=13):
    return random.Random(seed).sample(gold_parses, n)


def test_rdflib_accepts_a_sample_of_rewrites(gold_parses):
    for _, sparql in _sample(gold_parses, 300):
        parseQuery(to_standard(parse_query(sparql)))


@pytest.mark.slow
def test_rdflib_accepts_every_rewrite(gold_parses):
    # ~13 ms a query in rdflib: about 8 minutes for the whole corpus.
    for _, sparql in gold_parses:
        parseQuery(to_standard(parse_query(sparql)))
