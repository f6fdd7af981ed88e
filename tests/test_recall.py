"""Recall rules on hand-made hit lists and plan steps (no embedder, no memory bank, no KG, no planner).

A hit is ``(MemoryRecord, description, score)``, best first, as
:meth:`memq.memory.bank.MemoryBank.search` returns it.
"""

from __future__ import annotations

import pytest

from memq.recall import RULES, RecallConfig, query_text, recall_step, select
from memq.types import MemoryRecord, PlanStep, Statement


def hit(name: str, score: float, description: str | None = None, structure: str = "1") -> tuple:
    st = Statement(id=name, structure=structure, sparql=f"?entity1 ns:x.y.{name} ?entity2 .",
                   relations=(f"x.y.{name}",))
    desc = description or f"?entity2 is the {name} of ?entity1"
    return MemoryRecord(st, (desc,), "template"), desc, score


def ids(hits: list[tuple]) -> list[str]:
    return [h[0].statement.id for h in hits]


ADAPTIVE = RecallConfig(rule="adaptive", gamma1=0.90, gamma2=0.80)


# -- adaptive (MemQ Eq. 4) -------------------------------------------------------------

def test_adaptive_top1_above_gamma1_is_kept_alone():
    hits = [hit("a", 0.95), hit("b", 0.93), hit("c", 0.85)]
    kept, fallback = select(hits, "?entity2 is the a of ?entity1", ADAPTIVE)
    assert ids(kept) == ["a"]
    assert fallback is None


def test_adaptive_top1_exactly_gamma1_counts_as_above():
    kept, fallback = select([hit("a", 0.90), hit("b", 0.89)], "q", ADAPTIVE)
    assert ids(kept) == ["a"]
    assert fallback is None


def test_adaptive_statements_tied_with_the_top1_are_all_the_top1():
    # A relation and its reverse property can share a description: Eq. 4's "top-1" is then every tied one.
    hits = [hit("a", 1.0), hit("b", 1.0), hit("c", 0.99995), hit("d", 0.999)]
    kept, fallback = select(hits, "q", ADAPTIVE)
    assert ids(kept) == ["a", "b", "c"] and fallback is None
    kept, _ = select(hits, "q", RecallConfig(rule="memq-code"))
    assert ids(kept) == ["a", "b", "c"]


def test_adaptive_below_gamma1_keeps_every_hit_at_or_above_gamma2():
    hits = [hit("a", 0.88), hit("b", 0.85), hit("c", 0.80), hit("d", 0.79), hit("e", 0.50)]
    kept, fallback = select(hits, "q", ADAPTIVE)
    assert ids(kept) == ["a", "b", "c"]
    assert fallback is None


def test_adaptive_none_above_gamma2_keeps_top1_and_says_so():
    hits = [hit("a", 0.70), hit("b", 0.65)]
    kept, fallback = select(hits, "q", ADAPTIVE)
    assert ids(kept) == ["a"]
    assert fallback == "below-gamma2"


def test_adaptive_no_hits_is_no_candidates():
    assert select([], "q", ADAPTIVE) == ([], "no-candidates")


def test_adaptive_thresholds_move_the_cut():
    hits = [hit("a", 0.88), hit("b", 0.85), hit("c", 0.80)]
    assert ids(select(hits, "q", RecallConfig(gamma1=0.85, gamma2=0.5))[0]) == ["a"]
    assert ids(select(hits, "q", RecallConfig(gamma1=0.95, gamma2=0.86))[0]) == ["a"]
    assert ids(select(hits, "q", RecallConfig(gamma1=0.95, gamma2=0.84))[0]) == ["a", "b"]


# -- memq-code (the public MemQ code) --------------------------------------------------

CODE = RecallConfig(rule="memq-code")


def test_memq_code_top1_above_099_alone():
    hits = [hit("a", 0.995, "?entity2 is the zzz of ?entity1"), hit("b", 0.98, "?entity2 is the q of ?entity1")]
    kept, fallback = select(hits, "?entity2 is the q of ?entity1", CODE)
    assert ids(kept) == ["a"]
    assert fallback is None


