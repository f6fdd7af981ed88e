"""Names a question writes with capitals: "Where does Hector Camacho live and has assets owned by Peter Minuit?"
writes two names, and where the entity index reads neither whole (Peter Minuit is no entity of it), a part of one is
seldom a part of another name: "peter" read *Peter Crouch*. CWQ and people write names so; WebQSP and GrailQA write
in lower case, where nothing here acts (``LinkConfig.unread_weight``; :meth:`memq.link.linker.Linker.candidates`).
"""

from __future__ import annotations

import re

from .index import fold, normalize

__all__ = ["cased_runs", "unread_names"]

_NON_ALNUM = re.compile(r"[^0-9A-Za-z]+")

# lower-case words inside a written name ("Order of St Michael", "Côte d'Ivoire", "Ludwig van Beethoven")
# ("and" is none: "Demi Moore and Tupac" are two names)
CONNECTORS = frozenset("of the de d da del du la le van von".split())
# a reading whose name is this close to the written name (rapidfuzz ratio) is kept: "manning" of "Payton Manning"
KEPT_RATIO = 70.0


def cased_runs(question: str, tokens: list[str]) -> list[tuple[int, int]]:
    """The (start, end) spans of ``tokens`` (the normalised question) that the question writes as one name: two words
    or more that start with a capital, with :data:`CONNECTORS` ("of", "de") between them, the question's first word not
    counted ("Where does Hector Camacho live and has assets owned by Peter Minuit?": "Hector Camacho", "Peter
    Minuit"). None in a question written in lower case, or with most words capitalised (a title)."""
    cased = _NON_ALNUM.sub(" ", fold(question, lower=False)).split()
    if [t.lower() for t in cased] != tokens:
        return []
    upper = [k > 0 and t[0].isupper() for k, t in enumerate(cased)]
    if not any(upper) or sum(upper) * 2 > len(tokens):
        return []
    runs, k = [], 1
    while k < len(tokens):
        if not upper[k]:
            k += 1
            continue
        end = k + 1
        while end < len(tokens):
            gap = end
            while gap < len(tokens) and tokens[gap] in CONNECTORS and not upper[gap]:
                gap += 1
            if gap < len(tokens) and upper[gap]:
                end = gap + 1
            else:
                break
        if end - k > 1:
            runs.append((k, end))
        k = end
    return runs


def unread_names(index, found: list, tokens: list[str], runs: list[tuple[int, int]], weight: float) -> list:
    """``found`` (:meth:`memq.link.linker.Linker.candidates`' tuples) with ``weight`` taken off each reading that is
    not its span's exact name on a span inside a run of :func:`cased_runs` that no candidate's span holds whole,
    unless the reading's name is within :data:`KEPT_RATIO` of the run (a name written otherwise: "Payton Manning"):
    the question writes a name the index does not read, so a part of it is seldom a part of another name ("peter" of
    "Peter Minuit" is not Peter Crouch)."""
    from rapidfuzz import fuzz

    unread = [(a, b) for a, b in runs if not any(c[1] <= a and b <= c[2] for c in found)]
    if not unread:
        return found
    out = []
    for c in found:
        run = next(((a, b) for a, b in unread if a <= c[1] and c[2] <= b), None) if c[4] < 1.0 else None
        if run is not None and fuzz.ratio(normalize(index.name(c[3]) or ""), " ".join(tokens[run[0]:run[1]])) \
                < KEPT_RATIO:
            c = (c[0] - weight, *c[1:])
        out.append(c)
    return out
