"""The statement ranker: its training data replayed on a tiny KG, its place in the grounded planner's search, and a
real (tiny) training run that stops and resumes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from test_plan_grounded import BIEBER, BROTHER, JAMAICA, bank, kg, planner  # noqa: F401 (fixtures)

from memq.errors import MemQError
from memq.plan import candidates
from memq.plan.derive import DerivedPlan
from memq.plan.format import parse_plan
from memq.plan.grounded import GroundedConfig, GroundedPlanner, Neighbourhood
from memq.plan.hybrid import HybridPlanner
from memq.plan.lines import Hyp
from memq.plan.rank_data import read_groups, step_groups, training_groups, write_groups
from memq.plan.rank_train import evaluate, train
from memq.plan.ranker import StatementRanker, candidate_text, query_text, rank_candidates
from memq.reconstruct import Draft, Reconstructor

SPOKEN = "Find the languages spoken of the country Jamaica, assign it to ?x.\nFinally the answer is ?x."
OFFICIAL = "Find the official language of the country Jamaica, assign it to ?x.\nFinally the answer is ?x."


class KeywordRanker:
    """Scores a candidate by whether it holds ``word``; records what it was asked."""

    name = "keyword"

    def __init__(self, word: str, margin: float = 5.0) -> None:
        self.word, self.margin = word, margin
        self.asked: list[tuple[str, list[str]]] = []
        self.seconds = 0.0  # as the real rankers count their time: a quarter of a second a call here

    def score(self, query, candidates):
        self.asked.append((query, list(candidates)))
        self.seconds += 0.25
        return np.array([self.margin if self.word in c else 0.0 for c in candidates], dtype=np.float32)


def ranked(kg, bank, target, ranker, **config) -> GroundedPlanner:  # noqa: F811
    p = planner(kg, bank, target, **config)
    p.ranker = ranker
    return p


def test_the_ranker_cuts_each_step_to_its_best_candidates(kg, bank):  # noqa: F811
    """The model likes "languages spoken"; with rank_top=1 only the ranker's choice is offered, so it is planned."""
    plan = ranked(kg, bank, SPOKEN, KeywordRanker("official"), rank_top=1).plan("jamaica's language?", JAMAICA)
    assert plan.raw == OFFICIAL
    first = plan.ranked[0]
    assert first["step"] == 1 and first["plan_so_far"] == []
    assert {c["statement"] for c in first["candidates"]} == {"official"}  # one statement offered, each target a line
    assert all(c["bonus"] == 0.0 and c["ranker"] == 5.0 for c in first["candidates"])
    assert any(c["llm"] is not None for c in first["candidates"])  # the model's score beside the ranker's


def test_the_ranker_s_weight_decides_between_it_and_the_model(kg, bank):  # noqa: F811
    question = "what language do they speak in jamaica?"
    follows_model = ranked(kg, bank, SPOKEN, KeywordRanker("official"), rank_weight=0.0).plan(question, JAMAICA)
    assert follows_model.raw == SPOKEN
    follows_ranker = ranked(kg, bank, SPOKEN, KeywordRanker("official", margin=1000.0), rank_weight=1.0).plan(
        question, JAMAICA)
    assert follows_ranker.raw == OFFICIAL
    spoken = [c for c in follows_ranker.ranked[0]["candidates"] if c["statement"] == "spoken"]
    assert spoken and all(c["bonus"] == -1000.0 for c in spoken)
    assert follows_ranker.cost["ranker"] == "keyword" and follows_ranker.cost["ranked_pairs"] >= 2


def test_a_plan_s_cost_counts_the_ranker_s_seconds_while_it_planned(kg, bank):  # noqa: F811
    r = KeywordRanker("official")
    r.seconds = 10.0  # spent before this plan: not its own
    plan = ranked(kg, bank, SPOKEN, r).plan("what language do they speak in jamaica?", JAMAICA)
    assert r.asked and plan.cost["ranker_seconds"] == pytest.approx(0.25 * len(r.asked))
    assert "ranker_seconds" not in planner(kg, bank, SPOKEN).plan("what language do they speak in jamaica?",
                                                                  JAMAICA).cost  # no ranker, no figure


