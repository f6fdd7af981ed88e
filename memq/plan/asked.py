"""The class a GrailQA question asks for by name, and whether a plan (or a Find line) names it.

"which computer scientists ...?" asks for the class *computer scientist*; GrailQA's plans then check that class
at their answer (``Make sure ?x0 is a computer scientist.``). The grounded planner (:mod:`memq.plan.grounded`) reads
the class with :func:`asked_class` (through :meth:`memq.plan.lines.ClassStatements.asked`), takes ``asked_class``
nats off a Finally line whose plan does not name it (:func:`names_class`), searches again wider when no plan does,
then (``asked_directed``, off by default) with its Find lines directed to the class (:func:`reaches`), and only then
gives the class up. A plan that ends without naming the class is searched again so directed (``asked_redirect``,
GrailQA's), and taken only when that search ends no plan that names it.

**How a question asks** (:func:`asked_patterns`, :func:`asked_class`): right after "which" or "what" (or "what is
the", "what's the name of the", ``ASKED_COPULA``), the longest class name (a plural's s or es aside), and after it
the end, a punctuation mark or a word that ends a noun phrase (``ASKED_END``: an auxiliary, a preposition, a past
form; or a present one such as "belongs", :func:`verb_ending`, and one that is also a plural, "supports", when a
topic entity follows it). Else a class named the other way round, "what type of accommodation" (``ASKED_OF``).

Measured on GrailQA's 1,000 real train questions (``benchmarks/asked_class.py``): the train plans of 487 of the
508 questions it reads a class from name that class or a narrower one at their answer; before present forms
ended a class name, 473 of 493. On the tuning part of GrailQA dev: 86 of 100, before 79 of 93.
"""

from __future__ import annotations

import re

from ..link.index import STOP_PARTS

__all__ = ["ASKED_COPULA", "ASKED_END", "ASKED_OF", "END_WORDS", "IRREGULAR_PAST", "STAGES", "asked_class",
           "asked_patterns", "class_word", "ends_before", "fits", "names_class", "narrower", "of_class", "reaches",
           "shortens", "verb_ending"]

# a search's stages for the class a question asks for: as it is, wider (asked_beam), with Find lines directed to
# it (asked_directed), given up
STAGES = ("first", "wide", "directed", "off")

# "what is the name of the <class> ...", "which is a <class> ...": a copula and an article may come between
ASKED_COPULA = r"(?:(?:'s|\s+is|\s+are|\s+was|\s+were)\s+(?:the|a|an)(?:\s+names?\s+of\s+(?:the|a|an))?)?"
# "what type of accommodation", "what is the unit of energy": the class named the other way round (up to three words)
ASKED_OF = re.compile(r"\b(?:which|what)" + ASKED_COPULA + r"\s+(\w+)\s+of\s+(?:the\s+)?(\w+(?:\s+\w+){0,2})")
# irregular past forms that end a noun phrase as "\w+ed" does ("which tv channel began on ...")
IRREGULAR_PAST = ("began became brought built came chose drew drove fell flew fought found gave got grew held kept "
                  "led left lost made met ran rose said sang saw sold spoke stood took taught told went won wore "
                  "wrote written")
END_WORDS = (r"is|are|was|were|has|have|had|does|do|did|can|could|will|would|that|which|who|whose|with|in|on|of|at|"
             r"by|for|from|to|and|or|the|a|an|as|not|also|\w+ed|" + IRREGULAR_PAST.replace(" ", "|"))


def ends_before(words: str) -> str:
    """A lookahead for what ends a noun phrase after a class name: the end, a punctuation mark, or one of
    ``words`` (alternatives of a pattern)."""
    return r"(?=\s*$|\s*[?.,!;:]|\s+(?:" + words + r")\b)"


ASKED_END = ends_before(END_WORDS)


def verb_ending(names) -> str:
    """A pattern for a present form after a class name ("which star system *belongs* to ...", "which opera company
    *produces* ..."): a word that ends in s and is no plural of the last word of one of the class ``names`` ("what
    book *series* is ...", "which video *games* have ...", "what drug *formulations* use ...")."""
    heads = {n.split()[-1] for n in names if n.split()}
    plurals = heads | {h + "s" for h in heads} | {h + "es" for h in heads} | {h[:-1] + "ies" for h in heads
                                                                               if h.endswith("y")}
    return r"(?!(?:" + "|".join(sorted(map(re.escape, plurals), key=lambda p: (-len(p), p))) + r")\b)\w+s"


def asked_patterns(named, verbs: bool = True) -> tuple[re.Pattern, re.Pattern]:
    """The patterns that read the class asked for among the class ``named`` (lower-case names, 3 letters or more),
    the name in their first group: the class before ``ASKED_END`` or a present form (:func:`verb_ending`), and the
    class before any word that ends in s (then the second group) and the rest of the question (the third). Without
    ``verbs``, the reading before present forms ended a class (``benchmarks/asked_class.py`` compares the two): the
    class before ``ASKED_END`` only, and a second pattern that matches nothing."""
    names = sorted((n for n in named if len(n) >= 3), key=lambda n: (-len(n), n))
    asking = r"\b(?:which|what)" + ASKED_COPULA + r"\s+(" + "|".join(map(re.escape, names)) + r")(?:e?s)?"
    if not verbs:
        return re.compile(asking + ASKED_END), re.compile(r"(?!)")
    strict = re.compile(asking + ends_before(END_WORDS + "|" + verb_ending(names)))
    return strict, re.compile(asking + r"\s+(\w+s)\s+(.*)")


