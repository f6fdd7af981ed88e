"""What a span's neighbours in the question say about its readings: the region named right after a place, the
longer name a span is part of, the double quotes around a name, and the names beside the first entity linked
(:func:`beside_readings`). The place and the title inside "title of place" are read in :mod:`memq.link.titles`.

**The place beside a place** (:func:`placed`; ``LinkConfig.place_weight``): "fresno texas", "kansas city kansas". Many
places share a name, and a question tells them apart the way an address does, with the region after the place: "where
is fresno texas located?" asks about Fresno, Texas, where popularity and the mention prior read "fresno" as Fresno,
California. The region is a span of its own, so neither the span's match nor its commonness sees it, and coherence
(:meth:`memq.link.linker.Linker.joined_with`) joins only entities one CVT joins. So, with a KG (a linker given a
:class:`~memq.link.fit.MemoryFit`), for each span with two readings or more, at least ``place_readings`` of them (1; 2
before a later session: two places of one name) with its exact name among its ``place_candidates`` best, and a span
that starts right where it ends: when the KG puts such a reading inside one of the next span's two best readings with
an exact name (:meth:`~memq.link.fit.MemoryFit.contained`: ``location.location.containedby`` or ``contains``, or two
``containedby`` edges), that reading gains ``place_weight``. A US state's postal code that ends the question names its
state so too (:func:`state_code`; ``LinkConfig.state_codes``): "what to do san jose ca". A place is named exactly:
"portland" does not lift Portland State University. One query a question, only for questions where such spans meet.
The region's id is kept in the candidate (``Link.within``), and the region itself is linked or not as any other span;
linked, it is a second reading (``LinkConfig.regions_apart``: WebQSP annotates the region in none of the 37 train
questions where a place is read so).

**The longer name around a span** (:func:`nested`; ``LinkConfig.nested_weight``, ``nested_exact_weight``): a
reading that is not its span's exact name (a part of a longer name, a fuzzy match, the name an adjective is formed
from) loses ``nested_weight`` when the span lies inside a longer span of the question that is some entity's exact
name. "what does latin america consist of?" linked the United States of America from "america" (popular, and
"america" named it often in training) before Latin America; "what show does tamera mowry play on?" Tia Mowry from
"mowry". A reading that *is* its span's exact name loses ``nested_exact_weight`` there (a later session): "north
africa" read Africa, and "new england" England, where the longer span is an exact name too, so the longest name the
question writes wins, as it does in most linkers. The reading of the longer name still competes: the rule only
weighs a part against the whole.

**A title that is part of the name** (:func:`title_exact_first`; ``LinkConfig.title_exact_first``): a span that
starts with a title word ("st", "miss", "king") also reads what the rest of it reads (``LinkConfig.title_match``:
"st augustine" Augustine of Hippo). Where the whole span is some entity's exact name, the title is part of that name
("miss america" is the pageant, not the United States of America that "america" reads), so the span's other readings
score just below its best exact one before the fit and the spans beside it weigh in: the string alone puts the
exact name first, and the question's context may still move another reading above it.

**Quotations** (:func:`quoted`; ``LinkConfig.quote_tokens``): a span in double quotes longer than the linker's
``max_tokens`` is looked up whole too.

**Numbers written as Roman numerals** (:func:`roman_key`; ``LinkConfig.numerals``): names write the number of a war,
a sequel, a pope or a monarch in Roman numerals (*World War II*, *Star Wars Episode III*, *Henry VIII*), and people
write it in digits: "when did world war 2 end?" read *World War I*, a fuzzy match of "world war 2" that swaps no
word. A span with a number of 1 to 99 right after a word is looked up with the number written so too, and a word
that is a name's initials and its number reads that name (:func:`numbered_initials`: "wwii", "ww2" *World War II*).

**How a question writes a name** (:func:`spelling`; ``LinkConfig.spellings``): normalising keeps letters and digits
apart, so "u.s." is "u s", "at&t" the function words "at t" and "tom & jerry" "tom jerry". Initials written with
full stops are also read joined ("u s" reads what "us" reads, and is "us" to the mention prior), a word written with
"&" is one word, and "&" between words also reads "and". A lower-case "us" that is a verb's object ("can you tell us
who ...?") reads nothing (:func:`pronoun_us`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace

from memq.errors import MemQError

from .index import STOP_WORDS, fold, normalize

log = logging.getLogger(__name__)

__all__ = ["generic_span", "neighbours", "nested", "placed", "quoted", "regions_apart", "regions_inside",
           "title_exact_first"]


def nested(found: list, weight: float, exact_weight: float = 0.0) -> list:
    """``found`` (:meth:`memq.link.linker.Linker.candidates`' tuples) with ``weight`` taken off each reading that
    is not its span's exact name, and ``exact_weight`` off each one that is, where a longer span that holds the
    span is some entity's exact name."""
    exact = {(c[1], c[2]) for c in found if c[4] == 1.0 and c[2] - c[1] > 1} if weight > 0 or exact_weight > 0 else ()
    if not exact:
        return found
    return [(c[0] - (weight if c[4] < 1.0 else exact_weight), *c[1:])
            if any(a <= c[1] and c[2] <= b and (a, b) != (c[1], c[2]) for a, b in exact) else c for c in found]


def neighbours(index, found: list, tokens: list[str], weight: float, most: int = 2) -> list:
    """``found`` (:meth:`memq.link.linker.Linker.candidates`' tuples) with ``weight`` added to each reading that is
    not its span's exact name where its name holds every word beside its span, the words up to a function word or
    the question's end each way, one to ``most`` of them: "nash" of "what college did john nash go to?" reads *John
    Forbes Nash, Jr.* (who holds "john") before *Steve Nash*. Not where a longer span reads the same entity (it is
    weighed there: "czech" of "czech republic" gains nothing for *Czech Republic*), nor where a word beside is part of
    another name the question writes, an exact name of two words or more apart from the span ("kansas" of "kansas
    city kansas" is no second *Kansas City*)."""
    if weight <= 0:
        return found
    spans: dict[str, list[tuple[int, int]]] = {}
    for c in found:
        spans.setdefault(c[3], []).append((c[1], c[2]))
    names = {(c[1], c[2]) for c in found if c[4] == 1.0 and c[2] - c[1] > 1}
    words: dict[str, set[str]] = {}
    runs: dict[tuple[int, int], set[str] | None] = {}  # a span -> its words beside, None where none count
    out = []
    for c in found:
        i, j = c[1], c[2]
        if c[4] < 1.0 and (i, j) not in runs:
            before, after = _run(tokens, i, j)
            beside = set(tokens[before:i] + tokens[j:after]) - set(tokens[i:j])
            runs[i, j] = beside if 0 < len(beside) <= most and not any(
                not (a <= i and j <= b) and (a < i and b > before or b > j and a < after) for a, b in names) else None
        if c[4] < 1.0 and (beside := runs[i, j]) is not None and not any(
                a <= i and j <= b and (a, b) != (i, j) for a, b in spans[c[3]]):
            if c[3] not in words:
                words[c[3]] = set(normalize(index.name(c[3]) or "").split())
            if beside <= words[c[3]]:
                c = (c[0] + weight, *c[1:])
        out.append(c)
    return out


def _run(tokens: list[str], i: int, j: int) -> tuple[int, int]:
    """Where the run of words around the span ``tokens[i:j]`` starts and ends: up to a function word each way."""
    before, after = i, j
    while before > 0 and tokens[before - 1] not in STOP_WORDS:
        before -= 1
    while after < len(tokens) and tokens[after] not in STOP_WORDS:
        after += 1
    return before, after


def title_exact_first(found: list, tokens: list[str], titles: frozenset[str]) -> list:
    """``found`` (:meth:`memq.link.linker.Linker.candidates`' tuples) with each reading of a span that starts with
    one of ``titles`` and is some entity's exact name, a reading that is not, scored 0.001 below the span's best exact
    reading where it scored above it."""
    best: dict[tuple[int, int], float] = {}
    for c in found:
        if c[4] == 1.0 and c[2] - c[1] > 1 and tokens[c[1]] in titles:
            best[c[1], c[2]] = max(best.get((c[1], c[2]), c[0]), c[0])
    if not best:
        return found
    return [(min(c[0], best[c[1], c[2]] - 0.001), *c[1:]) if c[4] < 1.0 and (c[1], c[2]) in best else c
            for c in found]


def generic_span(linker, key: str) -> bool:
    """Whether the span ``key`` is a common noun phrase to the training questions (``LinkConfig.generic_weight``): in
    ``generic_seen`` of them or more, with a keyphraseness below ``generic_keyphraseness``, and the span that named a
    gold entity best in at most ``generic_named`` of them (0: never; its commonness counts none)."""
    cfg, counts = linker.config, linker.index.mentions
    seen, named = counts.get(key, (0, 0))[0], sum(getattr(counts, "named", {}).get(key, {}).values())
    return (seen >= cfg.generic_seen and named <= cfg.generic_named * seen
            and linker.keyphraseness(key) < cfg.generic_keyphraseness)


# the US states' postal codes but those that are common English words at a question's end ("in", "or", "me", "hi",
# "oh", "ok", "id"), and the District of Columbia's
US_STATES = dict(pair.split(":") for pair in (
    "al:alabama ak:alaska az:arizona ar:arkansas ca:california co:colorado ct:connecticut de:delaware fl:florida "
    "ga:georgia ia:iowa ks:kansas ky:kentucky la:louisiana ma:massachusetts md:maryland mi:michigan mn:minnesota "
    "mo:missouri ms:mississippi mt:montana nc:north_carolina nd:north_dakota ne:nebraska nh:new_hampshire "
    "nj:new_jersey nm:new_mexico nv:nevada ny:new_york pa:pennsylvania ri:rhode_island sc:south_carolina "
    "sd:south_dakota tn:tennessee tx:texas ut:utah va:virginia vt:vermont wa:washington wi:wisconsin "
    "wv:west_virginia wy:wyoming dc:washington_d.c.").split())


def state_code(tokens, j: int) -> str | None:
    """The name of the US state whose postal code is ``tokens[j]`` (normalised) where nothing but function words
    follows it: "what to do san jose ca", "what county is frederick md in". Else None: a code inside a question is
    too often a word or a name's part ("la", "co", "pa")."""
    if j >= len(tokens) or tokens[j] not in US_STATES or not all(t in STOP_WORDS for t in tokens[j + 1:]):
        return None
    return normalize(US_STATES[tokens[j]].replace("_", " "))


def placed(linker, found: list, tokens=()) -> list:
    """``found`` (:meth:`memq.link.linker.Linker.candidates`' tuples) with ``place_weight`` added to each reading
    of a span that the KG puts inside a region the next span names, or a US state the next token's postal code
    names (:func:`state_code`, with ``LinkConfig.state_codes`` and the question's ``tokens``); the region's id
    becomes the fourth part of the candidate's last element (after the fit, its statement and the coherent entity,
    None here)."""
    cfg = linker.config
    spans: dict[tuple[int, int], list] = {}
    for c in sorted(found, key=lambda c: (-c[0], c[3])):
        spans.setdefault((c[1], c[2]), []).append(c)
    regions: dict[tuple[int, int], list[str]] = {}  # a span -> the regions the span right after it names
    for (i, j), cands in spans.items():
        readings = list(dict.fromkeys(c[3] for c in cands[:cfg.place_candidates] if c[4] == 1.0))
        if len(readings) < cfg.place_readings or len(cands) < 2:
            continue
        after = [list(dict.fromkeys(c[3] for c in later if c[4] == 1.0))[:2]
                 for (start, _), later in spans.items() if start == j]
        if cfg.state_codes and (state := state_code(tokens, j)) is not None:
            after.append(linker.index.exact(state)[:3])  # "georgia": the country too, most popular first
        regions[(i, j)] = list(dict.fromkeys(z for names in after for z in names))
    pairs = [(c[3], z) for span, zs in regions.items() for c in spans[span][:cfg.place_candidates] for z in zs
             if c[4] == 1.0 and c[3] != z]
    if not pairs:
        return found
    try:
        inside = linker.fit.contained(pairs)
    except (MemQError, OSError) as exc:  # the KG could not be loaded: link without the places
        log.warning("entity linking goes on without the place beside a place: %s", exc)
        return found
    if not inside:
        return found
    out = []
    for c in found:
        region = next((z for z in regions.get((c[1], c[2]), ()) if c[4] == 1.0 and (c[3], z) in inside), None)
        if region is None:
            out.append(c)
        else:
            fit, statement, *_ = c[6]
            out.append((c[0] + cfg.place_weight, *c[1:6], (fit, statement, None, region)))
    return out


def regions_inside(linker, links: list) -> set[tuple[str, str]]:
    """The ``(place, region)`` ids of ``links`` whose spans meet where the KG puts the place in the region
    (``MemoryFit.contained``), but two places each inside the other; none without a KG or where it fails (logged)."""
    pairs = [(a.id, b.id) for a in links for b in links
             if a.id != b.id and (a.span[1] == b.span[0] or b.span[1] == a.span[0])]
    if not pairs or linker.fit is None:
        return set()
    try:
        inside = linker.fit.contained(pairs)
    except (MemQError, OSError) as exc:  # the KG could not be loaded: the regions that placed a place alone
        log.warning("entity linking leaves the regions beside a place as they are: %s", exc)
        return set()
    return {(a, b) for a, b in inside if (b, a) not in inside}


def regions_apart(linker, chosen: list, beside: bool = True) -> list:
    """``chosen`` (links, :class:`memq.link.linker.Link`) with each region that placed a place (``Link.within``,
    :func:`placed`) a second reading (``alternative``: optional, left out of the planner's prompt); with ``beside``,
    each one a place linked right beside it is in too (:func:`regions_inside`: "texas houston", "newark california",
    where :func:`placed` asked nothing of a place with one reading), the place's ``within`` naming it."""
    regions = {x.within for x in chosen if x.within}
    named = [x for x in chosen if not x.alternative and x.id not in regions]
    within = dict(sorted(regions_inside(linker, named) if beside else (), reverse=True))  # a place -> a region it is in
    regions |= set(within.values())
    return [replace(x, alternative=True) if x.id in regions else
            replace(x, within=within[x.id], within_name=linker.index.name(within[x.id]) or within[x.id])
            if x.id in within and not x.within else x for x in chosen]


QUOTED = re.compile(r'["\u201c\u201d]([^"\u201c\u201d]+)["\u201c\u201d]')


# tokens of one written number: digits (or digits then letters: "95.25kg", "1.9e+06") joined by one of these marks
NUMBER_MARKS = frozenset(".,:/-+")
_TOKEN = re.compile(r"[0-9a-z]+")


def numbers(question: str) -> list[tuple[int, int]]:
    """The (start, end) token spans of ``normalize(question).split()`` that one written number of two tokens or more
    takes: a decimal ("787920.0", "95.25kg"), a date ("1990-05-09", "07/18/2011"), a time, "1.9e+06". The linker
    looks up no span inside one but the whole (``LinkConfig.number_pieces`` off): "0" of
    "787920.0" is no mention of an entity named "0", nor "1943" of "1943-05-25" a part of "1943 Atlantic hurricane
    season". A number written alone ("1600", "the 2010 world series") is not one."""
    folded = fold(question)
    found = list(_TOKEN.finditer(folded))
    out, start = [], None
    for k, token in enumerate(found):
        joined = (k > 0 and token.group()[0].isdigit() and found[k - 1].group()[0].isdigit()
                  and token.start() - found[k - 1].end() == 1 and folded[token.start() - 1] in NUMBER_MARKS)
        if joined and start is None:
            start = k - 1
        elif not joined and start is not None:
            out.append((start, k))
            start = None
    if start is not None:
        out.append((start, len(found)))
    return out


# Roman numerals from 90 down, each with its value (numbers of 1 to 99)
ROMAN = ((90, "xc"), (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i"))


def roman(number: int) -> str:
    """``number`` (1 to 99) as a Roman numeral, lower case: 2 -> "ii", 14 -> "xiv"."""
    if not 1 <= number <= 99:
        raise ValueError(f"roman numerals are written here for 1 to 99, got {number}")
    out = []
    for value, letters in ROMAN:
        while number >= value:
            out.append(letters)
            number -= value
    return "".join(out)


# each Roman numeral of 1 to 99 in its usual form, and its value
ROMAN_VALUES = {roman(n): n for n in range(1, 100)}


def numeral_value(text: str) -> int | None:
    """The number 1 to 99 that ``text`` writes in digits ("2") or as a Roman numeral in its one usual form ("ii"),
    else None ("iiii", "il", "0")."""
    if text.isdigit():
        return int(text) if text[0] != "0" and int(text) <= 99 else None
    return ROMAN_VALUES.get(text)


def roman_key(span: list[str]) -> str | None:
    """The span (normalised tokens) with each whole number of 1 to 99 that follows a word (not a function word or
    another number) written as a Roman numeral: "world war 2" -> "world war ii", "episode 3" -> "episode iii"; None
    when it has none. A number that starts the span, or follows a function word or another number ("in 1998"), stays
    as it is."""
    out, changed = list(span), False
    for k in range(1, len(span)):
        word, before = span[k], span[k - 1]
        number = numeral_value(word) if word.isdigit() else None
        if number is not None and before not in STOP_WORDS and not before[0].isdigit():
            out[k], changed = roman(number), True
    return " ".join(out) if changed else None


def numbered_initials(index, key: str) -> list[str]:
    """The entities whose name is the initials of its words and a number, as one token: "wwii" and "ww2" for *World
    War II*, "ww1" and "wwi" for *World War I* (a name's initials, :meth:`EntityIndex.partial`, take the numeral's
    first letter as a word's: "wwi" is the initials of both wars). The longest numeral that leaves two letters or
    more is read; most popular first."""
    for k in range(2, len(key)):
        number = numeral_value(key[k:]) if key[:k].isalpha() else None
        if number is None:
            continue
        letters, numeral = key[:k], roman(number)
        out = []
        for mid, _ in index.partial(letters + numeral[0]):
            words = normalize(index.name(mid) or "").split()
            if len(words) == len(letters) + 1 and words[-1] == numeral and "".join(w[0] for w in words[:-1]) == letters:
                out.append(mid)
        return out
    return []


@dataclass(frozen=True)
class Spelling:
    """How a question writes some of its words, by the tokens of ``normalize(question).split()`` (:func:`spelling`):
    ``initials``, (start, end) -> the word that initials written with full stops make ("u.s." -> "us", "j.r.r." ->
    "jrr"); ``glued``, the (start, end) of words written together with "&" ("at&t", "r&b"); ``ands``, the tokens
    that come right after an "&" written apart ("tom & jerry"); ``pronouns``, each "us" that is the pronoun ("can
    you tell us who ...?", not the United States)."""

    initials: dict[tuple[int, int], str] = field(default_factory=dict)
    glued: frozenset[tuple[int, int]] = frozenset()
    ands: frozenset[int] = frozenset()
    pronouns: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.initials or self.glued or self.ands or self.pronouns)

    def key(self, tokens: list[str], i: int, j: int) -> str | None:
        """The span ``tokens[i:j]`` as a name would write it: the initials it holds whole joined, and "and" for an
        "&" between two of its words ("u s president" -> "us president", "tom jerry" -> "tom and jerry"); None when
        that is the span itself."""
        out, k = [], i
        while k < j:
            if k in self.ands and k > i:
                out.append("and")
            end, word = next(((b, w) for (a, b), w in self.initials.items() if a == k and b <= j), (k + 1, tokens[k]))
            out.append(word)
            k = end
        key = " ".join(out)
        return None if key == " ".join(tokens[i:j]) else key

    def one_word(self, i: int, j: int) -> bool:
        """Whether tokens ``i`` to ``j`` are one word written with "&" ("at&t": not the function words "at" and
        "t")."""
        return (i, j) in self.glued


def spelling(question: str) -> Spelling:
    """The initials with full stops and the words with "&" of ``question`` (:class:`Spelling`): a run of two single
    letters or more, each followed by a full stop but maybe the last ("u.s.", "d.c.", "u.s.a", not "u. s."); two
    words or more written together with "&" between them; "&" between spaces."""
    folded = fold(question)
    found = list(_TOKEN.finditer(folded))
    gaps = [folded[found[k - 1].end():found[k].start()] if k else "" for k in range(len(found))]
    letter = [len(t.group()) == 1 and t.group().isalpha() for t in found]
    initials, glued, ands = {}, set(), set()
    k = 0
    while k < len(found):
        end = k + 1
        while letter[k] and end < len(found) and letter[end] and gaps[end] == ".":
            end += 1
        if end - k >= 2:
            initials[k, end] = "".join(t.group() for t in found[k:end])
        k = end
    k = 1
    while k < len(found):
        end = k
        while end < len(found) and gaps[end] == "&":
            end += 1
        if end > k:
            glued.add((k - 1, end))
        if gaps[k].strip() == "&" and gaps[k] != "&":
            ands.add(k)
        k = max(end, k + 1)
    return Spelling(initials, frozenset(glued), frozenset(ands), frozenset(pronoun_us(question)))


# verbs whose object a lower-case "us" after them is ("tell us", "let us"); "with us", "to us", "for us" may name
# the country ("what countries trade with us?"), so those are left out
US_OBJECT_OF = frozenset("""tell tells told let lets give gives gave show shows showed help helps helped teach teaches
taught send sends sent bring brings brought join joins joined remind reminds reminded""".split())
_LOWER_US = re.compile(r"(?<![\w.&])us(?![\w&]|\.\w)")  # case-sensitive: "US" is the country


def pronoun_us(question: str) -> list[int]:
    """The tokens of ``normalize(question).split()`` that are the pronoun "us": written in lower case, right after
    a verb it is the object of (:data:`US_OBJECT_OF`), and before a function word or nothing ("can you tell us who
    ...?", "let us be moral"); "show us presidents" and "tell US who" keep their reading of the country."""
    tokens = normalize(question).split()
    out = []
    for found in _LOWER_US.finditer(question):
        k = len(normalize(question[:found.start()]).split())
        if (0 < k < len(tokens) and tokens[k] == "us" and tokens[k - 1] in US_OBJECT_OF
                and (k + 1 == len(tokens) or tokens[k + 1] in STOP_WORDS)):
            out.append(k)
    return out


def quoted(question: str, tokens: list[str], shorter: int, longest: int) -> list[tuple[int, int]]:
    """The (start, end) token spans of ``tokens`` (the normalised question) that the question quotes in double
    quotes, of more than ``shorter`` tokens (the shorter ones are among every span the linker looks up) and at most
    ``longest``: a quotation or a title is one name however long ("Who is rich? He that rejoices in his portion.")."""
    out = []
    for text in QUOTED.findall(question):
        part = normalize(text).split()
        if not shorter < len(part) <= longest:
            continue
        n = len(part)
        out += [(i, i + n) for i in range(len(tokens) - n + 1) if tokens[i:i + n] == part][:1]
    return out


def beside_readings(linker, near: frozenset[str], rest: list, tokens: list[str], spans: set) -> list:
    """New candidates of ``spans`` (of ``rest``, the linker's candidates): the entities of ``near`` that a span names
    exactly or as a part of their name (a span with a function word at an edge: exactly, as ``content_edges`` reads
    it) and that ``rest`` does not already have on that span, each scored as ``Linker.candidates`` scores a reading,
    without the mention prior's commonness and the fit (``LinkConfig.beside``: Linker.joined_with)."""
    cfg, index = linker.config, linker.index
    have = {(c[1], c[2], c[3]) for c in rest}
    out = []
    for i, j in sorted(spans):
        span = tokens[i:j]
        key = " ".join(span)
        partial = not (cfg.content_edges and (span[0] in STOP_WORDS or span[-1] in STOP_WORDS))
        readings = {mid: m for mid, m in linker._names(key, partial=partial, capped=False).items() if mid in near}
        bonus = linker.span_bonus(key) if readings else 0.0
        for mid, match in readings.items():
            if (i, j, mid) not in have:
                pop = index.popularity(mid)
                out.append((match + cfg.popularity_weight * pop + bonus, i, j, mid, match, pop, (None, None)))
    return out
