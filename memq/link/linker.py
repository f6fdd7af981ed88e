"""Linker: a question's topic entities from an :class:`~memq.link.index.EntityIndex`.

1. Mention detection: each span of up to ``max_tokens`` normalised tokens, not all stop words, is looked up as a
   name (exact, else rapidfuzz ``ratio`` >= ``fuzzy_cutoff``: "jamaican" finds "Jamaica"), a learnt alias and a
   demonym (:mod:`memq.link.demonyms`: "italians" reads Italy).
2. Candidate ranking: ``match`` (1 exact, else ratio / 100) + ``popularity_weight`` x popularity (log degree, 0-1)
   + ``length_weight`` x the span's content tokens (up to 3, over 3) + the mention prior (how often the span named a
   gold entity in training, and ``commonness_weight`` x how much less often it named this one than the span's most
   named reading: :mod:`memq.link.mentions`), and, with a KG and a memory bank (:class:`~memq.link.fit.MemoryFit`),
   ``fit_weight`` x the best similarity of a statement recalled for the question that binds at the candidate; the
   question's other spans (:mod:`memq.link.context`): ``place_weight`` for a place inside the region named right
   after it, ``-nested_weight`` for a part of a longer name the question writes (``-nested_exact_weight``: exact).
3. Choice: the best (span, entity) first, then the next whose span does not overlap a chosen one, while the
   score reaches ``threshold`` (``second_threshold`` after the first), at most ``max_entities``; with
   ``same_span_margin`` (off by default), a second reading of a chosen span within it, after every span's best one
   (``alternatives_last``). With a KG, once the first is chosen, a candidate of another span that one CVT joins
   with it gains ``coherence_weight`` (:meth:`Linker.joined_with`: the film beside the character of "who plays
   saruman in lord of the rings?"). The place and the title of a chosen "title of place" follow as second readings
   (``of_parts``). Each chosen entity is a :class:`Link` (mention, score, runners-up) in the trace.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import MemQError
from .context import nested, of_parts, placed, quoted
from .demonyms import countries
from .index import EntityIndex, normalize

log = logging.getLogger(__name__)

# function words and question words: a span made only of these is not a mention
STOP_WORDS = frozenset("""
a about after all also am an and any are as at be been before being between both but by can could did do does
doing done during each for from had has have having he her hers him his how i if in into is it its just me more
most my no nor not now of off on once only or other our out over own same she should so some such than that the
their theirs them then there these they this those through to too under until up very was we were what when where
which while who whom whose why will with would you your yours s t much many get got go goes went come came make made
mean means called call name named kind type sort year years first last new old did does whats where's who's
""".split())

# words a name may be written after that are seldom part of it: the same span without one also matches
# (LinkConfig.title_match). "st" of a place ("st paul") is part of its name, which matches exactly, and better
TITLES = frozenset("st saint dr doctor mr mrs ms miss sir dame lord lady king queen prince princess pope "
                   "captain general".split())


@dataclass(frozen=True)
class LinkConfig:
    """The linker's settings. The defaults were chosen on WebQSP dev (carved from train) with the mention counts
    of the rest of train and a memory without the statements only dev questions gave: recall 0.938 of the named
    topic entities at 1.38 entities a question, precision 0.73 (one reading a span: 0.928, 1.19, 0.84; without the
    fit: 0.903, 1.20, 0.80). A span's second reading is an *alternative*: the planner may name it (optional)."""

    max_tokens: int = 6
    quote_tokens: int = 30  # a longer span in double quotes, up to this many tokens, is looked up whole (0: off)
    fuzzy_cutoff: float = 85.0
    candidates: int = 5  # entities considered per name (the most popular ones)
    partial_match: float = 0.7  # match of a span that is part of a name: this + the rest x the share covered
    fuzzy_match: float = 0.95  # a fuzzy match's ratio / 100 is scaled by this
    base_match: float = 0.85  # the match of a name an adjective is formed from ("egyptian": Egypt; 0: off)
    demonym_match: float = 0.85  # the country a demonym names ("italians", "greek people": memq.link.demonyms; 0: off)
    title_match: float = 0.9  # x the match of the rest of a span that starts with a title ("st augustine"; 0: off)
    # a learnt alias (memq.link.mentions.learnt_aliases: "the us", "king tut"): a reading at this match (0: off); of a
    # span that is an exact name in the index, only with alias_floor training questions for it (1: with any)
    alias_match: float = 0.9
    alias_floor: int = 2
    popularity_weight: float = 0.8
    mention_weight: float = 2.0  # x min(0, keyphraseness - 0.5): spans that seldom named a gold entity in training
    # x (commonness - the best commonness of the span's entities): of the training questions where the span named a
    # gold entity, the share that named this one ("sony": Sony Corporation, not Sony BMG; Linker.commonness). 0.5
    # chosen on WebQSP dev (end to end 18 of 321 changed, 4 up, 1 down; 1.0 tied; 0: off)
    commonness_weight: float = 0.5
    length_weight: float = 1.0
    threshold: float = 0.9
    second_threshold: float = 1.4
    max_entities: int = 3
    # a second entity for a chosen span within this score of the first (<0: off: all of WebQSP dev gave 1 up, 0 down
    # of 26 plans changed, at linking precision 0.890 against 0.831 with 0.2; docs/linking.md)
    same_span_margin: float = -1.0
    # the best reading of every span is chosen before any second reading, so that second readings do not fill
    # max_entities before another span's entity (False: in score order, as before)
    alternatives_last: bool = True
    # fit with the question through the memory (a Linker given a MemoryFit): + fit_weight x the best similarity of
    # the fit_recall statements recalled for the question that binds at the candidate; for the fit_candidates best
    # candidates of each span that can still reach the threshold (0: off)
    fit_weight: float = 0.6
    fit_recall: int = 40
    fit_candidates: int = 4
    # coherence (a Linker given a MemoryFit): once the first entity is chosen, + coherence_weight to a candidate of
    # another span that one CVT joins with it ("saruman" and "lord of the rings": a performance), among the
    # coherence_entities best entities that could reach the second threshold so (0: off)
    coherence_weight: float = 0.3
    coherence_entities: int = 6
    # a span that is part of more names than this is a class word ("language" of Italian Language, "team"): its
    # candidates get no coherence (the answer of "what language did jewish people speak?" is joined with the people)
    coherence_max_names: int = 100
    # memq.link.context: + place_weight for a place inside the region the next span names ("fresno texas"), among a
    # span's place_candidates best readings; - nested_weight for a reading not its span's exact name inside a longer
    # span that is one ("america" of "latin america"), - nested_exact_weight for one that is ("africa"). 0: off
    place_weight: float = 0.5
    place_candidates: int = 4
    place_readings: int = 1  # of them with the span's exact name, at least (2: two places of one name only)
    nested_weight: float = 0.3
    nested_exact_weight: float = 0.5
    of_parts: bool = True  # the place and the title of a chosen "title of place" as second readings (context.of_parts)
    # how many linked entities (best first, second readings aside) a plan must name (the grounded planner's entity
    # coverage); the others are optional: named in the prompt, and a plan may name them. -1: all of them; 0: none
    # (a plan still starts from one). 0 chosen on WebQSP dev (first 100, end to end: F1 0.642 with -1, 0.669
    # with 1, 0.708 with 0; docs/linking.md)
    required: int = 0
    # a constraint entity suggested by the nearest training questions (memq.link.constraints) with at least this
    # support is one the plan must name too; the others are optional. 0: all are optional
    required_support: float = 0.0
    # constraint entities suggested by the question's words too (memq.link.constraints.CueWords): a cue's share of
    # the training questions with it that used the entity, and how many did (cue_share 0: off). On WebQSP dev 0.6 / 3
    # raised the suggestions' recall of the unnamed gold entities 0.379 -> 0.447 (precision 0.684 -> 0.697); end to
    # end it changed 7 of the first 194 questions, 1 up, 1 down, and was left off; with a later session's planner
    # 9 of all 321, 3 up, 0 down (docs/linking.md): on
    cue_share: float = 0.6
    cue_count: int = 3
    # how many linked entities (best first, second readings aside) the planner's prompt names; the optional ones
    # after them are left out of it, as second readings are (a grounded plan may still start there). -1: all
    prompted: int = -1

    def __post_init__(self) -> None:
        if self.max_tokens < 1 or self.candidates < 1 or self.max_entities < 1 or self.fit_candidates < 1 \
                or self.fit_recall < 1 or self.alias_floor < 1:
            raise ValueError(f"max_tokens, candidates, max_entities, fit_candidates, fit_recall and alias_floor must "
                             f"be >= 1, got {self.max_tokens}, {self.candidates}, {self.max_entities}, "
                             f"{self.fit_candidates}, {self.fit_recall}, {self.alias_floor}")
        if not 0 <= self.cue_share <= 1 or self.cue_count < 1:
            raise ValueError(f"cue_share must be in [0, 1] and cue_count >= 1, got {self.cue_share}, {self.cue_count}")
        if not 0 <= self.required_support <= 1:
            raise ValueError(f"required_support is a share of the vote in [0, 1] (0: off), got {self.required_support}")
        if self.required < -1 or self.prompted < -1:
            raise ValueError(f"required and prompted must be >= 0, or -1 for every linked entity, got "
                             f"{self.required}, {self.prompted}")
        if self.fit_weight < 0 or self.commonness_weight < 0:
            raise ValueError(f"fit_weight and commonness_weight must be >= 0, got {self.fit_weight}, "
                             f"{self.commonness_weight}")
        if min(self.place_weight, self.nested_weight, self.nested_exact_weight) < 0 or self.place_candidates < 2 \
                or self.place_readings < 1:
            raise ValueError(f"place_weight, nested_weight and nested_exact_weight must be >= 0, place_candidates >= 2 "
                             f"and place_readings >= 1, got {self.place_weight}, {self.nested_weight}, "
                             f"{self.nested_exact_weight}, {self.place_candidates}, {self.place_readings}")
        if self.coherence_weight < 0 or self.coherence_entities < 2 or self.coherence_max_names < 0:
            raise ValueError(f"coherence_weight and coherence_max_names must be >= 0 and coherence_entities >= 2, "
                             f"got {self.coherence_weight}, {self.coherence_max_names}, {self.coherence_entities}")
        if not 0 <= self.fuzzy_cutoff <= 100 or not 0 <= self.alias_match <= 1 or not 0 <= self.demonym_match <= 1:
            raise ValueError(f"fuzzy_cutoff is a rapidfuzz ratio in 0-100, alias_match and demonym_match matches in "
                             f"0-1, got {self.fuzzy_cutoff}, {self.alias_match}, {self.demonym_match}")


