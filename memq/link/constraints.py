"""Constraint entities a question does not name, suggested by the training questions nearest to it.

WebQSP lists, beside the entity a question names, the constraint entities its gold query compares with:
"who is niall ferguson's wife?" has Niall Ferguson and *Marriage* (a marriage's type of union), "what highschool
did harper lee go to?" has *High school*, "who is keyshia cole dad?" has *Male*. A linker cannot find them in
the question's words, and without them the plan's *Make sure* step or the CVT statement that names them has
nothing to name (docs/linking.md: 0.070 of end-to-end F1 on the first 144 WebQSP test questions).

Questions worded alike use the same constraints, so the ``neighbours`` training questions nearest to the
question (cosine of their MiniLM vectors: :meth:`memq.plan.prior.QuestionPrior.nearest`, the bank's embedder
and the planner prior's cached vectors) vote for the constraint entities of their gold parse, each with its
similarity:

    support(e) = sum of sim(q, n) over neighbours n whose constraints hold e / sum of sim(q, n) over all

and every entity with ``support >= min_support`` is suggested. Only training questions on the train side of
:func:`memq.plan.data.split_of` vote, so a dev question never votes for itself.

Some constraints are asked for in so many words: "what *state* did thomas jefferson live in?" (US State), "who is
his *father*?" (Male), "what *college* did ...?" (College/University). :class:`CueWords` counts, over the same
training questions, how often a question with a word (or a pair of adjacent words) used a constraint entity:

    share(e | w) = training questions with the word w and the constraint e / training questions with w

and suggests ``e`` for a question with ``w`` when that share is at least ``cue_share`` over at least
``cue_count`` questions (:class:`~memq.link.settings.LinkConfig`; 0.6 and 2 by default). Its support is the larger
of the two. A suggested entity is *optional*: the planner may name it but is not pushed to (the grounded planner's
entity coverage does not count it), and ``Trace.links`` lists it with its support and the neighbours that voted.

:func:`linked_entities` gathers what the pipeline gives the planner for a question asked without ids: the
entities, the optional ones (second readings, linked entities after the ``required`` best, suggestions) and the
second readings the prompt leaves out.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ..types import Trace
from .gold import gold_entities, prior_entities
from .linker import Linker
from .settings import LinkConfig


@dataclass(frozen=True)
class Suggestion:
    """A constraint entity suggested for a question, with the share of the neighbours' similarity behind it."""

    id: str
    name: str
    support: float
    voters: tuple[str, ...]  # the training questions that used it, nearest first
    cue: str = ""  # the question's words that training questions with it used (CueWords), if they suggested it

    def to_json(self) -> dict:
        out = {"id": self.id, "name": self.name, "suggested": "constraint", "support": round(self.support, 4),
               "voters": list(self.voters[:3])}
        return {**out, "cue": self.cue} if self.cue else out

    def why(self) -> str:
        return f"{self.name} ({self.id}, support {self.support:.2f}{f', cue {self.cue!r}' if self.cue else ''})"


STOP_WORDS = frozenset(
    "a an and are as at be by did do does for from had has have he her his how i in is it its me my of on or s "
    "she that the their them there they this to too was were what when where which who whom whose why with you "
    "your".split())