def test_memq_code_exactly_099_is_not_enough():
    # 0.99 is not > 0.99: the word-overlap filter decides, and it prefers b.
    hits = [hit("a", 0.99, "completely different words"), hit("b", 0.98, "?entity2 is the spouse of ?entity1")]
    kept, _ = select(hits, "?entity2 is the spouse of ?entity1", CODE)
    assert ids(kept) == ["b"]


def test_memq_code_word_overlap_filter_among_top8():
    step = "?entity2 is the siblings of ?entity1"
    hits = [hit("a", 0.90, "?entity2 is the parents of ?entity1"),
            hit("b", 0.89, "?entity2 is the siblings of ?entity1"),
            hit("c", 0.88, "?entity2 is the siblings of ?entity1 too"),
            hit("d", 0.50, "nothing alike")]
    hits += [hit(f"f{i}", 0.4 - i / 100, f"filler {i}") for i in range(5)]
    hits.append(hit("late", 0.1, "?entity2 is the siblings of ?entity1"))  # 10th: outside the top 8
    kept, fallback = select(hits, step, CODE)
    # overlap: b = 1.0, c = 5/6 > 0.9 x 1.0? no (0.833); a = 4/6; so only b
    assert ids(kept) == ["b"]
    assert "late" not in ids(kept)
    assert fallback is None


def test_memq_code_keeps_ties_within_ten_percent_of_best_overlap():
    step = "?entity2 is the film of ?entity1"
    hits = [hit("a", 0.9, "?entity2 is the film of ?entity1"),
            hit("b", 0.8, "?entity2 is the film of ?entity1 x"),  # 5/6 < 0.9: dropped
            hit("c", 0.7, "?entity1 is the film of ?entity2")]  # same word set: kept
    kept, _ = select(hits, step, CODE)
    assert ids(kept) == ["a", "c"]


def test_memq_code_no_overlap_keeps_top1():
    kept, fallback = select([hit("a", 0.5, "xx"), hit("b", 0.4, "yy")], "zz", CODE)
    assert ids(kept) == ["a"]
    assert fallback is None


def test_memq_code_no_hits_is_no_candidates():
    assert select([], "q", CODE) == ([], "no-candidates")


# -- RecallConfig validation -------------------------------------------------------------

def test_config_defaults_are_valid():
    cfg = RecallConfig()
    assert cfg.rule in RULES
    assert 0 <= cfg.gamma2 <= cfg.gamma1 <= 1
    assert cfg.k >= 1


@pytest.mark.parametrize("kwargs, bad", [
    ({"rule": "top1"}, "'top1'"),
    ({"gamma1": 1.5}, "gamma1=1.5"),
    ({"gamma1": 0.7, "gamma2": 0.8}, "gamma2=0.8"),
    ({"gamma2": -0.1}, "gamma2=-0.1"),
    ({"k": 0}, "got 0"),
])
def test_config_rejects_bad_values_naming_them(kwargs, bad):
    with pytest.raises(ValueError) as exc:
        RecallConfig(**kwargs)
    assert bad in str(exc.value)


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        RecallConfig().gamma1 = 0.5  # type: ignore[misc]


# -- query_text -------------------------------------------------------------------------

def test_query_text_find_step_from_an_entity():
    step = PlanStep("find", "Find the siblings of Justin Bieber, assign it to ?x.", source="Justin Bieber",
                    relation="the siblings of Justin Bieber", target="?x")
    assert step.source == "Justin Bieber"
    assert query_text(step) == "?entity2 is the siblings of ?entity1"


def test_query_text_find_step_mention_is_case_insensitive():
    step = PlanStep("find", "Find the siblings of justin bieber, assign it to ?x.", source="Justin Bieber",
                    relation="the siblings of justin bieber", target="?x")
    assert query_text(step) == "?entity2 is the siblings of ?entity1"


def test_query_text_find_step_from_a_variable_does_not_touch_longer_names():
    step = PlanStep("find", "Find the film of ?x, assign it to ?x1.", source="?x",
                    relation="the film of ?x and ?x1", target="?x1")
    assert query_text(step) == "?entity2 is the film of ?entity1 and ?x1"


