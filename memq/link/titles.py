"""The title of a place (:func:`of_parts`; ``LinkConfig.of_parts``): a chosen exact name "A of B" whose B side is
the exact name of a more popular entity ("president of pakistan", "prime minister of canada") brings the place and
the title as second readings (optional, left out of the prompt), the place first, while there is room: WebQSP
annotates such questions with the place, and the title as the constraint its query checks. A name whose B side is
no more popular than the name itself keeps its parts out. With both parts, where the question asks for the
holder (:func:`parts_first`; ``LinkConfig.parts_first``), they take the name's place, named in the prompt, and the
name is the second reading.
"""

from __future__ import annotations

from dataclasses import replace

from .index import STOP_WORDS

__all__ = ["HOLDER_WORDS", "of_parts", "parts_first"]

# words of time that may stand before a title whose holder a question asks for ("who is the current president ...")
HOLDER_WORDS = frozenset("current present elected acting former previous next latest recent".split())


def of_parts(found: list, chosen: list, tokens: list[str]) -> list:
    """The best exact-name reading of each side of "of" in a chosen exact name "A of B" whose B side names a more
    popular entity (a title of a place: "president of pakistan": Pakistan, then President), not chosen yet; from
    ``found`` (best first), the place first."""
    out, have = [], {x.id for x in chosen}
    for link in [x for x in chosen if not x.alternative and x.match == 1.0]:
        i, j = link.span
        for m in range(i + 1, j - 1):
            if tokens[m] != "of":
                continue
            place = next((c for c in found if (c[1], c[2]) == (m + 1, j) and c[4] == 1.0), None)
            if place is None or place[5] <= link.popularity:
                continue
            title = next((c for c in found if (c[1], c[2]) == (i, m) and c[4] == 1.0), None)
            for part in (place, title):
                if part is not None and part[3] not in have:
                    out.append(part)
                    have.add(part[3])
    return out


def parts_first(chosen: list, tokens: list[str]) -> list:
    """``chosen`` with the place and the title that :func:`of_parts` found in a chosen name "A of B" (both) put where
    the name was, as links of their own (``Link.of_name``: the name), and the name last, as a second reading
    (``LinkConfig.parts_first``), where the question asks for its holder: nothing but function words and words of time
    before the name ("who was the president of pakistan ...", "who is the current ..."). A name written as a
    constraint is left as it is ("the country with a Vice President of Argentina", "a government position called
    ...": CWQ's gold entity is then the name, or another, not its parts). ``tokens``: the normalised question's."""
    for name in [x for x in chosen if not x.alternative]:
        (i, j), seconds = name.span, [x for x in chosen if x.alternative]
        places, titles = ([x for x in seconds if x.span[1] == j and x.span[0] > i],
                          [x for x in seconds if x.span[0] == i and x.span[1] < j])
        if (len(places) == len(titles) == 1 and titles[0].span[1] + 1 == places[0].span[0]
                and all(t in STOP_WORDS or t in HOLDER_WORDS for t in tokens[:i])):
            k = chosen.index(name)
            rest = [x for x in chosen[k + 1:] if x not in (*places, *titles)]
            chosen = [*chosen[:k], *(replace(x, alternative=False, of_name=name.name) for x in (*places, *titles)),
                      *rest, replace(name, alternative=True)]
    return chosen