def cue_words(text: str) -> set[str]:
    """The cues of a question: its words but stop words (lower case; a plural's final s dropped), and its pairs of
    adjacent words with at least one such word ("state did", "high school")."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    plain = [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") and w not in STOP_WORDS else w
             for w in words]
    out = {w for w in plain if w not in STOP_WORDS}
    out.update(f"{a} {b}" for a, b in zip(plain, plain[1:], strict=False)
               if a not in STOP_WORDS or b not in STOP_WORDS)
    return out


ASKING = frozenset({"what", "which"})


def names_asked(cue: str, name: str) -> bool:
    """Whether ``cue`` is an asked pair ("what continent", "which countrie": :func:`cue_words`' plurals) whose noun is
    a word of the entity ``name`` (*Continent*, *Country*, *City/Town/Village*): the class the question asks for."""
    first, _, noun = cue.partition(" ")
    if first not in ASKING or not noun or noun in STOP_WORDS:
        return False
    words = set(re.findall(r"[a-z0-9]+", name.lower()))
    return noun in words or (noun.endswith("ie") and noun[:-2] + "y" in words)


class CueWords:
    """share(e | w): of the training questions with the cue ``w`` (:func:`cue_words`), the share whose gold parse
    used the constraint entity ``e``; kept where at least ``min_count`` questions did and the share is at least
    ``min_share``, or ``asked_share`` where ``w`` asks for the class ``e`` names (:func:`names_asked`: WebQSP lists
    *Continent* with a third of its "what continent ..." questions, those whose gold query checks it)."""

    def __init__(self, questions: Iterable[tuple[str, str]], constraints: dict[str, tuple[tuple[str, str], ...]], *,
                 min_share: float = 0.6, min_count: int = 3, asked_share: float = 0.0) -> None:
        if not 0 < min_share <= 1 or min_count < 1 or not 0 <= asked_share <= 1:
            raise ValueError(f"cue_share must be in (0, 1], asked_share in [0, 1] and cue_count >= 1, got "
                             f"{min_share!r}, {asked_share!r}, {min_count!r}")
        seen: Counter = Counter()
        joint: Counter = Counter()
        names = {}
        for qid, text in questions:
            cues = cue_words(text)
            seen.update(cues)
            for mid, name in constraints.get(qid, ()):
                names[mid] = name
                joint.update((cue, mid) for cue in cues)
        self.cues: dict[str, list[tuple[str, str, float]]] = {}
        for (cue, mid), n in sorted(joint.items()):
            floor = min(min_share, asked_share) if asked_share and names_asked(cue, names[mid]) else min_share
            if n >= min_count and n / seen[cue] >= floor:
                self.cues.setdefault(cue, []).append((mid, names[mid], n / seen[cue]))

    def suggest(self, question: str) -> dict[str, tuple[str, float, str]]:
        """Entity id -> (name, share, cue) for the cues of ``question``, the cue with the highest share."""
        out: dict[str, tuple[str, float, str]] = {}
        for cue in sorted(cue_words(question)):
            for mid, name, share in self.cues.get(cue, ()):
                if mid not in out or share > out[mid][1]:
                    out[mid] = (name, share, cue)
        return out


def constraint_entities(questions: Iterable, training: bool = False) -> dict[str, tuple[tuple[str, str], ...]]:
    """Question id -> the ``(id, name)`` of the gold topic entities it does not name (WebQSP's constraint
    entities); questions without any are left out. ``training``: named as the mention prior has a training question
    name them (:func:`memq.link.gold.prior_entities`), so that a CWQ training question has the constraint entities
    it kept from the WebQSP question it was made from (Male of "which of jfk's brothers ...")."""
    out = {}
    for q in questions:
        if not q.parses:
            continue
        named, every = gold_entities(q)
        if training:
            named = prior_entities(q)
        extra = tuple((mid, name) for mid, name in q.parses[0].topic_entities if mid in every - named)
        if extra:
            out[q.id] = extra
    return out


class ConstraintSuggester:
    """Votes of the nearest training questions for the constraint entities they used."""

    def __init__(self, prior, constraints: dict[str, tuple[tuple[str, str], ...]], *,
                 min_support: float = 0.5, cues: CueWords | None = None) -> None:
        if not 0 < min_support <= 1:
            raise ValueError(f"min_support is a share of the neighbours' similarity in (0, 1], got {min_support!r}")
        self.prior = prior
        self.constraints = constraints
        self.min_support = min_support
        self.cues = cues

    @classmethod
    def from_bank(cls, bank, *, neighbours: int = 10, min_support: float = 0.5,
                  link: LinkConfig | None = None) -> ConstraintSuggester | None:
        """The suggester of ``bank``'s training questions (their gold parses), or None when they use no
        constraint entity (GrailQA, a schema-only bank). ``link``: the cue words' settings (``cue_share`` 0:
        none)."""
        from memq.memory.build import GOLD_SOURCES, gold_questions
        from memq.plan.data import split_of
        from memq.plan.prior import QuestionPrior

        questions = [q for source in sorted(set().union(*bank.sources) & set(GOLD_SOURCES))
                     for q in gold_questions(source)]
        constraints = constraint_entities(questions, training=True)
        if not constraints:
            return None
        prior = QuestionPrior.from_bank(bank, neighbours=neighbours)
        if prior is None:
            return None
        link = link or LinkConfig()
        cues = CueWords(((q.id, q.question) for q in questions if split_of(q.id) == "train"), constraints,
                        min_share=link.cue_share, min_count=link.cue_count,
                        asked_share=link.asked_share) if link.cue_share else None
        return cls(prior, constraints, min_support=min_support, cues=cues)

    def suggest(self, question: str, given: Iterable[str] = ()) -> list[Suggestion]:
        """The constraint entities the neighbours of ``question`` support enough, best first; ``given`` ids are
        left out (the linker found them)."""
        given = set(given)
        votes: dict[str, list] = {}
        total = 0.0
        for qid, sim in self.prior.nearest(question):
            w = max(sim, 0.0)
            total += w
            for mid, name in self.constraints.get(qid, ()):
                entry = votes.setdefault(mid, [0.0, name, []])
                entry[0] += w
                entry[2].append(qid)
        found = {mid: Suggestion(mid, name, weight / total, tuple(voters))
                 for mid, (weight, name, voters) in votes.items() if total > 0 and weight / total >= self.min_support}
        for mid, (name, share, cue) in (self.cues.suggest(question) if self.cues else {}).items():
            had = found.get(mid)
            found[mid] = Suggestion(mid, name, max(share, had.support if had else 0.0),
                                    had.voters if had else tuple(votes.get(mid, (0, 0, ()))[2]), cue)
        return sorted((s for s in found.values() if s.id not in given), key=lambda s: (-s.support, s.id))


def traced_suggestions(found: list[Suggestion], trace) -> dict[str, str]:
    """``found`` as optional entities (id -> name), each listed in ``trace.links`` and named in its fallbacks."""
    trace.links.extend(s.to_json() for s in found)
    if found:
        trace.fallbacks.append("constraint entities suggested by the nearest training questions or the question's "
                               "words (the plan may name them): " + "; ".join(s.why() for s in found))
    return {s.id: s.name for s in found}


def known_optional(kg, question: str, optional: dict[str, str] | None, entities: dict[str, str], trace,
                   timeout: float | None = None) -> dict[str, str]:
    """The optional entities checked as given ones are (:func:`memq.link.resolve.validate`), less those among
    ``entities`` and those the KG holds no triple about (each dropped with a traced fallback)."""
    from ..errors import LinkingError
    from .resolve import known_entities, validate

    optional = {mid: name for mid, name in validate(question, optional or {}, allow_empty=True,
                                                     strict_names=False)[1].items() if mid not in entities}
    if not optional:
        return {}
    try:
        return known_entities(kg, optional, trace, timeout)
    except LinkingError as exc:
        trace.fallbacks.append(f"optional entities dropped: {exc}")
        return {}


def split_alternatives(entities: dict[str, str], trace) -> tuple[dict[str, str], dict[str, str]]:
    """(entities, alternatives): the linked entities that are a second reading of a span linked already
    (``Trace.links`` marks them ``alternative``) go apart, for the planner to name or not (optional entities)."""
    alternative = {link["id"] for link in trace.links if link.get("alternative")}
    return ({m: n for m, n in entities.items() if m not in alternative},
            {m: n for m, n in entities.items() if m in alternative})


def split_required(entities: dict[str, str], required: int, trace) -> tuple[dict[str, str], dict[str, str]]:
    """(entities, optional): the first ``required`` linked entities (best first) stay ones the plan must name; the
    others become optional, named in the prompt but left out of the entity coverage (traced). -1: all stay."""
    if required < 0 or len(entities) <= required:
        return entities, {}
    items = list(entities.items())
    kept, extra = dict(items[:required]), dict(items[required:])
    for link in trace.links:
        if link["id"] in extra:
            link["optional"] = True
    which = f"after the best {required}" if required else "(all of them)"
    trace.fallbacks.append(f"linked entities {which} are optional (the plan may name them; entity coverage leaves "
                           "them out): " + ", ".join(f"{n} ({m})" for m, n in extra.items()))
    return kept, extra


def linked_entities(linker: Linker, question: str, names: list[str] | None, trace: Trace,
                    settings: LinkConfig | None = None, suggest=None, listed=None
                    ) -> tuple[dict[str, str], dict[str, str], tuple[str, ...]]:
    """The topic entities of a question asked without ids (``names`` None: linked from the question) or with names
    alone (checked by :func:`~memq.link.resolve.resolve`): ``(entities, optional, second)``. ``optional``: a
    span's second reading; when linked, the entities after the best ``settings.required``
    (:func:`~memq.link.constraints.split_required`); and what ``suggest(question, ids)`` gives (the constraints
    the nearest training questions used), but for those with at least ``settings.required_support``, which join
    ``entities``. ``settings``: the pipeline's (default: the linker's). ``second``: what the planner's prompt leaves
    out: the second readings, and the linked entities after the best ``settings.prompted`` (:func:`unprompted`).
    ``listed`` (a :class:`~memq.link.order.ListedFirst`): then the linked entities that training questions list
    after another go behind the others, required and optional apart (:func:`listed_order`). Each step is traced."""
    from .resolve import resolve

    settings = settings or linker.config
    t0 = time.perf_counter()
    entities, other = split_alternatives(resolve(linker, question, names, trace), trace)
    trace.timings["link"] = time.perf_counter() - t0
    extra: dict[str, str] = {}
    if names is None:  # linked: the plan must name the best `required` only (a caller's names are all required)
        entities, extra = split_required(entities, settings.required, trace)
    found = suggest(question, [*entities, *extra, *other]) if suggest else []
    suggested = traced_suggestions(found, trace)
    floor = settings.required_support
    strong = {s.id: s.name for s in found if floor and s.support >= floor}
    if strong:
        trace.fallbacks.append(f"suggested constraint entities with at least {floor:g} of the vote are ones the plan "
                               "must name: " + ", ".join(f"{n} ({m})" for m, n in strong.items()))
    hidden = unprompted(entities, extra, settings.prompted, trace) if names is None else ()
    if listed and names is None:
        entities, extra = listed_order(listed, entities, trace), listed_order(listed, extra, trace)
    optional = {m: n for m, n in {**extra, **other, **suggested}.items() if m not in strong}
    return {**entities, **strong}, optional, (*other, *hidden)


def listed_order(listed, entities: dict[str, str], trace) -> dict[str, str]:
    """``entities`` (linked, best first) in the order ``listed`` (:class:`~memq.link.order.ListedFirst`) gives
    them: those training questions list after another more often than first go behind (the planner starts from the
    entity its prompt lists first). A new order is traced."""
    ordered = listed.order(entities)
    if list(ordered) != list(entities):
        trace.fallbacks.append("linked entities that training questions list after another go behind the others in "
                               "the planner's prompt: " + ", ".join(f"{n} ({m}, {listed.why(m)})"
                                                                    for m, n in ordered.items()))
    return ordered


def unprompted(entities: dict[str, str], extra: dict[str, str], prompted: int, trace) -> tuple[str, ...]:
    """The optional linked entities (``extra``) after the best ``prompted`` linked ones (``entities``, then
    ``extra``: best first), which the planner's prompt leaves out as it does second readings (the grounded planner's
    lines may still start there; traced, and marked ``unprompted`` in the trace's links). -1: none."""
    if prompted < 0:
        return ()
    hidden = tuple(m for m in [*entities, *extra][prompted:] if m in extra)
    left_out(trace, hidden, extra, f"linked entities after the best {prompted} are left out of the planner's prompt "
                                   "(its lines may start there)")
    return hidden


