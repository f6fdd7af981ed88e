"""The numbers and dates a question writes, as a plan's checks write them.

GrailQA's checks compare with a number or date the question writes ("which building has less than 9 floors?":
``Make sure ?x1 < 9.``); its dates carry the time zone ``-08:00`` (``1970-07-01-08:00``), and a time of day is
written as the KG's ``xsd:dateTime`` writes it (``2007-08-11T15:48:45-08:00``). :func:`question_values` reads them,
:func:`unchecked_values` says which no check of a plan uses yet.
"""

from __future__ import annotations

import re

__all__ = ["question_values", "unchecked_values"]

_NUMBER = re.compile(r"(?<![\w./-])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\d/-]|\.\d)", re.I)  # 95.25kg: 95.25
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DATES = (  # (pattern, (year, month, day) groups), longest first; GrailQA's dates carry the time zone -08:00
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), (1, 2, 3)),
    (re.compile(r"\b(\d{2})/(\d{2})/(\d{4})\b"), (3, 1, 2)),
    (re.compile(r"\b(" + "|".join(_MONTHS) + r")[a-z]*\.? the (\d{1,2})(?:st|nd|rd|th), (\d{4})\b", re.I), (3, 1, 2)),
    (re.compile(r"\b(\d{4})-(\d{2})\b"), (1, 2, None)),
    (re.compile(r"\b(1\d{3}|20\d{2})\b(?![/-]|\.\d)"), (1, None, None)),
)
# a date with a time of day, "2007-08-11t15:48:45-08:00" (GrailQA's questions are lower-cased)
_DATETIME = re.compile(r"\b(\d{4}-\d{2}-\d{2})[t ](\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)(z|[+-]\d{2}:\d{2})?(?![\d:])",
                       re.I)


def question_values(question: str, limit: int = 6) -> list[str]:
    """The numbers and dates ``question`` writes, as a plan's check writes them (dates in GrailQA's form,
    ``2008-02-10-08:00``; a time of day as the KG's ``xsd:dateTime`` writes it, ``2007-08-11T15:48:45-08:00``; a bare
    year is both a number and a date), first seen first, at most ``limit``. A part of a longer date (the year of
    ``feb. the 10th, 2008``, the minutes of a time) is not read again."""
    question = re.sub(r"(?<=\d),(?=\d{3}\b)", "", question)  # 12,000 -> 12000
    found: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []

    def free(match) -> bool:
        return not any(a < match.end() and match.start() < b for a, b in taken)

    for match in _DATETIME.finditer(question):  # a time of day: the KG's xsd:dateTime, its zone as written
        date, time, zone = match.groups()
        seconds = "" if time.count(":") == 2 else ":00"
        found.append((match.start(), f"{date}T{time}{seconds}{(zone or '-08:00').upper()}"))
        taken.append(match.span())
    for pattern, (y, m, d) in _DATES:
        for match in [m_ for m_ in pattern.finditer(question) if free(m_)]:
            month = match.group(m) if m else None
            if month and not month.isdigit():
                month = f"{_MONTHS.index(month[:3].lower()) + 1:02d}"
            parts = [match.group(y)] + ([month] if month else []) + ([f"{int(match.group(d)):02d}"] if d else [])
            found.append((match.start(), "-".join(parts) + "-08:00"))
            if m:  # a bare year stays a number too
                taken.append(match.span())
    found += [(match.start(), match.group()) for match in _NUMBER.finditer(question) if free(match)]
    out: list[str] = []
    for _, value in sorted(found, key=lambda f: f[0]):
        if value not in out:
            out.append(value)
    return out[:limit]


def unchecked_values(steps, question: str, names=()) -> list[str]:
    """The numbers and dates ``question`` writes (:func:`question_values`) outside the topic entity ``names``
    ("minecraft 1.2") that no check of ``steps`` uses yet. A superlative waits for them: of GrailQA's 68 train
    plans with one, 65 are of questions that write no such value and 2 check theirs first ("... scored 4 goals
    ..., the best scorer"); one question's value is a unit ("the most energy per 100g")."""
    inside = " ".join(names).lower()
    used = {st.value for st in steps if st.kind == "check"}
    return [v for v in question_values(question) if v not in used and v.removesuffix("-08:00").lower() not in inside]