def test_query_text_structure3_step_uses_entity3():
    step = PlanStep("find", "Find the film of ?x with character Anakin, assign it to ?y.", source="?x",
                    relation="the film of ?x with character Anakin", target="?y", value="Anakin")
    assert query_text(step) == "?entity3 is the film of ?entity1 with character ?entity2"


def test_query_text_check_steps():
    with_relation = PlanStep("check", "Make sure the gender of ?x is Male.", target="?x", op="=", value="Male",
                             relation="the gender of ?x")
    assert query_text(with_relation) == "the gender of ?entity1 = ?value"
    plain = PlanStep("check", "Make sure ?x is not Justin Bieber.", target="?x", op="!=", value="Justin Bieber")
    assert query_text(plain) == "?entity1 != ?value"


def test_query_text_other_steps_are_their_text():
    step = PlanStep("sort", "Sort ?y in descending order and keep the first result.", target="?y", op="desc", limit=1)
    assert query_text(step) == step.text


# -- recall_step on a fake bank -----------------------------------------------------------

FIND_A = PlanStep("find", "Find the a of Justin Bieber, assign it to ?x.", source="Justin Bieber",
                  relation="the a of Justin Bieber", target="?x")

class FakeBank:
    def __init__(self, hits):
        self.hits = hits
        self.queries = []

    def search(self, text, k=5):
        self.queries.append((text, k))
        return self.hits[:k]


def test_recall_step_filters_structures_and_reports_candidates():
    bank = FakeBank([hit("f", 0.97, structure="filter"), hit("a", 0.85), hit("b", 0.83, structure="2"),
                     hit("c", 0.6)])
    step = FIND_A
    kept, candidates, fallback = recall_step(bank, step, 2, ADAPTIVE)
    assert bank.queries == [("?entity2 is the a of ?entity1", 24)]
    assert [r.statement.id for r in candidates] == ["a", "b", "c"]
    assert [r.statement.id for r in kept] == ["a", "b"]
    assert all(r.step_index == 2 for r in kept)
    assert fallback is None
    kept, _, fallback = recall_step(bank, step, 0, ADAPTIVE, structures=("filter",))
    assert [r.statement.id for r in kept] == ["f"]
    assert fallback is None


def test_recall_step_empty_bank_is_no_candidates():
    step = FIND_A
    assert recall_step(FakeBank([]), step, 0, ADAPTIVE) == ([], [], "no-candidates")


def test_query_text_find_step_without_a_parsed_relation_uses_its_text():
    step = PlanStep("find", "siblings of Justin Bieber", source="Justin Bieber", target="?x")
    assert query_text(step) == "?entity2 is siblings of ?entity1"


def test_an_unseen_statement_ranks_the_penalty_below_its_similarity():
    def seen(name: str, score: float) -> tuple:
        record, desc, s = hit(name, score)
        st = record.statement
        return MemoryRecord(Statement(st.id, st.structure, st.sparql, st.relations, ("WebQTrn-1",)),
                            record.descriptions, "template"), desc, s

    bank = FakeBank([hit("schema", 0.999), seen("train", 0.985), hit("other", 0.95)])
    kept, _, _ = recall_step(bank, FIND_A, 0, ADAPTIVE)
    assert [r.statement.id for r in kept] == ["schema"]
    penalised = RecallConfig(rule="adaptive", gamma1=0.90, gamma2=0.80, unseen_penalty=0.02)
    kept, candidates, fallback = recall_step(bank, FIND_A, 0, penalised)
    assert [r.statement.id for r in kept] == ["train"] and fallback is None
    # ranked by the penalised score, recorded with the similarity itself
    assert [(r.statement.id, r.score) for r in candidates] == [("train", 0.985), ("schema", 0.999), ("other", 0.95)]
    with pytest.raises(ValueError, match="unseen_penalty must be in"):
        RecallConfig(unseen_penalty=-0.1)
