"""The mention prior: how the training questions' spans named their gold topic entities.

A span's keyphraseness (how often it named a gold topic entity where it occurred: "national anthem" seldom does)
and its commonness (which entity it named: "sony" Sony Corporation, not Sony BMG) are counted once per entity
index on the bundled training questions and kept in the index (:class:`~memq.link.index.MentionCounts`,
``mentions.tsv``); :class:`~memq.link.linker.Linker` reads them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import replace

from .demonyms import country_ids
from .index import EntityIndex, MentionCounts, normalize
from .linker import Linker
from .settings import LinkConfig


def mention_counts(index: EntityIndex, questions: Iterable[tuple], config: LinkConfig | None = None
                   ) -> MentionCounts:
    """Keyphraseness counts from training questions ``(text, ids of the topic entities it names[, every gold id[,
    annotated (span, id) pairs]])``: for each span with candidates, the questions it occurs in and those where one
    of its candidates is a named gold entity, and (``named``) how often each such entity was the one named (the
    span's commonness). With every gold id (``training_mentions(exact=True)``, tried and off), one a span names
    exactly (name or alias) is named too: "clippers", Los Angeles Clippers, a constraint of WebQSP's "... play for
    the clippers?". An annotated span whose readings in the index miss its entity (:func:`learnt_aliases`: "the
    us", the United States) first makes the entity one of its readings, so that it is counted as the others."""
    # the spans are read without demonyms (memq.link.demonyms): the counts, and so the linker with demonyms off, are
    # those of the code before them
    linker = Linker(EntityIndex([], [], [], []), replace(config or LinkConfig(), demonym_match=0.0))
    linker.index = copy.copy(index)
    questions = list(questions)
    aliases = learnt_aliases(linker, questions) if linker.config.alias_match > 0 else {}
    linker.index.mentions = MentionCounts({}, aliases)  # the spans read the learnt aliases, never earlier counts
    counts: dict[str, list[int]] = {}
    named: dict[str, dict[str, int]] = {}
    for text, gold, *more in questions:
        spans, exact = list(linker.spans(text)), more[0] if more else ()
        gold = set(gold) | {mid for *_, matches in spans for mid, match in matches if match == 1.0 and mid in exact}
        seen: dict[str, bool] = {}
        best: dict[str, tuple[float, int, str, int]] = {}  # gold id -> (match, length, span, start) of its span
        for i, j, key, matches in spans:
            seen[key] = seen.get(key, False) or any(mid in gold for mid, _ in matches)
            for mid, match in matches:
                if mid in gold and (match, j - i) > best.get(mid, (-1.0, 0, "", 0))[:2]:
                    best[mid] = (match, j - i, key, i)
        if linker.config.mentions_apart:  # "york" of "new york" is no occurrence of its own
            for key in inside_mentions(spans, best.values()):
                del seen[key]
        for key, hit in seen.items():
            c = counts.setdefault(key, [0, 0])
            c[0] += 1
            c[1] += int(hit)
        # for commonness, an entity is named by the span that matches it best, then the longest, not by a part of
        # it ("martin luther" of "martin luther king" did not name King, "ohio" of "... in ohio ... lake waynoka?"
        # did not name Lake Waynoka, Ohio)
        for mid, (_, _, key, _) in best.items():
            ids = named.setdefault(key, {})
            ids[mid] = ids.get(mid, 0) + 1
    return MentionCounts({k: (a, b) for k, (a, b) in counts.items()}, named)


def inside_mentions(spans: list, mentions: Iterable[tuple]) -> set[str]:
    """The spans of a training question (``Linker.spans``) that occur only inside a longer span naming one of its
    gold entities (``mentions``: (match, length, span, start) each; "york" where "new york" named New York City):
    part of another mention, not a mention of their own, so no occurrence to the mention prior. Counted, such a
    part was a mention that named the gold entity whenever the entity was one of its readings ("york" 92 of 124
    training questions, 2 of 20 once left out), and a mention that named nothing otherwise."""
    named = {key for _, _, key, _ in mentions}
    ranges = [(start, start + length) for _, length, _, start in mentions]
    out: dict[str, bool] = {}
    for i, j, key, _ in spans:
        if key not in named:
            out[key] = out.get(key, True) and any(a <= i and j <= b and j - i < b - a for a, b in ranges)
    return {key for key, inside in out.items() if inside}


def learnt_aliases(linker: Linker, questions: list[tuple]) -> dict[str, dict[str, int]]:
    """Span -> {entity id: questions} of the annotated spans of ``questions`` (their fourth element: (span, id)
    pairs, WebQSP's ``PotentialTopicEntityMention``) whose own readings in the index do not hold their named entity:
    "us" of "... does the us have?" (United States of America), "king tut" (Tutankhamun). A span that is an exact
    name in the index needs ``LinkConfig.alias_floor`` (2) questions for another entity: one annotation outvoted the
    name through commonness ("indiana jones", the franchise's name, annotated once as Raiders of the Lost Ark in
    WebQSP train less dev). The linker reads them as readings of the span at ``LinkConfig.alias_match``."""
    plain = Linker(linker.index, replace(linker.config, alias_match=0.0))
    out: dict[str, dict[str, int]] = {}
    for _, gold, *more in questions:
        for span, mid in more[1] if len(more) > 1 else ():
            key = normalize(span)
            if mid in gold and key and mid not in index_readings(plain, key):
                ids = out.setdefault(key, {})
                ids[mid] = ids.get(mid, 0) + 1
    for key in [k for k in out if linker.index.exact(k)]:
        out[key] = {mid: n for mid, n in out[key].items() if n >= linker.config.alias_floor}
        if not out[key]:
            del out[key]
    return out


def index_readings(linker: Linker, key: str) -> set[str]:
    """The entities the span ``key`` (normalised) reads alone in the index, as ``linker`` reads spans (exact, partial,
    fuzzy, base and title matches), without learnt aliases."""
    if linker.config.alias_match > 0:
        linker = Linker(linker.index, replace(linker.config, alias_match=0.0))
    whole = (0, len(key.split()))
    return {mid for i, j, _, matches in linker.spans(key) if (i, j) == whole for mid, _ in matches}


def learnt_alias(linker: Linker, mention: str, mid: str) -> bool:
    """Whether ``mid`` is a reading of the span ``mention`` only as a learnt alias (:func:`learnt_aliases`): the span
    alone, read without aliases, does not find it. A stand-in linker (``link`` alone, no index or settings) has none."""
    if getattr(linker, "index", None) is None or getattr(linker, "config", None) is None:
        return False
    named = getattr(linker.index.mentions, "named", {}).get(mention, {})
    return linker.config.alias_match > 0 and mid in named and mid not in index_readings(linker, mention)


def demonym_reading(linker: Linker, mention: str, mid: str) -> bool:
    """Whether ``mid`` is a reading of the span ``mention`` only as a demonym (:mod:`memq.link.demonyms`: Italy of
    "italians"): a country the span is a demonym of, which the span alone, read without demonyms, does not find."""
    if getattr(linker, "index", None) is None or getattr(linker, "config", None) is None \
            or linker.config.demonym_match <= 0:
        return False
    if mid not in country_ids(linker.index, mention):
        return False
    return mid not in index_readings(Linker(linker.index, replace(linker.config, demonym_match=0.0)), mention)


def link_entries(linker: Linker, links) -> list[dict]:
    """Each link as JSON (``Link.to_json``), with ``"learnt_alias": true`` where it was read through a learnt alias
    (:func:`learnt_alias`) and ``"demonym": true`` where through a demonym (:func:`demonym_reading`): what ``memq
    link show --json`` prints and an answer's ``trace.links`` keeps."""
    return [{**link.to_json(), **({"learnt_alias": True} if learnt_alias(linker, link.mention, link.id) else {}),
             **({"demonym": True} if demonym_reading(linker, link.mention, link.id) else {})} for link in links]


# the training questions the mention prior is counted on: WebQSP's, CWQ's, whose longer questions name many more
# classes and roles ("national anthem", "sports team") that seldom name a topic entity, and GrailQA's, whose
# questions name classes, measures and numbers ("rocket engines", "measurement system", "weight") more often still
MENTION_DATASETS = ("webqsp", "cwq", "grailqa")
# the datasets whose dev questions are carved from train (memq.plan.data.split_of): ``hold_out_dev`` leaves those out
# of their counts; GrailQA's dev set is a file of its own, so its train questions all count
HELD_OUT = ("webqsp", "cwq")


def training_mentions(index: EntityIndex, datasets: Iterable[str] = MENTION_DATASETS, hold_out_dev: bool = False,
                      exact: bool = False, config: LinkConfig | None = None) -> tuple[MentionCounts, str]:
    """Keyphraseness counts (:func:`mention_counts`) over the bundled training questions of ``datasets`` (train
    split only; the test split is never read) and the topic entities they name (memq.link.gold.prior_entities),
    with a line saying what they were counted on. CWQ's questions built from WebQSP test questions (``WebQTest-N_``)
    are left out, as the planner and the memory do. ``hold_out_dev``: without the dev questions carved from train
    (memq.plan.data.split_of). ``exact``: gold entities a span names exactly count as named too (off: linking.md).
    ``config``: the linker settings the spans are read with (the defaults, as the cached index counts)."""
    from memq import datasets as bundled
    from memq.link.gold import annotated_mentions, gold_entities, prior_entities
    from memq.plan.data import WEBQSP_TEST_PREFIX, split_of

    pairs, parts = [], []
    for dataset in datasets:
        train = [q for q in bundled.load(dataset, "train") if not q.id.startswith(WEBQSP_TEST_PREFIX)
                 and (not hold_out_dev or dataset not in HELD_OUT or split_of(q.id) == "train")]
        pairs += [(q.question, prior_entities(q), gold_entities(q)[1] if exact else set(), annotated_mentions(q))
                  for q in train]
        parts.append(f"{dataset} train{' less dev' if hold_out_dev and dataset in HELD_OUT else ''} "
                     f"({len(train)} questions)")
    return mention_counts(index, pairs, config), f"{', '.join(parts)}; {MENTIONS_RULE}{', exact' if exact else ''}"


def own_mentions(linker: Linker, datasets: Iterable[str] = MENTION_DATASETS, *, hold_out_dev: bool = False,
                 exact: bool = False) -> None:
    """Give ``linker`` its own copy of its entity index, with the mention prior counted again by
    :func:`training_mentions` (its options, and the linker's settings); the index other linkers share, the cached
    one, is left as it is."""
    index = copy.copy(linker.index)
    index.info = dict(index.info)
    index.mentions, index.info["mentions_from"] = training_mentions(index, datasets, hold_out_dev=hold_out_dev,
                                                                     exact=exact, config=linker.config)
    linker.index = index


def add_training_mentions(index: EntityIndex, datasets: Iterable[str] = MENTION_DATASETS) -> None:
    """Fill ``index.mentions`` from the bundled training questions of ``datasets`` (:func:`training_mentions`)."""
    index.mentions, index.info["mentions_from"] = training_mentions(index, datasets)


def counting_code() -> str:
    """A digest of the code the counts depend on: the spans the linker looks up (and the settings it looks them up
    with), the keys of the index it looks them up in, how a training question's gold entities are named, and the
    counting itself. Part of :data:`MENTIONS_RULE`, so that a cached index counted by other code counts again,
    whether or not the rule's words were changed with it (a later session's test run once read counts an earlier
    form of the rule had saved)."""
    import hashlib
    import inspect

    from . import context, gold, index

    parts = (mention_counts, inside_mentions, learnt_aliases, index_readings, training_mentions, Linker.spans,
             Linker._names, Linker._add_fuzzy, context.quoted, context.roman_key, context.numbered_initials,
             context.spelling, context.Spelling, context.pronoun_us, index.EntityIndex.__init__, gold.prior_entities,
             gold.gold_entities, gold.annotated_mentions, index.normalize)
    try:
        text = "".join(inspect.getsource(part) for part in parts) + repr(LinkConfig())
    except (OSError, TypeError):  # no source to read (a frozen build): the rule's words alone
        return "code not read"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# how the counts are made, at the end of the index's mentions_from: a cached index counted otherwise counts again
MENTIONS_RULE = ("named as memq.link.gold.prior_entities has them, titles dropped, quotations whole, "
                 f"each entity kept at its best-matching span; counting code {counting_code()}")