def test_the_ranker_reads_the_question_and_the_plan_so_far(kg, bank):  # noqa: F811
    r = KeywordRanker("sibling")
    plan = ranked(kg, bank, BROTHER, r).plan("who is justin bieber's brother?", BIEBER)
    assert plan.raw == BROTHER
    queries = [q for q, _ in r.asked]
    assert queries[0] == "who is justin bieber's brother?"
    assert any(q.endswith("| Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.")
               for q in queries)
    first = sorted(r.asked[0][1])
    assert first == ["the pet of the siblings of the person Justin Bieber",
                     "the sibling of the siblings of the person Justin Bieber"]
    offered = {c["statement"] for c in plan.ranked[0]["candidates"]}
    assert offered == {"sibling"}  # scored before the probe; "pet" has no second edge, so it is not offered


def test_statements_no_training_question_gave_are_offered_only_where_none_that_one_gave_binds(kg, bank):  # noqa: F811
    """With unseen_top 0, the schema's statements (no question ids) wait until no statement a training question
    gave binds at the step: Jamaica's "official" (seen) is offered alone; Bieber's siblings, where no seen
    statement binds, come from the unseen ones, and the trace says so."""
    from test_plan_grounded import STATEMENTS

    from memq.memory.bank import MemoryBank
    from memq.memory.embed import HashingEmbedder
    from memq.types import MemoryRecord, Statement

    seen = {"official", "gender"}
    mixed = MemoryBank.build([MemoryRecord(Statement(i, s, q, tuple(re.findall(r"ns:(\S+)", q)),
                                                     ("WebQTrn-1",) if i in seen else ()), (d,), "template")
                              for i, s, q, d in STATEMENTS], HashingEmbedder())
    start = Hyp(draft=Draft(), rec=Reconstructor(JAMAICA))
    both = ranked(kg, mixed, "", KeywordRanker("spoken"), unseen_top=-1)
    finds = {line.statement.id for line in both._lines(start, JAMAICA, ["Jamaica"], both.lm, Neighbourhood(kg), {},
                                                       "jamaica's language?", []) if line.kind == "find"}
    assert finds == {"spoken", "official"}
    first = ranked(kg, mixed, "", KeywordRanker("spoken"), unseen_top=0)
    trace: list[dict] = []
    finds = {line.statement.id for line in first._lines(start, JAMAICA, ["Jamaica"], first.lm, Neighbourhood(kg), {},
                                                        "jamaica's language?", trace) if line.kind == "find"}
    assert finds == {"official"} and len(trace) == 1 and "unseen" not in trace[-1]
    plan = ranked(kg, mixed, BROTHER, KeywordRanker("sibling"), unseen_top=0).plan(
        "who is justin bieber's brother?", BIEBER)
    assert plan.raw == BROTHER  # no seen statement binds at Bieber: the unseen sibling statement is offered
    plain = ranked(kg, bank, BROTHER, KeywordRanker("sibling")).plan("who is justin bieber's brother?", BIEBER)
    assert plain.raw == BROTHER and not any("unseen" in n for n in plain.notes)  # no statement seen: no split
    assert not any("unseen" in e for e in plain.ranked)
    assert plan.ranked[0]["unseen"] is True and plan.ranked[0]["candidates"]
    assert "unseen statement: step 1 from one no training question gave" in plan.notes
    assert "unseen" not in plan.ranked[1]  # step 2's gender statement was given by a training question
    # unseen_top 1: the unseen statements' best is offered beside the others, in an entry of its own, its bonus
    # measured from the best of all the step's candidates (the seen ones' from their own best); each candidate gets
    # the model's score
    beside = ranked(kg, mixed, SPOKEN, KeywordRanker("spoken", margin=3.0), unseen_top=1, rank_weight=1.0)
    plan = beside.plan("what language do they speak in jamaica?", JAMAICA)
    assert plan.raw == SPOKEN
    seen_entry, unseen_entry = plan.ranked[:2]
    assert {c["statement"] for c in seen_entry["candidates"]} == {"official"} and seen_entry["best"] == 0.0
    assert {c["statement"] for c in unseen_entry["candidates"]} == {"spoken"} and unseen_entry["unseen"] is True
    assert all(c["bonus"] == 0.0 for c in seen_entry["candidates"] + unseen_entry["candidates"])
    assert unseen_entry["best"] == 3.0
    below = ranked(kg, mixed, SPOKEN, KeywordRanker("official", margin=3.0), unseen_top=1, rank_weight=1.0)
    unseen_entry = below.plan("what language do they speak in jamaica?", JAMAICA).ranked[1]
    assert all(c["bonus"] == -3.0 for c in unseen_entry["candidates"])  # 3 below the seen "official"
    none, entry = rank_candidates(KeywordRanker("x"), [], "q", [], pool=5, weight=1.0, best=3.0)
    assert none == [] and entry["best"] == 3.0  # no unseen candidate renders: nothing ranked, no crash
    assert any(c["llm"] is not None for c in unseen_entry["candidates"])
    # the ranker's groups hold what the planner ranks: at ?x the seen gender statement alone, at Bieber (no seen
    # statement there) the unseen ones
    groups = step_groups(brother_plan(), GroundedPlanner(None, kg=kg, bank=mixed), Neighbourhood(kg))
    assert [[t for t, _ in g["candidates"]] for g in groups] == [
        ["the pet of the siblings of the person Justin Bieber",
         "the sibling of the siblings of the person Justin Bieber"],
        ["the gender of the person ?x"]]
    every = step_groups(brother_plan(), GroundedPlanner(None, kg=kg, bank=mixed, config=GroundedConfig(unseen_top=-1)),
                        Neighbourhood(kg))
    assert len(every[1]["candidates"]) == 3


