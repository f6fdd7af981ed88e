"""Near-miss distractors: make every constraint of a gold query matter on the graph.

For each constraint that :func:`memq.kg.check.constraints` lists (a FILTER, a
constraint triple with an entity, ORDER BY/LIMIT) the query without it must
return something else than the gold answers, or the graph cannot tell a right
query from a sloppy one. Where that is not already so, one distractor answer is
added that satisfies the rest of the query and violates exactly that
constraint: a FILTER comes out false (``?x != ?c`` by making the answer its own
intermediate), a constraint triple is left out, an ORDER BY key ranks right
behind the gold answer; in an ordered query a FILTER or triple distractor also
ranks first, so that the loosened query picks it.

The distractor answer is preferably an entity the graph already has on the
query's main path (an answer of a sibling query without that constraint), so
that the sibling's answers do not change; otherwise it is a fresh synthetic
entity with a neutral English name (``Synthetic person 3f2a1c``).
"""

from __future__ import annotations

from collections import Counter

from memq.kg.check import answer_key, constraints, result_keys, same_answers
from memq.sparql import to_standard
from memq.sparql.model import Call, Group, Iri, Literal, Query, Var

from .order import OrderSpec, gold_key, key_better
from .paths import SYN, Want, synthetic
from .sources import is_mid
from .state import BuildState, Item
from .values import make_value, shift, to_python, value_kind

MAX_SIBLINGS = 3


def add_distractors(state: BuildState, first_pass: bool = True) -> None:
    """One distractor per constraint whose removal changes nothing yet.

    Every analysable gold query takes part, the failed ones too (their answers on
    the graph, not their gold answers, are what a distractor must leave alone):
    :func:`memq.kg.check.check_gold` counts the constraints of every query.
    """
    made = natural = 0
    failed: Counter = Counter()
    items = [it for it in state.items if it.shape is not None and not it.shape.unsupported]
    for item in state.bar(items, "distractors"):
        var = item.shape.answer.name
        full = result_keys(state.graph.run(item.sparql), var)
        for kind, what, loose in constraints(item.query, item.topic):
            did = f"{item.key}|{kind}|{what}"
            if did in state.distractors:
                continue
            loose_text = to_standard(loose)
            if not same_answers(result_keys(state.graph.run(loose_text), var), full):
                natural += first_pass
                continue
            outcome = _distract(state, item, kind, what, loose, loose_text, did, full)
            if outcome is True:
                made += 1
                state.pair_notes.pop((item.key, what), None)
            else:
                failed[outcome] += 1
                state.pair_notes[(item.key, what)] = outcome
    if first_pass:
        state.stats["constraints_natural"] = natural
    state.stats.setdefault("distractor_passes", []).append(
        {"made": made, "not_made": dict(failed.most_common())})


def _distract(state: BuildState, item: Item, kind: str, what: str, loose: Query, loose_text: str,
              did: str, full: set[str]) -> bool | str:
    """Try sibling answers, then a fresh entity; keep the first distractor that works.

    ``full`` is what the query returns now (its gold answers when it is exact).
    """
    var = item.shape.answer.name
    last = "every distractor answer tried was removed again: it added answers to another gold query"
    tried = state.distractor_tried.setdefault(did, set())
    for term, reuse in _answers(state, item, did, full):
        if term in tried:
            continue  # an earlier pass found it disturbs some gold query
        tried.add(term)
        outcome = _make(state, item, kind, what, loose, did, term, reuse)
        if outcome is not True:
            last = outcome
            continue
        if not same_answers(result_keys(state.graph.run(item.sparql), var), full):
            state.remove_distractor(did, "changed its own query")
            last = "the distractor also changes the full query"
        elif same_answers(result_keys(state.graph.run(loose_text), var), full):
            state.remove_distractor(did, "no effect")
            last = "the distractor does not reach the loosened query"
        else:
            return True  # stays in ``tried``: if the repair removes it, the next pass tries another
    return last


