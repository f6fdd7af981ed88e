"""Make every materialised gold query return exactly its gold answers on the shared graph.

Materialising one query can add answers to another (they share entities and
relations), and so can real triples and distractors. :func:`verify` runs all
gold queries, traces each extra answer to the triples that produce it (its
*witnesses*) and breaks every witness by removing a triple no gold query needs:
a distractor first, then a real triple (counted as dropped), then any other
unowned synthetic triple. When a witness consists only of needed triples, the
query is materialised again on private synthetic nodes; if that fails too, the
two gold annotations contradict each other and the query is listed as a conflict.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from memq.kg.check import same_answers
from memq.sparql import to_standard
from memq.sparql.model import Call, Literal, Query

from .density import DENSE
from .graph import TripleKey
from .paths import instantiate
from .state import BuildState, Item, triple_sort
from .values import TEXT, candidates, constants_of, make_value

log = logging.getLogger(__name__)

MAX_ROUNDS = 8
MAX_TRIES = 3
MAX_WITNESS_ROWS = 50
MAX_EXTRA = 100  # real and schema-true neighbours can give one query many extra answers at once


def verify(state: BuildState, label: str) -> None:
    """Fix rounds until every materialised query is exact; what is still wrong then fails."""
    for rnd in range(MAX_ROUNDS):
        bad = [it for it in state.ok_items() if not state.exact(it)]
        log.info("%s round %d: %d gold queries differ from gold", label, rnd, len(bad))
        if not bad:
            return
        for it in state.bar(bad, f"{label} fix {rnd}"):
            if it.status == "ok" and not state.exact(it):
                _fix(state, it)
    for it in state.ok_items():
        if not state.exact(it):
            state.fail(it, "still differs from gold after the fix rounds")


def _fix(state: BuildState, item: Item) -> None:
    got = state.answers(item)
    extra = [(k, t) for k, t in sorted(got.items()) if not any(same_answers([k], [g]) for g in item.gold_keys)]
    blocked: set[str] = set()
    traced = True
    for _, term in extra[:MAX_EXTRA]:
        found = witnesses(state, item, term)
        traced = traced and bool(found)
        for witness in found:
            if not all(t in state.graph for t in witness):
                continue  # already broken by an earlier removal
            if not _break(state, witness, item):
                blocked |= {o for t in witness for o in state.graph.info[t].owners if o != item.key}
    if not extra or blocked or not traced:
        _retry(state, item, blocked, [k for k, _ in extra])


def _retry(state: BuildState, item: Item, blocked: set[str], extra: list[str]) -> None:
    if item.tries < MAX_TRIES and (item.mode == "reuse" or item.limited_order or not extra):
        state.rollback(item)
        item.tries += 1
        item.mode = "isolated"
        state.materialise(item)
        return
    if extra:
        who = ", ".join(sorted(blocked)[:5]) or "real triples"
        state.fail(item, f"conflict: extra answers {extra[:3]} come from triples other gold queries need ({who})")
    else:
        state.fail(item, "gold answers missing on the shared graph")


def witnesses(state: BuildState, item: Item, term) -> list[set[TripleKey]]:
    """The sets of graph triples that make ``term`` an answer of the item's pattern (up to 50)."""
    q = item.query
    where = replace(q.where, filters=q.where.filters + (Call("sameterm", (q.answer_var, term)),))
    probe = Query(where=where, projection=(), distinct=False, limit=MAX_WITNESS_ROWS)
    out = []
    for row in state.graph.run(to_standard(probe)):
        for variant in item.shape.variants:
            keys = []
            for t in variant.triples:
                s, o = instantiate(t.s, row), instantiate(t.o, row)
                if s is None or o is None:
                    break
                keys.append((s, t.p, o))
            else:
                if all(k in state.graph for k in keys):
                    out.append(set(keys))
                    break
    return out


def _break(state: BuildState, witness: set[TripleKey], item: Item) -> bool:
    """Remove one triple of ``witness`` that no gold query needs; False when every one is needed."""
    # a schema-true (dense) distractor goes before a constraint's near-miss distractor
    ordered = sorted(witness, key=lambda k: (not _dense(state, k), triple_sort(k)))
    for key in ordered:
        info = state.graph.info[key]
        if info.distractors and not info.owners and not info.real:
            for d in sorted(info.distractors):
                if d.startswith(DENSE + "|"):
                    state.remove_distractor(d, "schema-true distractor added answers to a gold query")
                    continue
                state.remove_distractor(d, "disturbed another gold query")
                state.pair_notes[tuple(d.split("|", 2)[::2])] = f"its distractor added answers to {item.key}"
            return True
    # FB15k-237 (an older dump, added for density) goes before the gold-path and EPR triples
    for key in sorted(ordered, key=lambda k: not state.graph.info[k].source.startswith("fb15k237:")):
        info = state.graph.info[key]
        if info.real and not info.owners:
            state.drop_real(key)
            return True
    for key in ordered:
        info = state.graph.info[key]
        if not info.owners and not info.real:
            state.graph.remove(key)
            return True
    for key in ordered:
        if _swap(state, key, item):
            return True
    return False


def _dense(state: BuildState, key: TripleKey) -> bool:
    info = state.graph.info[key]
    return bool(info.distractors) and all(d.startswith(DENSE + "|") for d in info.distractors)


def _swap(state: BuildState, key: TripleKey, item: Item) -> bool:
    """Change a synthetic literal other queries own so that they still hold and ``item`` loses the witness."""
    s, p, o = key
    info = state.graph.info[key]
    if not isinstance(o, Literal) or info.real or info.distractors or not info.owners:
        return False
    kind = state.types.kind(p.local)
    if kind == TEXT:
        return False
    owners = [state.by_key[k] for k in sorted(info.owners)]
    exprs = [f for it in owners + [item] for v in it.shape.variants for f in v.filters]
    before = set(state.answers(item))
    for value in candidates(kind, constants_of(exprs)):
        new = (s, p, make_value(kind, value, state.types.datatype(p.local)))
        if new == key or new in state.graph:
            continue
        if state.try_swap([key], new, check=lambda: len(set(state.answers(item)) - item.gold_keys)
                          < len(before - item.gold_keys)):
            state.swap_value(key, new)
            state.stats["values_swapped"] = state.stats.get("values_swapped", 0) + 1
            return True
    return False