def asked_class(question: str, patterns: tuple[re.Pattern, re.Pattern], named: dict[str, str],
                entities=()) -> str | None:
    """The class ``question`` asks for by name (``named``: lower-case name -> name; ``patterns``: its
    :func:`asked_patterns`), or None. A present form that is also the plural of a class name's last word ends the
    class when a topic entity's name (``entities``) follows it: "which game *supports* zilog z80?" (the class
    *visual art support* aside). The train plans of 487 of the 508 GrailQA train questions that ask so start from
    that class or check it (before present forms ended a class, 473 of 493; ``benchmarks/asked_class.py``). Else a
    class named the other way round, "what type of accommodation" or "what is the unit of energy" (``ASKED_OF``:
    "accommodation type", "energy unit"), as the train plans of 19 of the 22 GrailQA train questions that ask only
    so name at the answer (the tuning part's: 10 of 12; the other two ask "what class of locomotive" for a wheel
    configuration)."""
    if not named:
        return None
    text = question.lower()
    strict, loose = patterns
    if (found := strict.search(text)) is not None:
        return named[found.group(1)]
    found = loose.search(text)
    if found is not None and any(found.group(3).startswith(e.lower()) for e in entities if e):
        return named[found.group(1)]
    for word, after in ASKED_OF.findall(text):
        words = after.split()
        for head in dict.fromkeys((word, word.removesuffix("s"), word.removesuffix("es"))):
            for n in range(len(words), 0, -1):  # the longest class name first
                if (name := " ".join(words[:n]) + " " + head) in named:
                    return named[name]
    return None


def names_class(steps, name: str | None, target: str | None = None, shortened: bool = False) -> bool:
    """Whether a plan starts from the class ``name`` or a narrower one (:func:`narrower`), or one that ``name``
    shortens when ``shortened`` (:func:`shortens`), or checks it, at the ``?variable`` ``target`` when one is given
    (the answer's; a count's answer stands for what it counts); true when there is none to name."""
    target = next((st.source for st in steps if st.kind == "count" and st.target == target), target)
    return name is None or any(st.kind == "class" and fits(st.value or "", name, shortened)
                               and target in (None, st.target) for st in steps)


def fits(value: str, name: str, shortened: bool = False) -> bool:
    """Whether the class name ``value`` names the class ``name`` asked for: it or a narrower one, or one that
    ``name`` shortens when ``shortened``."""
    return narrower(value, name) or shortened and shortens(name, value)


def reaches(value_names, name: str | None, shortened: bool = False) -> bool:
    """Whether some of the class names ``value_names`` (of a Find line's values) names the class ``name`` asked
    for (:func:`fits`); true when there is none."""
    return name is None or any(fits(v, name, shortened) for v in value_names)


def shortens(name: str, value: str) -> bool:
    """Whether the class name ``name`` is the start of the longer class name ``value`` ("radio program" of "radio
    program episode", "sports league" of "sports league season"). GrailQA's crowd workers shortened so 7 of the 16
    classes asked for by name that its train plans name neither as asked nor more narrowly (at the answer), so the
    wider search for the class asked for (``asked_beam``) takes such a class too; the first search does not (the
    tuning part asks for 36 classes that start longer names: "rocket engine" starts "rocket engine fuel")."""
    words, asked = value.lower().split(), name.lower().split()
    return len(words) > len(asked) > 0 and words[:len(asked)] == asked


def narrower(value: str, name: str) -> bool:
    """Whether the class name ``value`` is ``name`` or names a kind of it: its last word ends with the last word of
    ``name``, and it has the other words of ``name`` ("tv actor" and "actor", "olympic sport" and "sport",
    "computer videogame" and "game"). Of the 462 GrailQA train questions that ask for a class by name
    (:meth:`ClassStatements.asked`, before present forms ended a name), the train plans of 432 name that class at
    the answer, and of 446 it or a narrower one."""
    words, asked = value.lower().split(), name.lower().split()
    return bool(words and asked) and words[-1].endswith(asked[-1]) and all(w in words for w in asked[:-1])


def class_word(word: str, words: set[str]) -> bool:
    """Whether ``word`` (normalised) is one of a class name's ``words`` ("building") or a plural of one
    ("engines", "cities")."""
    return (word in words or word[:-1] in words and word.endswith("s")
            or word[:-2] in words and word.endswith("es") or word[:-3] + "y" in words and word.endswith("ies"))


def of_class(mention: str, words: set[str]) -> bool:
    """Whether the span ``mention`` is made of a class name's ``words`` (:func:`class_word`) and function words
    ("unit *of*"), one of the first at least: "la" alone is no class word."""
    tokens = mention.split()
    return any(class_word(w, words) for w in tokens) and all(class_word(w, words) or w in STOP_PARTS for w in tokens)