def with_settings(config: LinkConfig, settings: list[str]) -> LinkConfig:
    """``config`` with ``KEY=VALUE`` settings of its fields (``memq evaluate --link``); ValueError names a bad one."""
    from dataclasses import fields, replace

    types = {f.name: type(getattr(config, f.name)) for f in fields(config)}
    changes = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or key not in types:
            raise ValueError(f"a linker setting is KEY=VALUE with KEY one of {', '.join(types)}; got {item!r}")
        try:
            if types[key] is bool and value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(value)
            changes[key] = value.lower() in ("true", "1") if types[key] is bool else types[key](value)
        except ValueError:
            raise ValueError(f"linker setting {key} takes a {types[key].__name__}, got {value!r}") from None
    return replace(config, **changes)


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
        return out


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
        for i in range(len(tokens)):
            for j in range(i + 1, min(len(tokens), i + cfg.max_tokens) + 1):
                span = tokens[i:j]
                if all(t in STOP_WORDS for t in span):
                    continue
                key = " ".join(span)
                matches = self._names(key)
                named = any(m == 1.0 for m in matches.values())  # some entity has the span's exact name
                if not named and span[0] not in STOP_WORDS and span[-1] not in STOP_WORDS and len(key) >= 4:
                    self._add_fuzzy(key, matches)
                if cfg.base_match > 0 and j == i + 1 and not named:
                    for name in index.bases(key):  # "egyptian": Egypt
                        for mid in index.exact(name)[:cfg.candidates]:
                            matches[mid] = max(matches.get(mid, 0.0), cfg.base_match)
                for mid in countries(index, tokens, i, j, STOP_WORDS) if cfg.demonym_match > 0 else ():  # "italians"
                    matches[mid] = max(matches.get(mid, 0.0), cfg.demonym_match)
                if cfg.title_match > 0 and j > i + 1 and span[0] in TITLES and span[1] not in STOP_WORDS:
                    rest = " ".join(span[1:])  # "st augustine": Augustine of Hippo, as "augustine" finds him
                    found = self._names(rest)
                    if span[0] == "st":  # "st peter": Saint Peter
                        found.update((mid, 1.0) for mid in index.exact(f"saint {rest}")[:cfg.candidates])
                    for mid, match in found.items():  # below the span's own exact name: "st paul" is St. Paul first
                        matches[mid] = max(matches.get(mid, 0.0), cfg.title_match * match)
                for mid in getattr(index.mentions, "named", {}).get(key, ()) if cfg.alias_match > 0 else ():
                    matches.setdefault(mid, cfg.alias_match)  # a learnt alias (a reading the index has is kept)
                if matches:
                    yield i, j, key, list(matches.items())

    def _names(self, key: str) -> dict[str, float]:
        """Entity id -> match of the names ``key`` (normalised) is: 1 for an exact name, ``partial_match`` + the
        rest x the share it covers for a name it is a part of."""
        cfg = self.config
        matches = {mid: 1.0 for mid in self.index.exact(key)[:cfg.candidates]}
        for mid, cover in self.index.partial(key)[:cfg.candidates]:
            matches.setdefault(mid, cfg.partial_match + (1 - cfg.partial_match) * cover)
        return matches

    def _add_fuzzy(self, key: str, matches: dict[str, float]) -> None:
        """Adds to ``matches`` the entities of the names within ``fuzzy_cutoff`` of ``key``, at ``fuzzy_match`` x
        ratio / 100 (a better match already there stays)."""
        cfg = self.config
        for name, ratio in self.index.fuzzy(key, cfg.fuzzy_cutoff, cfg.candidates):
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
            content = min(sum(1 for t in key.split() if t not in STOP_WORDS), 3)
            bonus = cfg.length_weight * content / 3 + cfg.mention_weight * min(0.0, self.keyphraseness(key) - 0.5)
            # the entity the span named most often in training keeps its score, the others lose by how much less
            # often: it chooses among a span's readings, and never lifts a span above another
            common = {mid: self.commonness(key, mid) for mid, _ in matches} if cfg.commonness_weight else {}
            top = max(common.values(), default=0.0)
            for mid, match in matches:
                pop = index.popularity(mid)
                found.append((match + cfg.popularity_weight * pop + bonus + cfg.commonness_weight * (
                    common.get(mid, top) - top), i, j, mid, match, pop, (None, None)))
        found = nested(found, cfg.nested_weight, cfg.nested_exact_weight)
        if self.uses_fit and found:
            found = self.with_fit(question, found)
        if self.fit is not None and cfg.place_weight > 0 and found:
            found = placed(self, found)
        found.sort(key=best_first)
        return found

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
        if cfg.of_parts:
            for part in of_parts(found, chosen, tokens)[:cfg.max_entities - len(chosen)]:
                chosen.append(self._link(part, found, tokens, True))
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
        candidate's last element. The first choice never changes: coherence only finds the entities beside it."""
        cfg = self.config
        i0, j0 = first.span

        def apart(c) -> bool:  # on a span that does not overlap the first's
            return c[2] <= i0 or j0 <= c[1]

        best: list[str] = []
        for c in filter(apart, rest):
            if c[0] + cfg.coherence_weight < cfg.second_threshold or len(best) >= cfg.coherence_entities:
                break
            if c[3] not in best and c[3] != first.id \
                    and len(self.index.partial(" ".join(tokens[c[1]:c[2]]))) <= cfg.coherence_max_names:
                best.append(c[3])
        if not best:
            return rest
        try:
            joined = self.fit.connected([(first.id, mid) for mid in best])
        except (MemQError, OSError) as exc:  # the KG could not be loaded: link without coherence
            log.warning("entity linking goes on without coherence: %s", exc)
            return rest
        partners = {mid for mid in best if frozenset((first.id, mid)) in joined}
        if not partners:
            return rest
        out = [(c[0] + cfg.coherence_weight, *c[1:6], (*c[6][:2], first.id, *c[6][3:]))
               if c[3] in partners and apart(c) else c for c in rest]
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

