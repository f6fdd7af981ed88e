"""Linker: a question's topic entities from an :class:`~memq.link.index.EntityIndex`.

1. Mention detection: each span of up to ``max_tokens`` normalised tokens, not all stop words, is looked up as a
   name (exact, a part of a name, else rapidfuzz ``ratio`` >= ``fuzzy_cutoff``: "jamaican" finds "Jamaica"), a
   learnt alias and a demonym (:mod:`memq.link.demonyms`: "italians" reads Italy); a span that starts or ends with a
   stop word, as an exact name only (``content_edges``: "unit of" is no part of *Astronomical Unit of Mass*); a span
   with a number after a word, with the number as a Roman numeral too, and a word of a name's initials and its
   number, as that name (``numerals``: "world war 2", "wwii": World War II); initials written with full stops
   joined too, a word written with "&" as a word, "&" as "and", and no "us" that a verb has as its object
   (``spellings``: "u.s.", "at&t", "tom & jerry", "tell us").
2. Candidate ranking: ``match`` (1 exact, else ratio / 100) + ``popularity_weight`` x popularity (log degree, 0-1)
   + ``length_weight`` x the span's content tokens (up to 3, over 3) + the mention prior (how often the span named a
   gold entity in training, and ``commonness_weight`` x how much less often it named this one than the span's most
   named reading: :mod:`memq.link.mentions`), and, with a KG and a memory bank (:class:`~memq.link.fit.MemoryFit`),
   ``fit_weight`` x the best similarity of a statement recalled for the question that binds at the candidate; the
   question's other spans (:mod:`memq.link.context`): ``place_weight`` for a place inside the region named right
   after it, ``-nested_weight`` for a part of a longer name the question writes (``-nested_exact_weight``: exact),
   ``-unread_weight`` for a part of a name it writes with capitals that nothing reads whole (:mod:`memq.link.capitals`).
3. Choice: the best (span, entity) first, then the next whose span does not overlap a chosen one, while the
   score reaches ``threshold`` (``second_threshold`` after the first), at most ``max_entities``; with
   ``same_span_margin`` (off by default), a second reading of a chosen span within it, after every span's best one
   (``alternatives_last``). With a KG, once the first is chosen, a candidate of another span that one CVT joins
   with it gains ``coherence_weight`` (:meth:`Linker.joined_with`: the film beside the character of "who plays
   saruman in lord of the rings?"); with ``beside``, the entities one CVT joins with it are read from the KG, and a
   span the training questions never read may name one past its more popular readings ("sam" of "who plays sam in
   anger management?": the show's character). The place and the title of a chosen "title of place" follow as second
   readings (``of_parts``). Each chosen entity is a :class:`Link` (mention, score, runners-up) in the trace.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import MemQError
from .capitals import cased_runs, unread_names
from .context import (
    beside_readings,
    generic_span,
    neighbours,
    nested,
    numbered_initials,
    numbers,
    placed,
    quoted,
    regions_apart,
    roman_key,
    spelling,
    title_exact_first,
)
from .demonyms import asked_other, countries
from .index import STOP_WORDS, EntityIndex, normalize
from .settings import LinkConfig
from .titles import of_parts, parts_first

log = logging.getLogger(__name__)

# the match of a name read from its initials and its number ("wwii": World War II; LinkConfig.numerals), as a learnt
# alias's (LinkConfig.alias_match): a name's initials alone match 0.85 (EntityIndex.partial)
NUMBERED_INITIALS = 0.9


# words a name may be written after that are seldom part of it: the same span without one also matches
# (LinkConfig.title_match). "st" of a place ("st paul") is part of its name, which matches exactly, and better
TITLES = frozenset("st saint dr doctor mr mrs ms miss sir dame lord lady king queen prince princess pope "
                   "captain general".split())


@dataclass(frozen=True)
class Link:
    """One linked entity: the span of the question it came from and why it won."""

    id: str
    name: str
    mention: str
    score: float
    match: float
    popularity: float
    runners_up: tuple[tuple[str, str, float], ...] = field(default=())  # (id, name, score), best first
    span: tuple[int, int] = (0, 0)  # token positions of the mention in the normalised question
    fit: float | None = None  # the part of the score from the fit through the memory (None: not used)
    fit_statement: str | None = None  # the recalled statement that binds at the entity
    alternative: bool = False  # a second reading of a span linked already (``same_span_margin``): optional
    coherent: str | None = None  # the first entity, when one CVT joins it with this one (coherence_weight)
    within: str | None = None  # the region the next span names, when the KG puts this place in it (place_weight)
    within_name: str | None = None
    of_name: str | None = None  # the name "A of B" this place or title is read in place of (titles.parts_first)

    def to_json(self) -> dict:
        out = {"id": self.id, "name": self.name, "mention": self.mention, "score": round(self.score, 4),
               "match": round(self.match, 4), "popularity": round(self.popularity, 4),
               "runners_up": [{"id": i, "name": n, "score": round(s, 4)} for i, n, s in self.runners_up]}
        if self.fit is not None:
            out["fit"] = round(self.fit, 4)
            out["fit_statement"] = self.fit_statement
        if self.alternative:
            out["alternative"] = True
        if self.coherent:
            out["coherent"] = self.coherent
        if self.within:
            out["within"], out["within_name"] = self.within, self.within_name
        if self.of_name:
            out["of_name"] = self.of_name
        return out


def swaps_a_word(key: str, name: str, cutoff: float) -> bool:
    """Whether the normalised name ``name``, a fuzzy match of the span ``key``, puts another word where ``key`` has
    one: a content word of each that is within ``cutoff`` of no content word of the other (the better of rapidfuzz's
    ``ratio`` and ``partial_ratio``, 0-100, so that a short form within a word matches it: "vin" / "vince", "vil" /
    "deville"). "scream 3" is not "scream 2", nor "government of ghana" "government of iran", though each pair is
    within the fuzzy cutoff as a whole; a misspelt word ("montesquie") or a word more on one side ("natalie portman
    play") swaps none."""
    from rapidfuzz import fuzz

    def unmatched(words: list[str], others: list[str]) -> bool:
        return any(max((max(fuzz.ratio(w, o), fuzz.partial_ratio(w, o)) for o in others), default=0.0) < cutoff
                   for w in words)

    a, b = ([w for w in text.split() if w not in STOP_WORDS] for text in (key, name))
    return unmatched(a, b) and unmatched(b, a)


def keep_best(matches: dict[str, float], readings: dict[str, float]) -> None:
    """Adds ``readings`` (id -> match) to ``matches``, keeping each id's better match."""
    for mid, match in readings.items():
        matches[mid] = max(matches.get(mid, 0.0), match)


def best_first(candidate: tuple) -> tuple:
    """The order of the linker's candidates: the highest score first, then the earlier span, then the id."""
    return -candidate[0], candidate[1], candidate[3]


class Linker:
    """Finds and ranks the entities a question names; cheap to construct, the index is loaded by the caller."""

    def __init__(self, index: EntityIndex, config: LinkConfig | None = None, fit=None) -> None:
        self.index = index
        self.config = config or LinkConfig()
        self.fit = fit  # a memq.link.fit.MemoryFit (or None: no fit signal)

    @property
    def uses_fit(self) -> bool:
        return self.fit is not None and self.config.fit_weight > 0

    def spans(self, question: str) -> Iterator[tuple[int, int, str, list[tuple[str, float]]]]:
        """Each span of the question with entities: (start, end, normalised text, [(id, match)]): every span of up to
        ``max_tokens`` tokens, and the longer ones the question quotes (:func:`quoted`)."""
        cfg, index = self.config, self.index
        tokens = normalize(question).split()
        for i, j in quoted(question, tokens, cfg.max_tokens, cfg.quote_tokens):  # "War is too important a matter ..."
            key = " ".join(tokens[i:j])
            matches = {mid: 1.0 for mid in index.exact(key)[:cfg.candidates]}
            if not matches:
                self._add_fuzzy(key, matches)
            if matches:
                yield i, j, key, list(matches.items())
        inside = {} if cfg.number_pieces else {k: (a, b) for a, b in numbers(question) for k in range(a, b)}
        written = spelling(question) if cfg.spellings else None  # "u.s.", "at&t", "tom & jerry"
        aliases = getattr(index.mentions, "named", {}) if cfg.alias_match > 0 else {}  # learnt aliases, by span
        for i in range(len(tokens)):
            for j in range(i + 1, min(len(tokens), i + cfg.max_tokens) + 1):
                span = tokens[i:j]
                if written and j == i + 1 and i in written.pronouns:
                    continue  # "can you tell us who ...?": no United States
                glued = bool(written) and written.one_word(i, j)  # "at&t" is no pair of function words
                if all(t in STOP_WORDS for t in span) and not glued:
                    continue
                if i in inside and j - 1 in inside and inside[i] == inside[j - 1] != (i, j):
                    continue  # a piece of one written number ("0" of "787920.0")
                key = " ".join(span)
                edged = not glued and (span[0] in STOP_WORDS or span[-1] in STOP_WORDS)
                partial = not (cfg.content_edges and edged)
                matches = self._names(key, partial=partial)
                if written and (as_written := written.key(tokens, i, j)) is not None:
                    # "u s" (written "u.s.") reads what "us" reads too, and is "us" to the mention prior
                    keep_best(matches, self._names(as_written, partial=partial))
                    for mid in aliases.get(key, ()):
                        matches.setdefault(mid, cfg.alias_match)  # the span's own learnt aliases, as below
                    key = as_written
                if cfg.numerals and (roman := roman_key(span)) is not None:  # "world war 2": World War II
                    keep_best(matches, self._names(roman, partial=partial))
                if cfg.numerals and j == i + 1:  # "wwii": World War II
                    for mid in numbered_initials(index, key)[:cfg.candidates]:
                        matches[mid] = max(matches.get(mid, 0.0), NUMBERED_INITIALS)
                named = any(m == 1.0 for m in matches.values())  # some entity has the span's exact name
                if not named and not edged and len(key) >= 4:
                    self._add_fuzzy(key, matches)
                if cfg.base_match > 0 and j == i + 1 and not named:
                    for name in index.bases(key):  # "egyptian": Egypt
                        for mid in index.exact(name)[:cfg.candidates]:
                            matches[mid] = max(matches.get(mid, 0.0), cfg.base_match)
                demonym = countries(index, tokens, i, j, STOP_WORDS, cfg.speech_asked) if cfg.demonym_match > 0 else ()
                for mid in demonym:  # "italians"; "what language do british speak?"
                    matches[mid] = max(matches.get(mid, 0.0), cfg.demonym_match)
                if cfg.title_match > 0 and j > i + 1 and span[0] in TITLES and span[1] not in STOP_WORDS:
                    rest = " ".join(span[1:])  # "st augustine": Augustine of Hippo, as "augustine" finds him
                    found = self._names(rest)
                    if span[0] == "st":  # "st peter": Saint Peter
                        found.update((mid, 1.0) for mid in index.exact(f"saint {rest}")[:cfg.candidates])
                    for mid, match in found.items():  # below the span's own exact name: "st paul" is St. Paul first
                        matches[mid] = max(matches.get(mid, 0.0), cfg.title_match * match)
                for mid in aliases.get(key, ()):
                    matches.setdefault(mid, cfg.alias_match)  # a learnt alias (a reading the index has is kept)
                if matches:
                    yield i, j, key, list(matches.items())

    def _names(self, key: str, partial: bool = True, capped: bool = True) -> dict[str, float]:
        """Entity id -> match of the names ``key`` (normalised) is: 1 for an exact name, ``partial_match`` + the
        rest x the share it covers for a name it is a part of (with ``partial``); the ``candidates`` most popular of
        each, or all of them (``capped=False``)."""
        cfg = self.config
        top = cfg.candidates if capped else None
        matches = {mid: 1.0 for mid in self.index.exact(key)[:top]}
        for mid, cover in self.index.partial(key)[:top] if partial else ():
            matches.setdefault(mid, cfg.partial_match + (1 - cfg.partial_match) * cover)
        return matches

    def _add_fuzzy(self, key: str, matches: dict[str, float]) -> None:
        """Adds to ``matches`` the entities of the names within ``fuzzy_cutoff`` of ``key``, at ``fuzzy_match`` x
        ratio / 100 (a better match already there stays), but not those of a name that swaps a word of ``key`` for
        another (:func:`swaps_a_word`, ``fuzzy_words``)."""
        cfg = self.config
        for name, ratio in self.index.fuzzy(key, cfg.fuzzy_cutoff, cfg.candidates):
            if cfg.fuzzy_words > 0 and swaps_a_word(key, name, cfg.fuzzy_words):
                continue
            for mid in self.index.exact(name)[:cfg.candidates]:
                matches[mid] = max(matches.get(mid, 0.0), cfg.fuzzy_match * ratio / 100)

    def keyphraseness(self, key: str) -> float:
        """How often ``key`` named a gold topic entity where it occurred in the training questions (smoothed
        towards 0.5; 0.5 for a span never seen)."""
        seen, linked = self.index.mentions.get(key, (0, 0))
        return (linked + 1) / (seen + 2)

    def commonness(self, key: str, mid: str) -> float:
        """How often ``key`` named ``mid`` among the training questions where it named a gold topic entity
        (smoothed towards 0: one question of one gives 0.5; 0 for a span never seen naming one)."""
        _, linked = self.index.mentions.get(key, (0, 0))
        named = getattr(self.index.mentions, "named", {}).get(key, {})
        return named.get(mid, 0) / (linked + 1)

    def candidates(self, question: str) -> list[tuple[float, int, int, str, float, float, tuple]]:
        """Every (score, start, end, id, match, popularity, (fit part of the score or None, statement id)) of the
        question's spans, best first."""
        cfg, index = self.config, self.index
        found = []
        for i, j, key, matches in self.spans(question):
            bonus = self.span_bonus(key)
            generic = cfg.generic_weight if cfg.generic_weight and generic_span(self, key) else 0.0
            # the entity the span named most often in training keeps its score, the others lose by how much less
            # often: it chooses among a span's readings, and never lifts a span above another
            common = {mid: self.commonness(key, mid) for mid, _ in matches} if cfg.commonness_weight else {}
            top = max(common.values(), default=0.0)
            for mid, match in matches:
                pop = index.popularity(mid)
                found.append((match + cfg.popularity_weight * pop + bonus + cfg.commonness_weight * (
                    common.get(mid, top) - top) - (generic if match < 1.0 else 0.0), i, j, mid, match, pop,
                              (None, None)))
        tokens = normalize(question).split()
        if cfg.title_exact_first:  # "miss america": the pageant, not what "america" reads
            found = title_exact_first(found, tokens, TITLES)
        if cfg.asked_other > 0:  # "what countries speak german?": German Language, not Germany
            found = asked_other(index, found, tokens, cfg.asked_other, cfg.spoken, cfg.speech_asked)
        found = nested(found, cfg.nested_weight, cfg.nested_exact_weight)
        found = neighbours(index, found, tokens, cfg.neighbour_weight)  # "john nash": John Forbes Nash, Jr.
        if cfg.unread_weight > 0:  # "Peter Minuit", a name the index lacks: "peter" is no Peter Crouch
            found = unread_names(index, found, tokens, cased_runs(question, tokens), cfg.unread_weight)
        if self.uses_fit and found:
            found = self.with_fit(question, found)
        if self.fit is not None and cfg.place_weight > 0 and found:
            found = placed(self, found, tokens)
        found.sort(key=best_first)
        return found

    def span_bonus(self, key: str) -> float:
        """What a span adds to each of its readings' scores: ``length_weight`` x its content tokens (up to 3, over
        3), and ``mention_weight`` x min(0, keyphraseness - 0.5)."""
        cfg = self.config
        content = min(sum(1 for t in key.split() if t not in STOP_WORDS), 3)
        return cfg.length_weight * content / 3 + cfg.mention_weight * min(0.0, self.keyphraseness(key) - 0.5)

    def with_fit(self, question: str, found: list) -> list:
        """``found`` with ``fit_weight`` x fit added to the score of the ``fit_candidates`` best candidates of each
        span whose best could still reach the threshold with the fit (the others get a fit of 0)."""
        cfg = self.config
        by_span: dict[tuple[int, int], list] = {}
        for c in found:
            by_span.setdefault((c[1], c[2]), []).append(c)
        todo: list[str] = []
        for cands in by_span.values():
            cands.sort(key=lambda c: (-c[0], c[3]))
            if cands[0][0] + cfg.fit_weight >= cfg.threshold:
                todo += [c[3] for c in cands[:cfg.fit_candidates]]
        try:
            fits = self.fit.scores(question, dict.fromkeys(todo), recall=cfg.fit_recall) if todo else {}
        except (MemQError, OSError, ImportError) as exc:  # the KG or the bank could not be read: link without the fit
            log.warning("entity linking goes on without the fit through the memory: %s", exc)
            self.fit = None
            return found
        out = []
        for score, i, j, mid, match, pop, _ in found:
            fit, statement = fits.get(mid, (0.0, None))
            out.append((score + cfg.fit_weight * fit, i, j, mid, match, pop, (cfg.fit_weight * fit, statement)))
        return out

    def link(self, question: str) -> list[Link]:
        """The question's topic entities, best first (possibly none)."""
        cfg = self.config
        tokens = normalize(question).split()
        found = self.candidates(question)
        chosen: list[Link] = []
        taken: set[int] = set()
        # the best reading of each span first; a span's second readings then, while there is room, so that they
        # do not crowd out another span's entity ("corporation": News, Sony and Microsoft Corporation before Chrysler)
        for second in (False, True) if cfg.alternatives_last else (None,):
            k = 0
            while k < len(found):
                score, i, j, mid = found[k][:4]
                k += 1
                if len(chosen) >= cfg.max_entities or score < (cfg.second_threshold if chosen else cfg.threshold):
                    break
                if any(link.id == mid for link in chosen):
                    continue
                alternative = bool(taken.intersection(range(i, j)))
                if second is not None and alternative != second:
                    continue
                if alternative:
                    # a second reading of a chosen span ("kennedy": John F. or Ted) when it scores close to the first
                    best = next((x for x in chosen if x.span == (i, j)), None)
                    if best is None or best.score - score > cfg.same_span_margin:
                        continue
                    if normalize(self.index.name(mid) or mid) == normalize(best.name):
                        continue  # a plan could not name it apart from the first (two places called Atlanta)
                taken.update(range(i, j))
                chosen.append(self._link(found[k - 1], found, tokens, alternative))
                if len(chosen) == 1 and self.fit is not None and cfg.coherence_weight > 0:
                    found = found[:k] + self.joined_with(chosen[0], found[k:], tokens)
        if cfg.regions_apart:  # a region beside a place in it: never a gold topic entity in WebQSP train
            chosen = regions_apart(self, chosen, cfg.regions_beside)
        if cfg.of_parts:
            for part in of_parts(found, chosen, tokens)[:cfg.max_entities - len(chosen)]:
                chosen.append(self._link(part, found, tokens, True))
            chosen = parts_first(chosen, tokens) if cfg.parts_first else chosen
        return chosen

    def _link(self, candidate: tuple, found: list, tokens: list[str], alternative: bool) -> Link:
        """The :class:`Link` of a chosen ``candidate`` of ``found``, with up to three runners-up: the best other
        entities of the spans that overlap its own."""
        score, i, j, mid, match, pop, (fit, statement, *marks) = candidate
        coherent, within = (*marks, None, None)[:2]
        others = []
        for c in found:
            if c[3] != mid and c[1] < j and i < c[2] and all(o[0] != c[3] for o in others):
                others.append((c[3], self.index.name(c[3]) or c[3], c[0]))
            if len(others) == 3:
                break
        return Link(mid, self.index.name(mid) or mid, " ".join(tokens[i:j]), score, match, pop, tuple(others),
                    (i, j), fit if self.uses_fit else None, statement, alternative, coherent, within,
                    (self.index.name(within) or within) if within else None)

    def joined_with(self, first: Link, rest: list, tokens: list[str]) -> list:
        """``rest`` (the candidates after the first entity chosen), best first again once ``coherence_weight`` is
        added to each candidate that one CVT joins with ``first`` in the KG (:meth:`memq.link.fit.MemoryFit.
        connected`): of the ``coherence_entities`` best entities on spans apart from the first's whose score could
        reach the second threshold so, each at its best span, but for spans that are part of more than
        ``coherence_max_names`` names (class words). The first entity's id becomes the last part of a joined
        candidate's last element. The first choice never changes: coherence only finds the entities beside it.

        With ``beside``, where a span that named no entity in the training questions (the mention prior's
        ``named``; "harry potter" named the franchise) could reach the second threshold with the bonus, the entities
        one CVT joins with ``first`` (:meth:`MemoryFit.beside`, for a first entity of at most ``beside_degree``
        edges) are all joined, unasked; such a span also reads those it names past its ``candidates`` readings
        (:func:`~memq.link.context.beside_readings`: "sam", Sam Goodson of the show's cast), and its joined
        readings are lifted together until the best scores as the span's best reading did, before the bonus."""
        cfg, (i0, j0) = self.config, first.span

        def apart(c) -> bool:  # on a span that does not overlap the first's
            return c[2] <= i0 or j0 <= c[1]

        worded: dict[tuple[int, int], bool] = {}  # span -> it is no class word

        def eligible(c) -> bool:
            if (c[1], c[2]) not in worded:
                worded[c[1], c[2]] = len(self.index.partial(" ".join(tokens[c[1]:c[2]]))) <= cfg.coherence_max_names
            return apart(c) and worded[c[1], c[2]]

        near, complete, unread = frozenset(), False, set()
        if cfg.beside and self.index.degree(first.id) <= cfg.beside_degree:
            named, first_scores = getattr(self.index.mentions, "named", {}), {}
            for c in rest:  # best first: a span's first candidate is its best
                first_scores.setdefault((c[1], c[2]), c[0])
            unread = {(c[1], c[2]) for c in rest if eligible(c) and not named.get(" ".join(tokens[c[1]:c[2]]))
                      and first_scores[c[1], c[2]] + cfg.coherence_weight >= cfg.second_threshold}
        if unread:  # a span the KG's entities beside the first may be read on
            try:
                near, complete = self.fit.beside(first.id, cfg.beside_limit)
            except (MemQError, OSError) as exc:  # the KG could not be loaded: link without coherence
                log.warning("entity linking goes on without coherence: %s", exc)
                return rest
            rest = rest + beside_readings(self, near, rest, tokens, unread)
        partners = {c[3] for c in rest if c[3] in near and eligible(c)}
        best: list[str] = []
        for c in filter(apart, rest):
            if c[0] + cfg.coherence_weight < cfg.second_threshold or len(best) >= cfg.coherence_entities:
                break
            if c[3] not in best and c[3] != first.id and c[3] not in partners and eligible(c):
                best.append(c[3])
        if best and not complete:
            try:
                joined = self.fit.connected([(first.id, mid) for mid in best])
            except (MemQError, OSError) as exc:  # the KG could not be loaded: link without coherence
                log.warning("entity linking goes on without coherence: %s", exc)
                joined = set()
            partners |= {mid for mid in best if frozenset((first.id, mid)) in joined}
        if not partners:
            return rest
        top: dict[tuple[int, int], float] = {}  # an unread span's best score (its new readings too), and its joined
        # readings' best
        lift: dict[tuple[int, int], float] = {}
        for c in rest:
            if (c[1], c[2]) in unread:
                top[c[1], c[2]] = max(top.get((c[1], c[2]), c[0]), c[0])
                if c[3] in partners:
                    lift[c[1], c[2]] = max(lift.get((c[1], c[2]), c[0]), c[0])
        out = [(c[0] + top.get((c[1], c[2]), 0.0) - lift.get((c[1], c[2]), 0.0) + cfg.coherence_weight, *c[1:6],
                (*c[6][:2], first.id, *c[6][3:])) if c[3] in partners and apart(c) else c for c in rest]
        out.sort(key=best_first)
        return out

    def resolve_name(self, name: str) -> Link | None:
        """The most popular entity called ``name`` (exactly after normalisation, else fuzzily); None if none."""
        key = normalize(name)
        if not key:
            return None
        ids = [(mid, 1.0) for mid in self.index.exact(key)]
        if not ids:
            ids = [(mid, ratio / 100) for n, ratio in self.index.fuzzy(key, self.config.fuzzy_cutoff)
                   for mid in self.index.exact(n)]
        if not ids:
            return None
        scored = sorted(((m + self.config.popularity_weight * self.index.popularity(mid), mid, m) for mid, m in ids),
                        key=lambda t: (-t[0], t[1]))
        score, mid, match = scored[0]
        return Link(mid, self.index.name(mid) or mid, key, score, match, self.index.popularity(mid),
                    tuple((o, self.index.name(o) or o, s) for s, o, _ in scored[1:4]))

