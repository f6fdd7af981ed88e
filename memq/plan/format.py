"""The plan language: render :class:`~memq.types.PlanStep` objects and read planner output back.

A plan is one step per line (MemQ section 3.2, Table 9, Appendix C)::

    Find the siblings of Justin Bieber, assign it to ?x.
    Find the gender of ?x, assign it to ?g.
    Make sure ?g is Male.
    Sort ?d in descending order and keep the first result.
    Finally the answer is ?x.

Grammar (what :func:`render_step` writes; the parser also reads the variants
listed):

* **find**: ``Find <phrase>, assign it to ?v.`` The phrase names what is
  looked up and mentions its known side(s): a topic entity name or a
  ``?var`` assigned before. ``source`` is the first mention, ``value`` the
  second one (structure-3 steps relate two known things); ``relation`` is the
  phrase as written. Mentions bind the recalled description's placeholders in
  order of appearance. A step built with a bare ``relation`` that does not
  mention its ``source`` renders as ``Find <relation> of <source>, ...``.
  Variants: ``assign it to v`` (no ``?``), ``and assign ...``, ``assign to``.
* **check**: ``Make sure <subject> <comparison> <value>.`` ``target`` is the
  first ``?var`` of the subject (else the subject). Comparisons (``op``):

  ====  =======================================================================
  =     ``is``, ``should be``, ``equals``, ``is equal to``, ``=``
  !=    ``is not``, ``should not be``, ``!=``
  <     ``is before``, ``is earlier than``, ``is less than``, ``is fewer than``, ``<``
  <=    ``is on or before``, ``is at most``, ``<=``
  >     ``is after``, ``is later than``, ``is greater than``, ``is more than``, ``>``
  >=    ``is on or after``, ``is at least``, ``>=``
  ====  =======================================================================

  ``relation`` holds the subject when it is more than the ``?var``
  (``the start date of ?y``). ``is``/``should be`` may be left out before the word forms (``Make sure the
  start date of ?y on or before 2015-08-10``). The renderer writes words for
  dates (``is before 2015-08-10``) and symbols otherwise (``?n > 100``);
  ``is`` for ``=`` and ``is not`` for ``!=``.
* **sort**: ``Sort ?v in descending|ascending order and keep the first
  result.``; with an offset ``..., skip the first N and keep the first
  result.``; a limit above one ``keep the first K results``. Variants: the
  verb ``Rank``, ``Sort the result(s) based on / by ?v ...``.
* **answer**: ``Finally the answer is ?v.`` (also ``The answer is ?v``).

GrailQA's constructs (:mod:`memq.decompose.forms`) add three kinds:

* **class**: ``Make sure ?v is a building.`` (``value`` the class name, a lower-case ``a``/``an`` after
  ``is``/``should be``); with no topic entity, the members of the class start the plan:
  ``Find every building, assign it to ?v.`` (``op`` ``"find"``; also ``all``).
* **superlative**: ``Sort ?v in descending order and keep every result tied for first.`` (``op`` ``max``;
  ascending: ``min``): the answers whose ``?v`` is the largest (smallest) value of the whole query, ties kept.
* **count**: ``Count ?v, assign it to ?count.`` (``source`` the counted ``?v``, ``target`` the count; also
  ``Count the number of ?v ...``).

Lines may carry list markers (``1.``, ``-``, ``Step 2:``); several steps on one
line are split before each step verb. The parser is tolerant: a line it
cannot read is dropped and recorded in ``Plan.dropped`` as ``(line, reason)``;
only output with no readable step at all raises
:class:`~memq.errors.PlanParseError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from memq.errors import PlanParseError
from memq.types import Plan, PlanStep

VAR = re.compile(r"\?[A-Za-z_][A-Za-z0-9_]*")
# the class of a node in WebQSP's and CWQ's checks (type.object.type checks in CWQ may be of another ?variable: "where
# a journal publication was born")
NOTABLE_TYPES = "common.topic.notable_types"
_DATE = re.compile(r"^-?\d{4}(-\d{2}(-\d{2})?)?([T ][0-9:.]+Z?)?$")
OPS = ("=", "!=", "<", "<=", ">", ">=")

_PREFIX = re.compile(r"^\s*(?:[-*•]+\s*|\(?\d+[.):]\s*|step\s*\d+\s*[:.)-]?\s*)+", re.I)
_SPLIT = re.compile(r"(?<=[.;])\s+(?=(?:step\s*\d+\s*[:.]\s*)?(?:find|make sure|sort|rank|count|finally|the answer)\b)",
                    re.I)
_STEP_MARK = re.compile(r"\s+(?=step\s*\d+\s*:)", re.I)

_FIND = re.compile(r"^find\s+(?P<phrase>.+?)\s*,?\s*(?:and\s+)?assign(?:\s+it)?\s+(?:to|as)(?:\s*(?=\?)|\s+)"
                   r"(?P<target>\??[A-Za-z_][A-Za-z0-9_]*)\s*[.;]?\s*$", re.I)
_CHECK = re.compile(r"^make\s+sure\s+(?:that\s+)?(?P<body>.+?)\s*[.;]?\s*$", re.I)
_CLASS = re.compile(r"^(?P<target>\?[A-Za-z_]\w*)\s+(?:is|should\s+be)\s+an?\s+(?P<cls>[a-z0-9].*?)\s*[.;]?\s*$")
_EVERY = re.compile(r"^(?:every|all)\s+(?P<cls>\S.*)$", re.I)
_COUNT = re.compile(r"^count\s+(?:the\s+number\s+of\s+)?(?P<source>\?[A-Za-z_]\w*)\s*(?:,?\s*(?:and\s+)?"
                    r"assign(?:\s+it)?\s+(?:to|as)\s*(?P<target>\??[A-Za-z_]\w*))?\s*[.;]?\s*$", re.I)
_ANSWER = re.compile(r"^(?:finally,?\s+)?(?:so\s+)?the\s+(?:final\s+)?answer\s+is(?:\s*(?=\?)|\s+)"
                     r"(?P<target>\??[A-Za-z_]\w*)\s*[.;]?\s*$", re.I)

# comparison markers, longest first within each alternative position
_CMP = [
    (r"(?:is|should\s+be)\s+on\s+or\s+before", "<="), (r"(?:is|should\s+be)\s+on\s+or\s+after", ">="),
    (r"(?:is|should\s+be)\s+at\s+most", "<="), (r"(?:is|should\s+be)\s+at\s+least", ">="),
    (r"(?:is|should\s+be)\s+(?:before|earlier\s+than)", "<"), (r"(?:is|should\s+be)\s+(?:after|later\s+than)", ">"),
    (r"(?:is|should\s+be)\s+(?:less|fewer|smaller|lower)\s+than", "<"),
    (r"(?:is|should\s+be)\s+(?:greater|more|larger|higher|bigger)\s+than", ">"),
    (r"(?:is|should)\s+not(?:\s+be)?(?:\s+equal\s+to)?", "!="), (r"isn't", "!="),
    (r"(?:is|should\s+be)\s+equal\s+to", "="), (r"equals", "="),
    (r"on\s+or\s+before", "<="), (r"on\s+or\s+after", ">="), (r"at\s+most", "<="), (r"at\s+least", ">="),
    (r"before|earlier\s+than", "<"), (r"after|later\s+than", ">"),
    (r"(?:less|fewer|smaller|lower)\s+than", "<"), (r"(?:greater|more|larger|higher|bigger)\s+than", ">"),
    (r"should\s+be|is|=", "="),
    (r"!=|<>", "!="), (r"<=", "<="), (r">=", ">="), (r"<", "<"), (r">", ">"),
]
_CMP_RE = re.compile("|".join(f"(?P<c{i}>(?<![\\w?<>!=])(?:{p})(?![\\w<>=]))" for i, (p, _) in enumerate(_CMP)),
                     re.I)

_WORDS_DATE = {"<": "is before", "<=": "is on or before", ">": "is after", ">=": "is on or after"}


def is_var(text: str | None) -> bool:
    return text is not None and VAR.fullmatch(text) is not None


def _as_var(name: str) -> str:
    return name if name.startswith("?") else f"?{name}"


def _mentions(phrase: str, entities: Sequence[str]) -> list[tuple[int, str]]:
    """Known things a phrase mentions, in order: ``?vars`` and topic entity names (longest first).

    A name is found where it is written as given. Written in another case, it is found too, except as one
    all-lowercase word: "Find the spouse of the marriage with spouse Julia Roberts and type of union
    Marriage" mentions the entity "Marriage" at its end, not in the common noun "marriage" before the
    entity "Julia Roberts" (which would make "marriage" the step's source).
    """
    found: list[tuple[int, int, str]] = [(m.start(), m.end(), m.group()) for m in VAR.finditer(phrase)]
    lower = phrase.lower()
    for name in sorted({e for e in entities if e and e.strip()}, key=len, reverse=True):
        hits = [(i, phrase[i:i + len(name)]) for i in _occurrences(lower, name.lower())
                if not any(a < i + len(name) and i < b for a, b, _ in found)]
        exact = [(i, text) for i, text in hits if text == name]
        loose = [(i, text) for i, text in hits if not (text.islower() and len(text.split()) == 1)]
        if exact or loose:
            i, text = (exact or loose)[0]
            found.append((i, i + len(text), text))
    return [(a, text) for a, _, text in sorted(found)]


def _occurrences(lower: str, key: str) -> list[int]:
    """Where ``key`` occurs in ``lower`` as whole words."""
    out, start = [], 0
    while (i := lower.find(key, start)) >= 0:
        end = i + len(key)
        if (i == 0 or not lower[i - 1].isalnum()) and (end == len(lower) or not lower[end].isalnum()):
            out.append(i)
        start = i + 1
    return out


# --------------------------------------------------------------------------- render

def render_step(step: PlanStep) -> str:
    """The canonical text of one step (see the module grammar)."""
    kind = step.kind
    if kind == "find":
        if not step.relation or not step.target:
            raise PlanParseError(f"a find step needs relation and target: {step!r}")
        phrase = step.relation.strip()
        if step.source and step.source.lower() not in phrase.lower():
            phrase = f"{phrase} of {step.source}"
        return f"Find {phrase}, assign it to {_as_var(step.target)}."
    if kind == "check":
        if not step.target or step.op not in OPS or step.value is None:
            raise PlanParseError(f"a check step needs target, op in {OPS} and value: {step!r}")
        subject = step.relation or step.target
        value = step.value.strip()
        if step.op == "=":
            cmp = "is"
        elif step.op == "!=":
            cmp = "is not"
        elif _DATE.match(value):
            cmp = _WORDS_DATE[step.op]
        else:
            cmp = step.op
        return f"Make sure {subject} {cmp} {value}."
    if kind == "sort":
        if not step.target or step.op not in ("asc", "desc"):
            raise PlanParseError(f"a sort step needs target and op 'asc'/'desc': {step!r}")
        order = "descending" if step.op == "desc" else "ascending"
        text = f"Sort {_as_var(step.target)} in {order} order"
        if step.offset:
            text += f", skip the first {step.offset}"
        if step.limit == 1:
            text += " and keep the first result"
        elif step.limit:
            text += f" and keep the first {step.limit} results"
        return text + "."
    if kind == "answer":
        if not step.target:
            raise PlanParseError(f"an answer step needs a target: {step!r}")
        return f"Finally the answer is {_as_var(step.target)}."
    if kind == "class":
        if not step.target or not step.value:
            raise PlanParseError(f"a class step needs target and value: {step!r}")
        if step.op == "find":
            return f"Find every {step.value}, assign it to {_as_var(step.target)}."
        article = "an" if step.value[:1].lower() in "aeiou" else "a"
        return f"Make sure {_as_var(step.target)} is {article} {step.value}."
    if kind == "superlative":
        if not step.target or step.op not in ("max", "min"):
            raise PlanParseError(f"a superlative step needs target and op 'max'/'min': {step!r}")
        order = "descending" if step.op == "max" else "ascending"
        return f"Sort {_as_var(step.target)} in {order} order and keep every result tied for first."
    if kind == "count":  # the parser reads a count without a target ("Count ?x."); reconstruction drops it, traced
        if not step.source:
            raise PlanParseError(f"a count step needs the ?variable it counts: {step!r}")
        if not step.target:
            return f"Count {_as_var(step.source)}."
        return f"Count {_as_var(step.source)}, assign it to {_as_var(step.target)}."
    raise PlanParseError(f"unknown step kind {kind!r}")


def render_plan(steps: Iterable[PlanStep]) -> str:
    """One rendered step per line."""
    return "\n".join(render_step(s) for s in steps)


# --------------------------------------------------------------------------- parse

def split_lines(text: str) -> list[str]:
    """Planner output -> candidate step lines (list markers removed)."""
    out = []
    for line in text.replace("\r", "\n").split("\n"):
        for part in _STEP_MARK.split(line):
            for piece in _SPLIT.split(part):
                piece = _PREFIX.sub("", piece).strip().strip("*`\"'").strip()
                if piece:
                    out.append(piece)
    return out


def parse_step(line: str, entities: Sequence[str] = ()) -> PlanStep:
    """One line -> a step; raises PlanParseError naming why it cannot be read."""
    text = " ".join(line.split())
    head = text.lower()
    if head.startswith("find"):
        m = _FIND.match(text)
        if not m:
            raise PlanParseError("find step without ', assign it to ?var'")
        phrase = m.group("phrase").strip().rstrip(",")
        if not phrase:
            raise PlanParseError("find step with an empty phrase")
        mentions = [t for _, t in _mentions(phrase, entities)]
        every = _EVERY.match(phrase)
        if every and not mentions:
            return PlanStep("class", text, target=_as_var(m.group("target")), value=every.group("cls").strip(),
                            op="find")
        source = mentions[0] if mentions else None
        if source is None:
            tail = re.split(r"\s+of\s+", phrase)
            source = tail[-1].strip() if len(tail) > 1 else None
        return PlanStep("find", text, source=source, relation=phrase, target=_as_var(m.group("target")),
                        value=mentions[1] if len(mentions) > 1 else None)
    if head.startswith("make sure"):
        m = _CHECK.match(text)
        if not m:
            raise PlanParseError("empty 'Make sure' step")
        return _parse_check(text, m.group("body"))
    if head.startswith(("sort", "rank", "order")):
        return _parse_sort(text)
    if head.startswith("count"):
        m = _COUNT.match(text)
        if not m:
            raise PlanParseError("count step without a ?var to count")
        target = m.group("target")
        return PlanStep("count", text, source=m.group("source"), target=_as_var(target) if target else None)
    m = _ANSWER.match(text)
    if m:
        return PlanStep("answer", text, target=_as_var(m.group("target")))
    raise PlanParseError("not a step (expected Find / Make sure / Sort / Count / Finally the answer is)")


def _parse_check(text: str, body: str) -> PlanStep:
    cls = _CLASS.match(body)
    if cls:
        return PlanStep("class", text, target=cls.group("target"), value=cls.group("cls"))
    var = VAR.search(body)
    after = var.end() if var else 0
    for m in _CMP_RE.finditer(body):
        if m.start() < after:
            continue
        idx = int(next(k for k, v in m.groupdict().items() if v is not None)[1:])
        value = body[m.end():].strip().strip("\"'").strip()
        if not value:
            continue
        subject = body[:m.start()].strip()
        target = var.group() if var else subject
        if not target:
            raise PlanParseError("check step without a subject")
        relation = subject if subject and subject != target else None
        return PlanStep("check", text, target=target, op=_CMP[idx][1], value=value, relation=relation)
    raise PlanParseError("check step without a comparison (is / before / after / < / ...)")


def _parse_sort(text: str) -> PlanStep:
    key = VAR.search(text)
    if not key:
        raise PlanParseError("sort step without a ?var to sort by")
    rest = text.lower()
    op = "desc" if re.search(r"\bdesc|\bdecreas|\blatest\b|\blargest\b|\bhighest\b|\bmost recent", rest) else "asc"
    limit: int | None = None
    if re.search(r"\b(?:keep|take|return)\s+(?:only\s+)?the\s+(?:first|top)\s+(?:result|one|answer)\b", rest):
        limit = 1
    elif (lm := re.search(r"\b(?:keep|take|return)\s+(?:only\s+)?the\s+(?:first|top)\s+(\d+)", rest)):
        limit = int(lm.group(1))
    if re.search(r"\btied\b|\bties\b", rest):
        return PlanStep("superlative", text, target=key.group(), op="max" if op == "desc" else "min")
    offset = None
    if (om := re.search(r"\bskip\s+the\s+first\s+(\d+)", rest)):
        offset = int(om.group(1))
    return PlanStep("sort", text, target=key.group(), op=op, limit=limit, offset=offset)


def parse_plan(text: str, entities: Sequence[str] = ()) -> Plan:
    """Planner output -> :class:`Plan`. ``entities`` (topic entity names) locate find sources.

    Unreadable lines, steps after the final answer and second answers are
    dropped with a reason; raises PlanParseError when no step is readable.
    """
    if not isinstance(text, str):
        raise PlanParseError(f"planner output must be str, got {type(text).__name__}")
    steps: list[PlanStep] = []
    dropped: list[tuple[str, str]] = []
    answered = False
    for line in split_lines(text):
        try:
            step = parse_step(line, entities)
        except PlanParseError as exc:
            dropped.append((line, str(exc)))
            continue
        if answered:
            dropped.append((line, "after the final answer"))
            continue
        answered = step.kind == "answer"
        steps.append(step)
    if not steps:
        shown = text.strip()[:80]
        raise PlanParseError(f"no readable plan step in planner output {shown!r}")
    return Plan(steps=steps, raw=text, dropped=dropped)


def normalise(text: str, entities: Sequence[str] = ()) -> str:
    """Canonical text of a plan for exact-match scoring (parse, re-render, lower case, single spaces)."""
    try:
        plan = parse_plan(text, entities)
    except PlanParseError:
        return " ".join(text.lower().split())
    lines = []
    for step in plan.steps:
        try:
            lines.append(render_step(step))
        except PlanParseError:
            lines.append(step.text)
    return "\n".join(" ".join(line.lower().split()) for line in lines)


def answer_target(plan: Plan) -> tuple[str | None, bool]:
    """The answer variable and whether it was stated (else the last find's target is used)."""
    for step in plan.steps:
        if step.kind == "answer":
            return step.target, True
    finds = [s.target for s in plan.steps if s.kind == "find"]
    return (finds[-1] if finds else None), False



def needs_entity(steps: Sequence[PlanStep]) -> str | None:
    """Why a plan cannot be answered without a topic entity, or None when it can: it starts from a class
    (GrailQA's ``Find every building, assign it to ?x0.``) and no find step starts from an entity (its source,
    or the second thing it relates, is no ``?var``). A check's value may be a literal, so checks never count."""
    if not steps or not (steps[0].kind == "class" and steps[0].op == "find"):
        first = repr(steps[0].text) if steps else "(none)"
        return f"the plan does not start from a class (its first step is {first})"
    for step in steps:
        if step.kind == "find" and (not is_var(step.source) or (step.value is not None and not is_var(step.value))):
            return f"plan step {step.text!r} starts from an entity"
    return None


def answers_its_check(steps: Sequence[PlanStep], target: str | None = None, names=None) -> bool:
    """Whether a plan answers with a ``?variable`` (``target``, else its Finally step's) that a check makes equal to a
    value ("Make sure ?x is Marriage. Finally the answer is ?x."): its one answer would be the value the plan names.
    None of the 29,512 WebQSP and CWQ train plans does (GrailQA's "is a" class checks are steps of another kind).
    ``names``: only a check of one of these names counts (a given entity's, which the query compares by its id; a
    value no entity has is matched by name and, where that finds nothing, dropped by self-repair)."""
    if target is None:
        target = next((st.target for st in reversed(steps) if st.kind == "answer"), None)
    given = None if names is None else {n.casefold() for n in names}
    return target is not None and any(st.kind == "check" and st.target == target and st.relation is None
                                      and (st.op or "=") == "=" and (given is None or (st.value or "").casefold()
                                                                     in given) for st in steps)


def unjoined(steps: Sequence[PlanStep], var: str) -> list[str]:
    """The ``?variables`` of ``steps`` that no chain of steps joins with ``var`` (each step joins the ones it names:
    its source, target, relation and value), sorted. A plan that answers with ``var`` leaves them as a part of the
    query that only has to match somewhere; 1 of the 31,810 WebQSP, CWQ and GrailQA train and synthetic plans does."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for step in steps:
        named = sorted({v for text in (step.source, step.target, step.relation, step.value) if isinstance(text, str)
                        for v in VAR.findall(text)})
        for v in named:
            parent[root(v)] = root(named[0])
    top = root(var)
    return sorted(v for v in list(parent) if root(v) != top)


def hops(steps: Sequence[PlanStep], var: str | None) -> int:
    """How many Find steps away from the plan's entities ``var`` is: 1 + the most of the ?variables that the Find
    assigning it starts from or names (its source and relation), 0 for a variable no Find assigns. "Find the religion
    of the religions of the country ?c, assign it to ?x." after "Find the jurisdiction of the religious leader
    Ovadia Yosef, assign it to ?c." puts ``?x`` 2 away; a Find of a value that a check reads (the gender of ``?x``)
    leaves ``?x`` where it was."""
    starts: dict[str, set[str]] = {}
    for step in steps:
        if step.kind == "find" and step.target and step.target not in starts:
            starts[step.target] = {v for text in (step.source, step.relation) if isinstance(text, str)
                                   for v in VAR.findall(text)} - {step.target}

    def depth(v: str, seen: frozenset) -> int:
        if v not in starts or v in seen:
            return 0
        return 1 + max((depth(u, seen | {v}) for u in starts[v]), default=0)

    return depth(var, frozenset()) if var else 0


def classed(steps: Sequence[PlanStep], records: Callable[[str], object]) -> set[str]:
    """The ?variables whose notable type (:data:`NOTABLE_TYPES`) a check of ``steps`` holds: ``?w`` of "Find the
    notable types of ?w, assign it to ?notable_types." and "Make sure ?notable_types is Country." (``records``: a
    statement id's memory record, or None: :meth:`memq.memory.bank.MemoryBank.get`)."""
    checked = {st.target for st in steps if st.kind == "check" and st.relation is None and (st.op or "=") == "="}
    return {st.source for st in steps if st.kind == "find" and st.statement and st.target in checked
            and is_var(st.source) and (record := records(st.statement)) is not None
            and list(record.statement.relations) == [NOTABLE_TYPES]}