def test_search_settings_of_the_ranker_are_checked_by_name():
    with pytest.raises(ValueError, match="rank_top"):
        GroundedConfig(rank_top=0)
    with pytest.raises(ValueError, match="rank_weight"):
        GroundedConfig(rank_weight=-1.0)
    with pytest.raises(ValueError, match="unseen_top must be an int >= -1.*-2"):
        GroundedConfig(unseen_top=-2)


def brother_plan() -> DerivedPlan:
    steps = parse_plan(BROTHER, ["Justin Bieber"]).steps
    return DerivedPlan("WebQTrn-9", "who is justin bieber's brother?", "webqsp", "WebQTrn-9.P0",
                       (("m.06w2sn5", "Justin Bieber"),), tuple(steps), ("sibling", "gender", "gender", None))


def test_gold_plans_replay_into_groups_of_the_planner_s_own_candidates(kg, bank):  # noqa: F811
    p = GroundedPlanner(None, kg=kg, bank=bank)
    groups = step_groups(brother_plan(), p, Neighbourhood(kg))
    assert [g["step"] for g in groups] == [0, 1]
    first, second = groups
    assert first["query"] == "who is justin bieber's brother?"
    assert first["positive"] == "the sibling of the siblings of the person Justin Bieber" and first["in_candidates"]
    texts = [t for t, _ in first["candidates"]]
    assert "the pet of the siblings of the person Justin Bieber" in texts  # first edge binds: a near miss
    assert not any("Jamaica" in t or "country" in t for t in texts)  # edges Bieber lacks are never candidates
    assert second["query"].endswith("| Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.")
    assert second["positive"] == "the gender of the person ?x" and second["in_candidates"]


def test_group_files_resume_and_a_missing_statement_counts_as_a_miss(kg, bank, tmp_path):  # noqa: F811
    p = GroundedPlanner(None, kg=kg, bank=bank)
    out = tmp_path / "groups.jsonl"
    gold = brother_plan()
    unknown = DerivedPlan("WebQTrn-10", "what currency?", "webqsp", "p", (("m.03_r3", "Jamaica"),),
                          tuple(parse_plan("Find the currency of the country Jamaica, assign it to ?x.\n"
                                           "Finally the answer is ?x.", ["Jamaica"]).steps), ("nosuch", None))
    write_groups([gold], p, out)
    write_groups([gold, unknown], p, out)  # the first question is not replayed again
    groups = read_groups(out)
    assert [g["id"] for g in groups] == ["WebQTrn-9", "WebQTrn-9", "WebQTrn-10"]
    assert groups[-1]["positive"] is None
    assert len(read_groups(out, usable=True)) == 2
    figures = evaluate(None, groups)
    assert figures["steps"] == 3 and figures["minilm"]["recall@10"] == pytest.approx(2 / 3, abs=1e-4)
    assert len(training_groups([(out, 1)])) == 2 and len(training_groups([out], bound_only=True)) == 2


