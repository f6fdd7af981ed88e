"""The linker's settings (:class:`LinkConfig`), and ``KEY=VALUE`` changes of them (:func:`with_settings`).

:class:`memq.link.linker.Linker` reads them; the comments beside the fields say what most of them weigh and where
they were chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LinkConfig", "with_settings"]


@dataclass(frozen=True)
class LinkConfig:
    """The linker's settings. The defaults were chosen on WebQSP dev (carved from train) with the mention counts
    of the rest of train and a memory without the statements only dev questions gave: recall 0.938 of the named
    topic entities at 1.38 entities a question, precision 0.73 (one reading a span: 0.928, 1.19, 0.84; without the
    fit: 0.903, 1.20, 0.80). A span's second reading is an *alternative*: the planner may name it (optional)."""

    max_tokens: int = 6
    # a span inside one written number of two tokens or more ("0" of "787920.0", "1943" of "1943-05-25") is looked
    # up too (memq.link.context.numbers; the whole number always is). Off since GrailQA's questions were linked
    number_pieces: bool = False
    # an entity linked from the words of the class the question asks for ("which building ...": P&O Building) is
    # kept; off: dropped, where the grounded planner reads that class (memq.pipeline.Pipeline.unclassed)
    class_words: bool = False
    quote_tokens: int = 30  # a longer span in double quotes, up to this many tokens, is looked up whole (0: off)
    fuzzy_cutoff: float = 85.0
    # a fuzzy match that swaps a word for another is no reading: a content word of the span and one of the name each
    # within this ratio of no word of the other ("scream 3" / "scream 2"; memq.link.linker.swaps_a_word; 0: off).
    # 70 chosen on CWQ dev's fuzzy links (60 / 70 / 80: 7 / 17 / 22 wrong ones dropped, 0 / 2 / 6 gold ones)
    fuzzy_words: float = 70.0
    candidates: int = 5  # entities considered per name (the most popular ones)
    partial_match: float = 0.7  # match of a span that is part of a name: this + the rest x the share covered
    # a span that starts or ends with a function word ("unit of", "the si") reads exact names only, no name it is a
    # part of ("Astronomical Unit of Mass"): the span without that word reads those. Chosen on dev (linking
    # precision: WebQSP 0.9084 -> 0.9108, CWQ 0.6248 -> 0.6316, GrailQA's tuning part 0.4708 -> 0.4783; recall the
    # same or up; False: as before)
    content_edges: bool = True
    # a span with a number of 1 to 99 after a word is looked up with it as a Roman numeral too ("world war 2": World War
    # II; memq.link.context.roman_key), and a word of initials and a number reads the name they are of ("wwii", "ww2";
    # memq.link.context.numbered_initials). False: as before
    numerals: bool = True
    # initials written with full stops are also read joined ("u.s." as "us": the United States, a learnt alias), a
    # word written with "&" is one word ("at&t": AT&T, not two function words), and "&" between words also reads
    # "and" ("tom & jerry": Tom and Jerry), and a lower-case "us" that is a verb's object is no mention ("can you tell
    # us who ...?"); memq.link.context.spelling. False: as before
    spellings: bool = True
    fuzzy_match: float = 0.95  # a fuzzy match's ratio / 100 is scaled by this
    base_match: float = 0.85  # the match of a name an adjective is formed from ("egyptian": Egypt; 0: off)
    demonym_match: float = 0.85  # the country a demonym names ("italians", "greek people": memq.link.demonyms; 0: off)
    title_match: float = 0.9  # x the match of the rest of a span that starts with a title ("st augustine"; 0: off)
    # a span that starts with a title and is an exact name reads that name first: its other readings (the title's
    # rest: "miss america", the United States of America) score just below it before the fit (False: as before)
    title_exact_first: bool = True
    # a one-word span that reads a language and its country ("german"): + this to the language where the question
    # asks for a country, to the country where it asks for a language (memq.link.demonyms.asked_other; 0: off).
    # 0.6 from CWQ dev: the country led the language by 0.58 at most where the language was the gold entity
    asked_other: float = 0.6
    spoken: bool = True  # and a one-word span said to be spoken ("speak turkish", "turkish speaking") the language
    # a question asking what someone speaks in any words asks for a language ("what do portuguese people speak?"), and
    # a singular demonym naming who speaks in a question asking for a language reads its country ("what language do
    # british speak?"; memq.link.demonyms.speakers). False: as before
    speech_asked: bool = True
    # unread_weight off a reading not its span's exact name inside a name the question writes with capitals that
    # nothing reads whole ("peter" of "Peter Minuit"; memq.link.capitals.unread_names; 0: off). 0.5 from CWQ dev
    unread_weight: float = 0.5
    # a learnt alias (memq.link.mentions.learnt_aliases: "the us", "king tut"): a reading at this match (0: off); of a
    # span that is an exact name in the index, only with alias_floor training questions for it (1: with any)
    alias_match: float = 0.9
    alias_floor: int = 2
    popularity_weight: float = 0.8
    mention_weight: float = 2.0  # x min(0, keyphraseness - 0.5): spans that seldom named a gold entity in training
    # a span of a training question only inside a longer one naming a gold entity ("york" of "new york") is no
    # occurrence of its own to the mention prior (memq.link.mentions.inside_mentions; False: as before). On held-out
    # WebQSP dev linking precision 0.921 -> 0.941 at the same recall, CWQ dev 0.694 -> 0.742 (docs/linking.md)
    mentions_apart: bool = True
    # x (commonness - the best commonness of the span's entities): of the training questions where the span named a
    # gold entity, the share that named this one ("sony": Sony Corporation, not Sony BMG; Linker.commonness). 0.5
    # chosen on WebQSP dev (end to end 18 of 321 changed, 4 up, 1 down; 1.0 tied; 0: off)
    commonness_weight: float = 0.5
    # a reading that is not its span's exact name loses generic_weight where the span is a common noun to the training
    # questions: in generic_seen of them or more, with a keyphraseness below generic_keyphraseness, and seldom the span
    # that named a gold entity best ("time zone" of "where is the time zone in kentucky?": Eastern Time Zone; "city":
    # New York City; memq.link.context.generic_span; 0: off). 1.0 from WebQSP and CWQ dev (docs/linking.md)
    generic_weight: float = 1.0
    generic_seen: int = 20
    generic_keyphraseness: float = 0.3
    # ... and the span named an entity best in at most this share of them (0: never). 0.1 from CWQ dev's linking
    # ("language" named an entity best in 75 of its 1,437 questions; WebQSP dev's links stay the same)
    generic_named: float = 0.1
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
    # the names beside the first entity (a Linker given a MemoryFit): the entities one CVT joins with it, read from
    # the KG (up to beside_limit, for a first entity of at most beside_degree edges), are all joined without asking
    # pair by pair; a span that named no entity in training also reads those of them it names past its `candidates`
    # most popular readings, and its joined readings come first ("sam" of "who plays sam in anger management?":
    # Sam Goodson, a character of the show, not the more popular Sam Shepard). Linker.joined_with
    beside: bool = True
    beside_limit: int = 2000
    beside_degree: int = 400
    # memq.link.context: + place_weight for a place inside the region the next span names ("fresno texas"), among a
    # span's place_candidates best readings; - nested_weight for a reading not its span's exact name inside a longer
    # span that is one ("america" of "latin america"), - nested_exact_weight for one that is ("africa"). 0: off
    place_weight: float = 0.5
    place_candidates: int = 4
    place_readings: int = 1  # of them with the span's exact name, at least (2: two places of one name only)
    # a US state's postal code after a place reads as that state for the place beside it ("san jose ca": San Jose,
    # California), where it ends the question but for function words (memq.link.context.state_code)
    state_codes: bool = True
    nested_weight: float = 0.3
    nested_exact_weight: float = 0.5
    # a reading that is not its span's exact name gains this where its name holds the one or two words right beside its
    # span ("john" of "john nash": John Forbes Nash, Jr. before Steve Nash), unless a longer span reads it too
    # (memq.link.context.neighbours; 0: off). 0.3 from CWQ dev (0.5 the same)
    neighbour_weight: float = 0.3
    # the region span that placed a place ("paris france": France) becomes a second reading of its own (optional, left
    # out of the prompt); of the 37 WebQSP train questions where the linker reads a place so, none has the region among
    # its gold topic entities (docs/linking.md)
    regions_apart: bool = True
    # ... and so does a linked region the KG puts a place linked right beside it in, before it or after it ("texas
    # houston", "newark california": where the place had one reading, placed() asked nothing); of 44 such pairs the
    # linker reads in WebQSP train, the region is a gold topic entity in none, the place in 43
    # (benchmarks/regions_train.py; context.regions_apart; False: the regions that placed a place alone)
    regions_beside: bool = True
    of_parts: bool = True  # the place and the title of a chosen "title of place" as second readings (titles.of_parts)
    # ... and with both, they are read in its place (named in the prompt), the name a second reading (parts_first)
    parts_first: bool = True
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
    # 9 of all 321, 3 up, 0 down (docs/linking.md): on. cue_count 2 (a later session; 3 before): on all of WebQSP
    # dev 6 questions changed, 2 up, 0 down ("who did george lucas get engaged to?": Engaged to)
    cue_share: float = 0.6
    cue_count: int = 2
    # the share a cue needs where it asks for the class the entity names ("what continent": Continent, which WebQSP
    # lists with a third of such questions; memq.link.constraints.names_asked). 0: cue_share. On WebQSP dev 0.15
    # changed 20 questions, 7 up, 3 down (docs/linking.md); 0.3 leaves out "what country" and "what city"
    asked_share: float = 0.15
    # how many linked entities (best first, second readings aside) the planner's prompt names; the optional ones
    # after them are left out of it, as second readings are (a grounded plan may still start there). -1: all
    prompted: int = -1
    # a suggested constraint entity that the planner's prompt names and the plan does not is left out of the prompt
    # and the question planned again (memq.link.constraints.unused_suggestions): its name changed the plan, and no
    # step of it. On held-out WebQSP dev 28 questions changed, 4 up, 2 down, F1 0.7875 -> 0.7935 (docs/linking.md)
    replan_unused: bool = True
    # a linked entity that the memory's training questions list after another more often than first goes behind the
    # others in the planner's prompt, which starts from the first (memq.link.order). Where the gold first entity and
    # another were linked, it comes first in 642 of 793 CWQ dev questions (502 by score) and 33 of 38 WebQSP dev
    # questions (33 by score; docs/linking.md). False: the linker's order, best first
    listed_order: bool = True

    def __post_init__(self) -> None:
        if self.max_tokens < 1 or self.candidates < 1 or self.max_entities < 1 or self.fit_candidates < 1 \
                or self.fit_recall < 1 or self.alias_floor < 1:
            raise ValueError(f"max_tokens, candidates, max_entities, fit_candidates, fit_recall and alias_floor must "
                             f"be >= 1, got {self.max_tokens}, {self.candidates}, {self.max_entities}, "
                             f"{self.fit_candidates}, {self.fit_recall}, {self.alias_floor}")
        if not 0 <= self.cue_share <= 1 or not 0 <= self.asked_share <= 1 or self.cue_count < 1:
            raise ValueError(f"cue_share must be in [0, 1] (asked_share too) and cue_count >= 1, got "
                             f"{self.cue_share}, {self.asked_share}, {self.cue_count}")
        if not 0 <= self.required_support <= 1:
            raise ValueError(f"required_support is a share of the vote in [0, 1] (0: off), got {self.required_support}")
        if self.required < -1 or self.prompted < -1:
            raise ValueError(f"required and prompted must be >= 0, or -1 for every linked entity, got "
                             f"{self.required}, {self.prompted}")
        if self.generic_weight < 0 or self.generic_seen < 1 or not 0 <= self.generic_keyphraseness <= 1 \
                or not 0 <= self.generic_named <= 1:
            raise ValueError(f"generic_weight must be >= 0, generic_seen >= 1, generic_keyphraseness and generic_named "
                             f"in [0, 1], got {self.generic_weight}, {self.generic_seen}, "
                             f"{self.generic_keyphraseness}, {self.generic_named}")
        if self.fit_weight < 0 or self.commonness_weight < 0:
            raise ValueError(f"fit_weight and commonness_weight must be >= 0, got {self.fit_weight}, "
                             f"{self.commonness_weight}")
        if min(self.place_weight, self.nested_weight, self.nested_exact_weight, self.neighbour_weight) < 0 \
                or self.place_candidates < 2 or self.place_readings < 1:
            raise ValueError(f"place_weight, nested_weight, nested_exact_weight and neighbour_weight must be >= 0, "
                             f"place_candidates >= 2 and place_readings >= 1, got {self.place_weight}, "
                             f"{self.nested_weight}, {self.nested_exact_weight}, {self.neighbour_weight}, "
                             f"{self.place_candidates}, {self.place_readings}")
        if self.coherence_weight < 0 or self.coherence_entities < 2 or self.coherence_max_names < 0:
            raise ValueError(f"coherence_weight and coherence_max_names must be >= 0 and coherence_entities >= 2, "
                             f"got {self.coherence_weight}, {self.coherence_max_names}, {self.coherence_entities}")
        if self.beside_limit < 1 or self.beside_degree < 0:
            raise ValueError(f"beside_limit must be >= 1 and beside_degree >= 0, got {self.beside_limit}, "
                             f"{self.beside_degree}")
        if self.asked_other < 0 or self.unread_weight < 0:
            raise ValueError(f"asked_other and unread_weight must be >= 0 (0: off), got {self.asked_other}, "
                             f"{self.unread_weight}")
        if not 0 <= self.fuzzy_words <= 100:
            raise ValueError(f"fuzzy_words is a rapidfuzz ratio in 0-100 (0: off), got {self.fuzzy_words}")
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