def _answers(state: BuildState, item: Item, did: str, full: set[str]):
    """Candidate distractor answers: entities on the main path that are not answers, then a fresh one."""
    gold = sorted(a for a, _ in item.answers)
    if not gold or is_mid(gold[0]) or gold[0].startswith(SYN):  # SYN: a count's members
        for term in _siblings(state, item, full):
            yield term, True
        yield synthetic("ent", item.key, "distractor", did), False
        return
    value = _other_value(state, item, gold[0])
    if value is not None:
        yield value, False


def _siblings(state: BuildState, item: Item, full: set[str]) -> list:
    """Entities the query's main path alone (no constraints, no FILTERs) reaches that are not answers."""
    path = [t for t in item.shape.variants[0].triples if t in item.shape.path_triples]
    if not path:
        return []
    probe = Query(where=Group(triples=tuple(path)), projection=item.query.projection, distinct=True,
                  limit=50)
    var = item.shape.answer.name
    out = []
    for row in state.graph.run(to_standard(probe)):
        term = row.get(var)
        if isinstance(term, Iri) and term.is_entity and answer_key(term) not in full | item.gold_keys:
            out.append(term)
    return sorted(out, key=lambda t: t.value)[:MAX_SIBLINGS]


def _other_value(state: BuildState, item: Item, gold: str):
    lit = state.binder.answer_term(item.shape, item.shape.variants[0], gold)
    try:
        kind, val = value_kind(lit), to_python(lit)[1]
    except Exception:  # noqa: BLE001 - an unparsable value answer gets a text variant
        return Literal(gold + " (other)")
    if kind == "text":
        return Literal(gold + " (other)", lit.datatype, lit.lang)
    for step in range(1, 50):
        cand = make_value(kind, shift(kind, val, step), lit.datatype)
        if answer_key(cand) not in item.gold_keys:
            return cand
    return None


def _make(state: BuildState, item: Item, kind: str, what: str, loose: Query, did: str, term,
          reuse: bool) -> bool | str:
    shape, q = item.shape, item.query
    variant = shape.variants[0]
    broken, skip, same = None, frozenset(), frozenset()
    spec = OrderSpec.of(q) if item.limited_order else None
    best = _gold_best_key(state, item, spec) if spec is not None else None
    if spec is not None and best is None:
        return "no ORDER BY key value for the gold answer"
    if kind == "filter":
        broken = int(what.split()[-1])
        f = q.where.filters[broken]
        if isinstance(f, Call) and f.op == "!=" and all(isinstance(a, Var) for a in f.args):
            same = frozenset(a.name for a in f.args if a != shape.answer)
    elif kind == "triple":
        missing = [t for t in q.where.triples if t not in loose.where.triples]
        if len(missing) != 1:
            return "ambiguous constraint triple"
        skip = frozenset(missing)
    if spec is None:
        want = Want(broken=broken)
    elif kind == "order":
        pred = spec.key_predicate(variant)

        def behind(b, attrs):  # every value of the key's relation in the distractor ranks after gold
            keys = [gold_key(spec, b)] + [spec.key_of(v) for (_, p), v in attrs.items() if p == pred and v]
            return all(key_better(spec, best, [k]) for k in keys)

        want = Want(extra=behind, extra_constants=tuple(spec.constants([best])))
    else:  # violates the constraint but would rank first without it
        want = Want(broken=broken, extra=lambda b, _: key_better(spec, gold_key(spec, b), [best]),
                    extra_constants=tuple(spec.constants([best])))
    b = state.binder.bind(item.key, shape, variant, term, reuse=reuse, salt="distractor:" + did, want=want,
                          skip=skip, same_as_answer=same, mutate=False)
    if isinstance(b, str):
        return b
    state.distractors[did] = state.commit(item, b, distractor=did)
    return True


def _gold_best_key(state: BuildState, item: Item, spec: OrderSpec):
    rows = state.graph.run(spec.unlimited_sparql(item.query))
    var = item.shape.answer.name
    best = None
    for r in rows:
        if var in r and answer_key(r[var]) in item.gold_keys:
            k = gold_key(spec, r)
            if k is not None and (best is None or key_better(spec, k, [best])):
                best = k
    return best