def test_where_the_kg_lacks_the_entity_the_schema_gives_the_statements_its_class_starts(kg, bank):  # noqa: F811
    """GrailQA's synthetic programs name entities the benchmark KG lacks: no statement binds there, so with the
    schema index a step's candidates are the statements that start from the gold statement's class."""
    from memq.plan.rank_data import schema_index

    ghost = DerivedPlan("syn-1", "what currency does ghostland use?", "grailqa-synthetic", "syn-1",
                        (("m.0ghost", "Ghostland"),),
                        tuple(parse_plan("Find the currency used of the country Ghostland, assign it to ?x.\n"
                                         "Finally the answer is ?x.", ["Ghostland"]).steps), ("currency", None))
    p = GroundedPlanner(None, kg=kg, bank=bank)
    [bare] = step_groups(ghost, p, Neighbourhood(kg))
    assert bare["candidates"] == [] and not bare["in_candidates"] and "from_schema" not in bare
    [group] = step_groups(ghost, p, Neighbourhood(kg), schema_index(bank))
    assert group["from_schema"] and group["in_candidates"]
    assert group["positive"] == "the currency used of the country Ghostland"
    assert sorted(t for t, _ in group["candidates"]) == ["the currency used of the country Ghostland",
                                                         "the languages spoken of the country Ghostland",
                                                         "the official language of the country Ghostland"]
    for limit in (1, 2):  # the statements most similar to the question, the gold one always among them
        [cut] = step_groups(ghost, p, Neighbourhood(kg), schema_index(bank), limit=limit)
        assert len(cut["candidates"]) == limit and cut["in_candidates"]


