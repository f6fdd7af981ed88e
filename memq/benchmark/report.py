"""The numbers of a benchmark build, measured the way :func:`memq.kg.check.check_gold` measures.

``exact`` counts every gold parse whose query returns its gold answers on the
final graph (an empty gold set included, as the check counts it);
``materialised`` the ones the builder made exact on purpose. The
drop-one-constraint pairs run over every query that executes, exact or not.
"""

from __future__ import annotations

from collections import Counter

from memq.kg.check import constraints, result_keys, same_answers
from memq.sparql import to_standard

from .density import DENSE
from .state import BuildState, Item

VERSION = "2"


def build_report(state: BuildState) -> dict:
    by_ds: dict[str, Counter] = {}
    reasons: Counter = Counter()
    failures = []
    pairs = {"pairs": 0, "changed": 0, "unchanged": [], "by_kind": {}}
    for it in state.items:
        c = by_ds.setdefault(it.dataset, Counter())
        c["parses"] += 1
        got = _answers(state, it)
        exact = got is not None and same_answers(got, it.gold_keys)
        c["exact"] += exact
        c["materialised"] += it.status == "ok"
        c["empty_gold"] += not it.parse.answers
        if it.status != "ok":
            reasons[_reason_class(it.reason)] += 1
            failures.append({"id": it.key, "reason": it.reason[:300], "exact_anyway": exact})
        if got is not None:
            _pairs(state, it, got, pairs)
    ok = state.ok_items()
    shares = [_real_share(state, it) for it in ok if it.touched]
    touched = sum(len(it.touched) for it in ok)
    touched_real = sum(round(_real_share(state, it) * len(it.touched)) for it in ok if it.touched)
    n_real = sum(1 for i in state.graph.info.values() if i.real)
    return {
        "version": VERSION,
        "parses": len(state.items),
        "exact": sum(c["exact"] for c in by_ds.values()),
        "materialised": len(ok),
        "by_dataset": {k: dict(v) for k, v in sorted(by_ds.items())},
        "failure_reasons": dict(reasons.most_common()),
        "failures": failures,
        "triples": len(state.graph.info) + 2,
        "mirrored_triples": len(state.graph.mirrored),
        "triples_real": n_real,
        "triples_synthetic": len(state.graph.info) - n_real + 2,
        "real_dropped_total": sum(state.dropped_real.values()),
        "real_dropped_by_relation": dict(state.dropped_real.most_common()),
        "touched_triples": touched,
        "touched_real_share": round(touched_real / touched, 4) if touched else 0.0,
        "mean_real_share_per_query": round(sum(shares) / len(shares), 4) if shares else 0.0,
        "queries_with_real_triples": sum(1 for x in shares if x > 0),
        "queries_all_real": sum(1 for x in shares if x == 1.0),
        "distractors": sum(1 for d in state.distractors if not d.startswith(DENSE + "|")),
        "dense_distractors": sum(1 for d in state.distractors if d.startswith(DENSE + "|")),
        "dense_distractors_by_kind": dict(sorted(Counter(d.rsplit("|", 1)[-1] if d.endswith("|sibling")
                                                         else "fill" for d in state.distractors
                                                         if d.startswith(DENSE + "|")).items())),
        "distractors_removed": dict(state.removed_distractors),
        "constraint_pairs": pairs["pairs"],
        "constraint_pairs_changed": pairs["changed"],
        "constraint_change_rate": round(pairs["changed"] / pairs["pairs"], 4) if pairs["pairs"] else None,
        "constraint_pairs_by_kind": {k: {"pairs": v[0], "changed": v[1]} for k, v in sorted(pairs["by_kind"].items())},
        "constraint_pairs_unchanged": pairs["unchanged"],
        **state.stats,
    }


def _answers(state: BuildState, item: Item) -> set[str] | None:
    if item.query is None or item.query.answer_var is None:
        return None
    try:
        return result_keys(state.graph.run(item.sparql), item.query.answer_var.name)
    except (SyntaxError, OSError, ValueError):
        return None


def _pairs(state: BuildState, item: Item, got: set[str], out: dict) -> None:
    var = item.query.answer_var.name
    for kind, what, loose in constraints(item.query, item.topic):
        try:
            diff = not same_answers(result_keys(state.graph.run(to_standard(loose)), var), got)
        except (SyntaxError, OSError, ValueError):
            continue
        out["pairs"] += 1
        out["changed"] += diff
        k = out["by_kind"].setdefault(kind, [0, 0])
        k[0] += 1
        k[1] += diff
        if not diff:
            why = state.pair_notes.get((item.key, what), "its change came from a distractor removed later")
            if item.status != "ok":
                why = f"query not materialised ({_reason_class(item.reason)}); {why}"
            out["unchanged"].append({"id": item.key, "constraint": f"{kind}: {what}", "why": why})


def _real_share(state: BuildState, item: Item) -> float:
    real = sum(1 for t in item.touched if (info := state.graph.info.get(t)) is not None and info.real)
    return real / len(item.touched)


def _reason_class(reason: str) -> str:
    head = reason.split(":")[0]
    if head.startswith("cannot materialise answer"):
        return "cannot materialise: " + reason.split(": ", 1)[1][:90]
    if head in ("unsupported", "contradictory", "parse error"):
        return reason[:90]
    return head