def unused_suggestions(steps, entities: dict[str, str], trace, already=()) -> tuple[str, ...]:
    """The suggested constraint entities (``suggested`` in ``trace.links``) that the planner's prompt named (not in
    ``already``, those it left out) and no step of the plan (``steps``) names (:func:`memq.plan.lines.unnamed`),
    marked and traced by :func:`left_out`, for the question to be planned again without them."""
    from ..plan.lines import unnamed

    suggested = [link["id"] for link in trace.links if link.get("suggested") == "constraint"
                 and link["id"] in entities and link["id"] not in already]
    left = set(unnamed(steps, [entities[m] for m in suggested]))
    hidden = tuple(m for m in suggested if entities[m] in left)
    left_out(trace, hidden, entities, "suggested constraint entities the plan does not name, left out of the "
                                      "planner's prompt and the question planned again")
    return hidden


def left_out(trace, hidden: tuple[str, ...], names: dict[str, str], why: str) -> None:
    """Linked entities ``hidden`` (ids) that the planner's prompt leaves out: marked ``unprompted`` in the trace's
    links, and named (``names``: id -> name) after ``why`` in its fallbacks."""
    if not hidden:
        return
    for link in trace.links:
        if link["id"] in hidden:
            link["unprompted"] = True
    trace.fallbacks.append(f"{why}: " + ", ".join(f"{names[m]} ({m})" for m in hidden))
