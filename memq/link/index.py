"""EntityIndex: the names a knowledge graph gives its entities, normalised, with a popularity prior.

Built once per KG through the :class:`~memq.kg.base.KnowledgeGraph` interface (SELECT queries only), so the
embedded Oxigraph store and a SPARQL endpoint (Virtuoso over full Freebase) build it the same way:

* names: every ``type.object.name`` and ``common.topic.alias`` literal (English or untagged) of a Freebase id;
  subjects that are not Freebase ids (the benchmark KG's synthetic distractors) are left out;
* popularity: the entity's degree (triples with it as subject plus triples with it as object).

On disk an index is a directory (format version 1), written like a memory bank::

    manifest.json   format_version, memq_version, created, source (the KG), counts, files {name: sha256}
    entities.tsv    one entity per line: id, degree, name, aliases (joined by U+001F)
    mentions.tsv    the mention prior (memq.link.mentions), a span per line: the span, the training questions it
                    occurs in, those where it names a gold topic entity, and the entities it named (id:count,...)

:meth:`EntityIndex.load` checks the manifest and the sha256 of ``entities.tsv`` and raises
:class:`~memq.errors.MemQError` naming the file that failed. Lookups: :meth:`EntityIndex.exact` (a normalised
name) and :meth:`EntityIndex.fuzzy` (rapidfuzz ``ratio`` within the names that share the first three
characters).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from memq.errors import EntityIndexError
from memq.files import read_manifest, sha256_file, write_atomic
from memq.kg.base import NAME_PREDICATE
from memq.sparql.model import FB, Iri, Literal

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ENTITIES = "entities.tsv"
MENTIONS = "mentions.tsv"
ALIAS_PREDICATE = FB + "common.topic.alias"
_SEP = "\x1f"
_ID = re.compile(r"^[mg]\.[0-9a-z_]+$")
_APOSTROPHE_S = re.compile(r"['\u2019][sS]\b")
_NON_WORD = re.compile(r"[^0-9a-z]+")
BLOCK = 3  # fuzzy lookups compare names that share this many leading characters
# function words and question words: a span made only of these is not a mention (memq.link.linker)
STOP_WORDS = frozenset("""
a about after all also am an and any are as at be been before being between both but by can could did do does
doing done during each for from had has have having he her hers him his how i if in into is it its just me more
most my no nor not now of off on once only or other our out over own same she should so some such than that the
their theirs them then there these they this those through to too under until up very was we were what when where
which while who whom whose why will with would you your yours s t much many get got go goes went come came make made
mean means called call name named kind type sort year years first last new old did does whats where's who's
""".split())
# the words that end a person's name after the family name: a name's initials are read without them too
SUFFIXES = frozenset(("jr", "sr", "jnr", "snr"))
# words that alone are no partial key of a longer name
STOP_PARTS = frozenset("a an and at by de for from in is la le of on or the to with".split())
# how adjectives of places and creeds end: Egyptian, Korean, Jamaican, Chinese, Islamic, Turkish, Israeli
ADJECTIVE_ENDINGS = ("an", "ese", "ic", "ish", "i")


def fold(text: str, lower: bool = True) -> str:
    """Lower case, accents and a possessive ``'s`` dropped: :func:`normalize` before it keeps letters and digits
    alone, so that the runs of ``[0-9a-z]`` in it are ``normalize(text).split()``, with what stood between them.
    ``lower=False`` keeps the case (the capitals a question writes a name with: :mod:`memq.link.capitals`)."""
    if not text.isascii():  # most names: nothing to fold
        text = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
    return _APOSTROPHE_S.sub("", text.lower() if lower else text)


def normalize(text: str) -> str:
    """Lower case, accents and a possessive ``'s`` dropped, anything but letters and digits a single space.

    >>> normalize("Côte d'Ivoire's  capital")
    'cote d ivoire capital'
    """
    return _NON_WORD.sub(" ", fold(text)).strip()


def _clean(name: str) -> str:
    return " ".join(name.replace(_SEP, " ").split())


class MentionCounts(dict):
    """The mention prior: normalised span -> (questions of a training set it occurs in, those where it names a gold
    topic entity), and ``named``: span -> {entity id: the questions where the span named that entity}."""

    def __init__(self, counts=(), named: dict[str, dict[str, int]] | None = None) -> None:
        super().__init__(counts)
        self.named = {key: dict(ids) for key, ids in (named or {}).items()}


class EntityIndex:
    """Entity ids, their names and degrees; normalised name -> entities, most popular first."""

    def __init__(self, ids: list[str], degrees: list[int], names: list[str], aliases: list[tuple[str, ...]],
                 info: dict | None = None, mentions: dict[str, tuple[int, int]] | None = None) -> None:
        if not (len(ids) == len(degrees) == len(names) == len(aliases)):
            raise ValueError("ids, degrees, names and aliases must have one entry per entity")
        self.ids, self.degrees, self.names, self.aliases = ids, degrees, names, aliases
        self.info = dict(info or {})
        # the mention prior (MentionCounts; a plain dict of (seen, linked) works, without the entities named)
        self.mentions = MentionCounts(mentions or {}, getattr(mentions, "named", None))
        self._row = {mid: i for i, mid in enumerate(ids)}
        keyed: dict[str, list[int]] = defaultdict(list)
        for i, (name, more) in enumerate(zip(names, aliases, strict=True)):
            for key in sorted({normalize(n) for n in (name, *more)}):
                if key:
                    keyed[key].append(i)
        # most popular first; ties by id, so that the order does not depend on the hash seed
        self._by_key = {k: sorted(v, key=lambda i: (-degrees[i], ids[i])) for k, v in keyed.items()}
        # partial keys: a run of a name's words ("obama" of "barack obama", "italian" of "italian language") and
        # the initials of a name of two or more words ("nfl", "usa"), each with the share of the name it covers
        part: dict[str, dict[int, float]] = defaultdict(dict)
        for key, rows in keyed.items():
            words = key.split()
            if len(words) < 2 or len(words) > 8:
                continue
            subs = sorted({" ".join(words[a:b]) for a in range(len(words)) for b in range(a + 1, len(words) + 1)
                           if b - a < len(words)})
            letters = "".join(w[0] for w in words if w not in ("of", "the", "and", "de"))
            # "mlk": Martin Luther King, Jr. (a suffix is never one of the words left out, so it is the last letter)
            initials = {letters, letters[:-1]} if words[-1] in SUFFIXES and len(words) > 3 else {letters}
            subs += sorted(initials)
            for sub in subs:
                if sub in STOP_PARTS or len(sub) < 2:
                    continue
                cover = len(sub) / len(key) if sub not in initials else 0.5
                for i in rows:
                    if part[sub].get(i, 0.0) < cover:
                        part[sub][i] = cover
        self._partial = {k: sorted(v.items(), key=lambda t: (-degrees[t[0]], ids[t[0]])) for k, v in part.items()}
        blocks: dict[str, list[str]] = defaultdict(list)
        for key in self._by_key:
            blocks[key[:BLOCK]].append(key)
        self._blocks = dict(blocks)
        self._log_max = math.log1p(max(degrees, default=0)) or 1.0

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, mid: str) -> bool:
        return mid in self._row

    def name(self, mid: str) -> str | None:
        i = self._row.get(mid)
        return None if i is None else self.names[i]

    def degree(self, mid: str) -> int:
        i = self._row.get(mid)
        return 0 if i is None else self.degrees[i]

    def popularity(self, mid: str) -> float:
        """log(1 + degree) / log(1 + the largest degree): 0 for an entity without triples, 1 for the hub."""
        return math.log1p(self.degree(mid)) / self._log_max

    def exact(self, key: str) -> list[str]:
        """Ids whose normalised name or alias is ``key`` (already normalised), most popular first."""
        return [self.ids[i] for i in self._by_key.get(key, ())]

    def partial(self, key: str) -> list[tuple[str, float]]:
        """Ids with a name of which ``key`` is a run of words or the initials, most popular first, each with the
        share of its name that ``key`` covers (initials count as 0.5)."""
        return [(self.ids[i], cover) for i, cover in self._partial.get(key, ())]

    def fuzzy(self, key: str, cutoff: float = 85.0, limit: int = 5) -> list[tuple[str, float]]:
        """Normalised names within ``cutoff`` (rapidfuzz ``ratio``, 0-100) of ``key``, best first, with the score;
        only names sharing ``key``'s first three characters are compared (all of a full Freebase would be slow)."""
        from rapidfuzz import fuzz, process

        block = self._blocks.get(key[:BLOCK])
        if not block:
            return []
        found = process.extract(key, block, scorer=fuzz.ratio, score_cutoff=cutoff, limit=limit)
        return [(name, float(score)) for name, score, _ in found]

    def bases(self, key: str) -> list[str]:
        """The one-word names that ``key``, one word ending as an adjective of a place or a creed does
        (:data:`ADJECTIVE_ENDINGS`), may be formed from: "egyptian" -> "egypt", "portuguese" -> "portugal",
        "islamic" -> "islam", "chinese" -> "china". A name may be one when it is shorter than ``key`` and ``key``
        starts with all of it but its last three characters, and at least its first four; of those, the ones that
        share the longest start with ``key``, leaving it an ending of four letters at most, are (Australia, not
        Austria, for "australian"; nothing for "accomplish"). Fuzzy matching misses most of these, as the endings
        differ by more than a letter."""
        if " " in key or not key.endswith(ADJECTIVE_ENDINGS):
            return []
        names = [name for name in self._blocks.get(key[:BLOCK], ()) if " " not in name
                 and 4 <= len(name) < len(key) and key.startswith(name[:max(4, len(name) - 3)])]
        shared = {name: len(os.path.commonprefix((name, key))) for name in names}
        longest = max(shared.values(), default=0)
        return sorted(name for name in names if shared[name] == longest and len(key) - longest <= 4)

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        from memq.memory.bank import memq_version

        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        lines = [f"{mid}\t{deg}\t{_clean(name)}\t{_SEP.join(_clean(a) for a in more)}"
                 for mid, deg, name, more in zip(self.ids, self.degrees, self.names, self.aliases, strict=True)]
        write_atomic(out / ENTITIES, ("\n".join(lines) + "\n").encode("utf-8"))
        named = getattr(self.mentions, "named", {})
        rows = [f"{key}\t{seen}\t{linked}\t{','.join(f'{mid}:{n}' for mid, n in sorted(named.get(key, {}).items()))}"
                for key, (seen, linked) in sorted(self.mentions.items())]
        write_atomic(out / MENTIONS, ("\n".join(rows) + "\n").encode("utf-8") if rows else b"")
        manifest = {
            "format_version": FORMAT_VERSION,
            "memq_version": memq_version(),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "source": self.info.get("source", {}),
            "counts": {"entities": len(self.ids), "names": len(self._by_key),
                       "aliases": sum(len(a) for a in self.aliases), "mentions": len(self.mentions)},
            "mentions_from": self.info.get("mentions_from"),
            "build_s": self.info.get("build_s"),
            "files": {name: sha256_file(out / name) for name in (ENTITIES, MENTIONS)},
        }
        write_atomic(out / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8"))
        self.info["manifest"] = manifest
        return out

    @classmethod
    def load(cls, path: str | Path) -> EntityIndex:
        """Load and verify an index directory; raises :class:`~memq.errors.MemQError` naming what failed."""
        root = Path(path)
        manifest = read_manifest(root / MANIFEST, (ENTITIES, MENTIONS), FORMAT_VERSION, EntityIndexError,
                                 "entity index manifest (build one with `memq link build`)")
        epath = root / ENTITIES
        ids, degrees, names, aliases = [], [], [], []
        with open(epath, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 4 or not _ID.match(parts[0]) or not parts[1].isdigit():
                    raise EntityIndexError(f"{epath}: line {n}: expected id, degree, name, aliases; got {line[:80]!r}")
                ids.append(parts[0])
                degrees.append(int(parts[1]))
                names.append(parts[2])
                aliases.append(tuple(parts[3].split(_SEP)) if parts[3] else ())
        mentions, named = {}, {}
        with open(root / MENTIONS, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                parts = line.rstrip("\n").split("\t")
                named_here = [item.rpartition(":") for item in parts[3].split(",") if item] if len(parts) == 4 else []
                if len(parts) not in (3, 4) or not (parts[1].isdigit() and parts[2].isdigit()) \
                        or any(not (_ID.match(mid) and k.isdigit()) for mid, _, k in named_here):
                    raise EntityIndexError(f"{root / MENTIONS}: line {n}: expected span, seen, linked and the "
                                           f"entities named (id:count,...); got {line[:80]!r}")
                mentions[parts[0]] = (int(parts[1]), int(parts[2]))
                if named_here:
                    named[parts[0]] = {mid: int(k) for mid, _, k in named_here}
        return cls(ids, degrees, names, aliases, {"source": manifest.get("source", {}), "manifest": manifest,
                                                  "mentions_from": manifest.get("mentions_from")},
                   MentionCounts(mentions, named))


# ---------------------------------------------------------------------- build

def _rows(kg, query: str, page: int | None, timeout: float) -> Iterator[dict]:
    """The rows of ``query`` (which must have an ORDER BY when paged): in one go, or ``page`` rows at a time
    with LIMIT/OFFSET (an endpoint caps the rows of one answer: Virtuoso at 10,000 by default)."""
    if page is None:
        yield from kg.select(query, timeout=timeout)
        return
    offset = 0
    while True:
        rows = kg.select(f"{query} LIMIT {page} OFFSET {offset}", timeout=timeout)
        yield from rows
        if len(rows) < page:
            return
        offset += page


def _fb_id(term) -> str | None:
    if isinstance(term, Iri) and term.value.startswith(FB):
        local = term.value[len(FB):]
        if _ID.match(local):
            return local
    return None


def _literals(kg, predicate: str, page: int | None, timeout: float) -> Iterator[tuple[str, str]]:
    order = " ORDER BY ?s ?n" if page else ""
    query = f"SELECT ?s ?n WHERE {{ ?s <{predicate}> ?n . }}{order}"
    for row in _rows(kg, query, page, timeout):
        mid, n = _fb_id(row.get("s")), row.get("n")
        if mid and isinstance(n, Literal) and n.lang in (None, "en") and n.value.strip():
            yield mid, _clean(n.value)


def _degrees(kg, position: str, page: int | None, timeout: float) -> Iterator[tuple[str, int]]:
    pattern = "?e ?p ?o" if position == "subject" else "?s ?p ?e"
    order = " ORDER BY ?e" if page else ""
    query = (f"SELECT ?e (COUNT(*) AS ?d) WHERE {{ {pattern} . ?e <{NAME_PREDICATE}> ?name . }} "
             f"GROUP BY ?e{order}")
    for row in _rows(kg, query, page, timeout):
        mid, d = _fb_id(row.get("e")), row.get("d")
        if mid and isinstance(d, Literal) and d.value.isdigit():
            yield mid, int(d.value)


def build_index(kg, *, source: dict | None = None, page: int | None = None, timeout: float = 3600.0,
                extra_names: Iterable[tuple[str, str]] = ()) -> EntityIndex:
    """An :class:`EntityIndex` of every named Freebase id of ``kg``.

    ``page``: rows per query (LIMIT/OFFSET over an ORDER BY) for an endpoint that caps its answers; None runs
    each query once (the embedded store). ``extra_names``: (id, name) pairs of a dataset's name map, added as
    aliases of ids the KG already names (an id the KG does not hold is not linked to). ``source`` is written
    into the manifest (which KG, its sha256).
    """
    t0 = time.perf_counter()
    names: dict[str, str] = {}
    aliases: dict[str, list[str]] = defaultdict(list)
    for mid, name in _literals(kg, NAME_PREDICATE, page, timeout):
        if mid not in names:
            names[mid] = name
        elif name != names[mid] and name not in aliases[mid]:
            aliases[mid].append(name)
    log.info("entity index: %d named ids", len(names))
    for mid, name in _literals(kg, ALIAS_PREDICATE, page, timeout):
        if mid in names and name != names[mid] and name not in aliases[mid]:
            aliases[mid].append(name)
    for mid, name in extra_names:
        name = _clean(name)
        if mid in names and name and name != names[mid] and name not in aliases[mid]:
            aliases[mid].append(name)
    degree: dict[str, int] = defaultdict(int)
    for position in ("subject", "object"):
        for mid, d in _degrees(kg, position, page, timeout):
            degree[mid] += d
    ids = sorted(names)
    index = EntityIndex(ids, [degree.get(m, 0) for m in ids], [names[m] for m in ids],
                        [tuple(aliases.get(m, ())) for m in ids],
                        {"source": dict(source or {}), "build_s": round(time.perf_counter() - t0, 1)})
    log.info("entity index: %d entities in %.0f s", len(index), time.perf_counter() - t0)
    return index


def kg_source(kg_file: str | Path | None, endpoint: str | None) -> dict:
    """What the manifest records about the KG an index was built from: the file's name and sha256, or the URL."""
    if endpoint:
        return {"endpoint": endpoint}
    path = Path(kg_file)
    return {"kg": path.name, "kg_sha256": sha256_file(path)}
