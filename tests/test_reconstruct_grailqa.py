"""Reconstruction of GrailQA plans: class, superlative and count steps, and GrailQA's distinct-nodes boilerplate.

The derived plan of every GrailQA question is reconstructed with the statements it was derived from (oracle
recall) and run beside the gold query on small random graphs.
"""

from __future__ import annotations

import random

from grail_graphs import answers, random_graph, store

from memq import datasets
from memq.decompose import decompose_query
from memq.describe.template import TemplateDescriber
from memq.plan.derive import derive_plan
from memq.reconstruct import Reconstructor
from memq.reconstruct.assemble import answer_variable, build_query
from memq.reconstruct.ground import StepChoice
from memq.sparql import parse_query
from memq.sparql.model import Call, Var
from memq.types import Plan, Recalled, Trace

_DESCRIBER = TemplateDescriber()


def _oracle_query(question, distinct_nodes: bool = True):
    """The query reconstruction builds from the question's derived plan, each step given its own statement."""
    parse = question.parses[0]
    d = decompose_query(parse_query(parse.sparql), question.id, [m for m, _ in parse.topic_entities])
    by_id = {b.statement.id: b.statement for b in d.bounds}
    derived = derive_plan(question, lambda st: _DESCRIBER.describe([st])[0][0])
    choices = []
    for i, (step, sid) in enumerate(zip(derived.steps, derived.statement_ids, strict=True)):
        c = StepChoice(step, i)
        if sid and step.kind in ("find", "class"):
            c.kept = [Recalled(i, by_id[sid], "", 1.0)]
        elif sid and step.kind == "check" and by_id[sid].structure == "filter":
            c.filter_statement = Recalled(i, by_id[sid], "", 1.0)
        choices.append(c)
    trace = Trace()
    rec = Reconstructor(dict(parse.topic_entities), distinct_nodes=distinct_nodes)
    answer = answer_variable(Plan(steps=list(derived.steps), raw=derived.text), trace)
    return build_query(choices, rec, answer, trace), trace


def _question(qid: str):
    return next(q for q in datasets.load("grailqa", "all") if q.id == qid)


def test_count_superlative_and_class_steps_reach_the_query():
    counted, trace = _oracle_query(_question("3203950018000"))  # how many exhibition subjects ...
    assert counted.projection[0].var == Var("count")
    assert counted.projection[0].expr == Call("COUNT", (Var("x0"),), distinct=True)
    assert sum(t.p.local == "type.object.type" for t in counted.where.triples) == 2
    assert not trace.fallbacks
    earliest, _ = _oracle_query(_question("3206374001000"))  # the earliest established religious organization
    [sub] = earliest.where.subqueries
    assert sub.projection[0].var == Var("x2") and sub.projection[0].expr.op == "MIN"
    assert len(sub.where.triples) == len(earliest.where.triples)


def test_distinct_nodes_keeps_the_topic_entity_out_of_the_answers():
    q = _question("3203380009000")  # what short story has a character who also is in doing clarence a bit of good
    query, _ = _oracle_query(q)
    text = " ".join(str(f) for f in query.where.filters)
    assert "m.09gs5j0" in text  # ?x0 != the topic entity, as GrailQA's gold query says
    webqsp_style, _ = _oracle_query(q, distinct_nodes=False)
    assert "m.09gs5j0" not in " ".join(str(f) for f in webqsp_style.where.filters)


def test_reconstructed_grailqa_plans_answer_as_the_gold_queries_do():
    rng = random.Random(35)
    runs = same = 0
    for q in datasets.load("grailqa", "all"):
        gold = parse_query(q.parses[0].sparql)
        query, _ = _oracle_query(q)
        for _ in range(3):
            graph = store(random_graph(gold, rng))
            runs += 1
            try:
                same += answers(graph, query) == answers(graph, gold)
            except Exception:  # noqa: BLE001 - a query the engine rejects counts as a miss
                pass
    # Misses: dates with a time zone (GrailQA's "2009-01-08:00") that a plan writes as text, and numbers that a
    # plan's check compares by value where the gold query matches the term.
    assert same >= 0.99 * runs, (same, runs)


def test_distinct_nodes_leave_a_node_a_check_makes_equal_to_an_entity_the_same_node():
    """"video games with a rating of 7 are found where?" (GrailQA dev, tuning part): "Find the versions with this
    rating of the computer game rating 7 ... Find the rating of ?x0, assign it to ?rating. Make sure ?rating is 7."
    The check makes ?rating the entity the first step starts from; a ``!=`` between the two found nothing."""
    from memq.reconstruct.filters import pinned
    from memq.sparql.model import FB, Iri, Triple

    seven, rating = Iri(FB + "m.07vqd2x"), Var("rating")
    rel = Iri(FB + "cvg.computer_game_evaluation.rating")
    triples = [Triple(Var("x0"), rel, seven), Triple(Var("x0"), rel, rating),
               Triple(rating, Iri(FB + "cvg.computer_game_rating.rating_system"), Var("rating_system"))]
    check = Call("=", (rating, seven))
    assert pinned([check, Call("=", (Var("x"), Var("y")))]) == {rating: seven}

    def pairs(filters):
        rec = Reconstructor({"m.07vqd2x": "7"}, distinct_nodes=True)
        [_, distinct] = rec.boilerplate(Var("rating_system"), (), triples, filters)
        out, todo = set(), [distinct]
        while todo:
            e = todo.pop()
            if e.op == "&&":
                todo.extend(e.args)
            else:
                out.add(frozenset(e.args))
        return out

    assert frozenset((seven, rating)) in pairs([])
    kept = pairs([check])
    assert frozenset((seven, rating)) not in kept
    assert {frozenset((Var("x0"), rating)), frozenset((seven, Var("rating_system"))),
            frozenset((rating, Var("rating_system")))} <= kept


def test_a_linked_run_reconstructs_as_the_gold_entity_run_does():
    from memq.evaluate.run import for_dataset
    from memq.pipeline import Config

    grail = for_dataset(Config(), "grailqa")
    assert grail.distinct_nodes and grail.planner_dataset == "grailqa"
    assert not for_dataset(Config(), "webqsp").distinct_nodes