def test_a_gzipped_group_file_reads_and_hashes_as_the_file_it_was_made_from(kg, bank, tmp_path):  # noqa: F811
    import gzip
    import shutil

    from memq.plan.rank_data import groups_hash

    out = tmp_path / "groups.jsonl"
    write_groups([brother_plan()], GroundedPlanner(None, kg=kg, bank=bank), out)
    packed = tmp_path / "groups.jsonl.gz"
    with open(out, "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert read_groups(packed) == read_groups(out)
    assert groups_hash([packed]) == groups_hash([out])
    out.write_text(out.read_text() + "\n")  # another text, another hash
    assert groups_hash([packed]) != groups_hash([out])


def test_query_and_candidate_texts():
    assert query_text("  who is  x? ") == "who is x?"
    assert query_text("q?", ["Find a, assign it to ?x."]) == "q? | Find a, assign it to ?x."


@pytest.mark.slow
def test_a_tiny_training_run_stops_resumes_and_loads(kg, bank, tmp_path):  # noqa: F811
    """Two groups, a real MiniLM cross-encoder: the stopped run resumes to the same step count, the saved ranker
    loads through its manifest and learns to put the positive first on its own training data."""
    p = GroundedPlanner(None, kg=kg, bank=bank)
    data = write_groups([brother_plan()], p, tmp_path / "g.jsonl")
    out = tmp_path / "ranker"
    train([data], out, epochs=8, batch_groups=2, negatives=3, lr=3e-4, stop_after=1e-9, log=lambda m: None)
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["step"] == 1 and not (out / "manifest.json").exists()
    train([data], out, epochs=8, batch_groups=2, negatives=3, lr=3e-4, resume=True, dev=[data], dev_pool=50,
          log=lambda m: None)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dev_metrics"]["g.jsonl"]["ranker"]["pool"] == manifest["training"]["dev_pool"] == 50
    assert manifest["training"]["steps"] == 8 and not (out / "checkpoint").exists()
    assert manifest["dev_metrics"]["g.jsonl"]["ranker"]["recall@1"] == 1.0
    ranker = StatementRanker.load(out)
    group = read_groups(data)[0]
    scores = ranker.score(group["query"], [t for t, _ in group["candidates"]])
    assert [t for t, _ in group["candidates"]][int(np.argmax(scores))] == group["positive"]
    (out / "ranker.safetensors").write_bytes(b"changed")
    with pytest.raises(MemQError, match="sha256"):
        StatementRanker.load(out, threads=1)


def test_a_missing_ranker_is_named():
    with pytest.raises(MemQError, match="statement ranker manifest"):
        StatementRanker.load("no/such/ranker")


def test_candidate_text_names_the_known_nodes(bank):  # noqa: F811
    record = bank.get("sibling")
    assert candidate_text(record, {"?entity1": "?x"}) == "the sibling of the siblings of the person ?x"


def test_the_trace_shows_the_hybrid_rescue_s_ranked_steps():
    from memq.ask import ranked_steps
    from memq.types import Plan

    rescue = Plan([], ranked=[{"step": 1, "scored": 2, "candidates": []}])
    assert ranked_steps(Plan([], rescue=rescue)) == rescue.ranked
    assert ranked_steps(Plan([])) == []


def test_a_missing_data_file_is_named(tmp_path):
    with pytest.raises(MemQError, match="no-such.jsonl"):
        read_groups(tmp_path / "no-such.jsonl")


def test_auto_takes_the_dataset_s_own_ranker_when_it_has_one(tmp_path, monkeypatch):
    from memq.plan import ranker as ranker_mod
    from memq.plan.ranker import ranker_choice

    shared, own = tmp_path / "ranker", tmp_path / "grailqa" / "ranker"
    for d in (shared, own):
        d.mkdir(parents=True)
        (d / "manifest.json").write_text("{}")
    monkeypatch.setattr(ranker_mod, "DEFAULT_RANKER", shared)
    assert ranker_choice("auto", "grailqa") == own and ranker_choice(None, "grailqa") == own
    assert ranker_choice("auto", "webqsp") == shared and ranker_choice("auto") == shared
    assert ranker_choice("none", "grailqa") is None and ranker_choice("x/y", "grailqa") == Path("x/y")
    (shared / "manifest.json").unlink()
    assert ranker_choice("auto", "cwq") is None


def test_find_lines_after_the_first_step_are_made_when_the_search_reaches_them(kg, bank, monkeypatch):  # noqa: F811
    """One line a step: where the model goes on with Make sure or Finally, that step's Find lines (the ranker's
    work) are never made; made at once (a tokenizer that does not start Find lines with "Find") they are."""
    question = "who is justin bieber's brother?"
    lazy_ranker, eager_ranker = KeywordRanker("sibling"), KeywordRanker("sibling")
    lazy = ranked(kg, bank, BROTHER, lazy_ranker, beam=1, lines=1).plan(question, BIEBER)
    eager_planner = ranked(kg, bank, BROTHER, eager_ranker, beam=1, lines=1)
    monkeypatch.setattr(eager_planner, "_find_start", lambda lm: None)
    eager = eager_planner.plan(question, BIEBER)
    assert lazy.raw == eager.raw == BROTHER and lazy.beam == eager.beam
    # steps 3 and 4 (Make sure, Finally): their Find candidates are never made, as the search does not go there
    assert len(eager_ranker.asked) == 4 and len(lazy_ranker.asked) == 2
    assert [e["step"] for e in lazy.ranked] == [1, 2] and [e["step"] for e in eager.ranked] == [1, 2, 3, 4]
    assert lazy.cost["candidates"] < eager.cost["candidates"]


def test_the_warm_up_builds_what_the_first_question_would(kg, bank, monkeypatch):  # noqa: F811
    """memq serve and memq demo call warm_up before the first question: the first-edge index, the question prior
    and the ranker are then ready, and the first plan builds none of them; the plan is the same."""
    question = "what language do they speak in jamaica?"
    cold = ranked(kg, bank, SPOKEN, KeywordRanker("official"), prior=1.5)
    cold_plan = cold.plan(question, JAMAICA)
    warm_ranker = KeywordRanker("official")
    warm = ranked(kg, bank, SPOKEN, warm_ranker, prior=1.5)
    built: list[str] = []
    real = candidates.first_edges

    def counted(*args):
        built.append("edges")
        return real(*args)

    monkeypatch.setattr(candidates, "first_edges", counted)
    warm.warm_up()
    assert built == ["edges"] and "_first_edges" in warm.__dict__ and warm._prior_built
    assert warm_ranker.asked == [("warm-up", ["warm-up"])]  # the ranker's session runs once
    warm_plan = warm.plan(question, JAMAICA)
    assert built == ["edges"] and warm_plan.raw == cold_plan.raw and warm_plan.beam == cold_plan.beam
    HybridPlanner(warm, free=object()).warm_up()  # the hybrid planner warms the grounded planner that rescues
    assert len(warm_ranker.asked) > 1 and warm_ranker.asked[-1] == ("warm-up", ["warm-up"])
