"""From what a caller gave to the topic entities the pipeline answers about.

* nothing (``None``): the question's entities are linked (:meth:`memq.link.linker.Linker.link`);
* names alone (``["Jamaica"]``): each name resolves to its most popular entity of that name; a name that matches
  nothing is dropped with a traced fallback;
* ids with names (``{"m.03_r3": "Jamaica"}``): taken as they are (the pipeline drops an id the KG does not hold).

Every link is written into ``Trace.links`` with its score and runners-up. :class:`~memq.errors.LinkingError` is
raised when no entity is left, naming what was tried.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import EntityIndexError, LinkingError
from ..types import Trace
from .index import MANIFEST, EntityIndex, build_index, kg_source, normalize
from .linker import Link, Linker
from .mentions import MENTION_DATASETS, MENTIONS_RULE, add_training_mentions, link_entries

log = logging.getLogger(__name__)

MAX_NAME_CHARS = 200
MAX_QUESTION_CHARS = 2000
NAME_FORBIDDEN = "\n\r\t\x00{}<>\"\\"
NAME_FORBIDDEN_GOLD = "\n\r\t\x00{}<>\\"  # gold names may hold a double quote


def needs_linking(entities: object) -> bool:
    """True for ``None`` and for a non-empty list of names (str); False for ids with names."""
    if entities is None:
        return True
    return isinstance(entities, (list, tuple)) and bool(entities) and all(isinstance(e, str) for e in entities)


def check_names(names: list | tuple) -> list[str]:
    """Names given alone, checked as :func:`validate` checks entity names; ValueError naming one."""
    out = []
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"an entity name must be a non-empty string, got {name!r}")
        if any(ch in name for ch in NAME_FORBIDDEN) or len(name) > MAX_NAME_CHARS:
            raise ValueError(f"entity name {name!r} contains characters a name cannot have or is longer than "
                             f"{MAX_NAME_CHARS} characters")
        out.append(name.strip())
    return out


def check_question(question: object) -> str:
    """The question, stripped; raises ValueError naming a bad one (not a string, empty, over 2000 characters)."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question must be a non-empty string, got {question!r}")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(f"question is {len(question)} characters long; at most {MAX_QUESTION_CHARS} are accepted")
    return question.strip()


def validate(question: object, entities: object, *, allow_empty: bool = False,
             strict_names: bool = True) -> tuple[str, dict[str, str]]:
    """Check the API inputs; raise ValueError naming the bad value.

    Ids must be Freebase ids (they reach SPARQL as IRIs, :func:`memq.sparql.safety.entity_iri`). Names never reach
    SPARQL: the reconstruction matches them in Python and writes a check's value that is no given entity as an
    escaped literal. ``strict_names`` (a public request) keeps names short and free of ``" { } < > \\``;
    without it (the gold datasets: GrailQA's quotations are entities whose names are the quote, one artist is
    ``Paul "Earthquake" Pena``) a name may be up to 2000 characters and hold ``"``. ``allow_empty``:
    no entities at all is accepted (a plan that starts from a class needs none; the pipeline decides)."""
    from ..sparql.safety import check_entity_id

    question = check_question(question)
    if isinstance(entities, dict):
        pairs = list(entities.items())
    elif isinstance(entities, (list, tuple)):
        pairs = []
        for e in entities:
            if not (isinstance(e, (list, tuple)) and len(e) == 2):
                raise ValueError(f"entities must be (id, name) pairs, got {e!r}")
            pairs.append((e[0], e[1]))
    else:
        raise ValueError(f"entities must be a dict of id -> name or a list of (id, name), got {entities!r}")
    if not pairs and not allow_empty:
        raise ValueError("at least one topic entity (id -> name) is needed")
    forbidden, longest = (NAME_FORBIDDEN, MAX_NAME_CHARS) if strict_names else (NAME_FORBIDDEN_GOLD,
                                                                                       MAX_QUESTION_CHARS)
    out: dict[str, str] = {}
    for mid, name in pairs:
        check_entity_id(mid)
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"entity {mid!r} needs a non-empty name, got {name!r}")
        if any(ch in name for ch in forbidden) or len(name) > longest:
            raise ValueError(f"entity name {name!r} of {mid!r} contains characters a name cannot have or is longer "
                             f"than {longest} characters")
        out[mid] = name.strip()
    return question, out


def open_linker(config, kg=None, bank=None) -> Linker:
    """The linker of a pipeline :class:`~memq.pipeline.Config`: ``config.entity_index`` if it names one, else the
    index of the embedded KG file, built once per file content in the memq cache.

    With ``config.link.fit_weight`` > 0 it ranks with the fit through the memory (:mod:`memq.link.fit`) on ``kg``
    and ``bank`` (objects, or zero-argument callables that give them; a pipeline passes its own), else on the KG and
    the memory bank ``config`` names, loaded on the first question linked. When they cannot be loaded, linking
    goes on without the fit (logged)."""
    if config.entity_index:
        index = EntityIndex.load(config.entity_index)
    elif config.endpoint or Path(config.kg_file).is_dir():
        where = config.endpoint or Path(config.kg_file).name
        raise LinkingError(f"entity linking on {where} needs an entity index: build one with `memq link build "
                           f"--endpoint URL --out DIR` (or --kg FILE) and pass it as --entity-index DIR "
                           "(Config.entity_index), or give the entities as ids with names")
    else:
        index = cached_index(config.kg_file)
    fit = None
    if config.link.fit_weight > 0:
        from ..kg import open_kg
        from .fit import MemoryFit

        fit = MemoryFit(kg if kg is not None else lambda: open_kg(config.kg_file, config.endpoint),
                        bank if bank is not None else lambda: config_bank(config), timeout=config.timeout)
    return Linker(index, config.link, fit)


def config_bank(config):
    """The memory bank a pipeline :class:`~memq.pipeline.Config` names, with the banks it includes."""
    from ..memory.bank import MemoryBank

    return MemoryBank.load(config.memory)


def _shown(link: Link, how: str) -> str:
    joined = f", one CVT joins it with {link.coherent}" if link.coherent else ""
    joined += f", the KG puts it in {link.within_name} ({link.within}), named beside it" if link.within else ""
    joined += f", read in place of {link.of_name}, whose holder the question asks for" if link.of_name else ""
    return f"{link.name} ({link.id}) from {how} (score {link.score:.2f}, match {link.match:.2f}{joined})"


def unlinked(linker: Linker, question: str) -> str:
    """Why ``question`` linked nothing: no span reads an entity, or its best reading scores below the threshold."""
    found = linker.candidates(question)
    if not found:
        return "no name in the entity index matches a span of it"
    score, i, j, mid = found[0][:4]
    span = " ".join(normalize(question).split()[i:j])
    return (f"its best reading, {linker.index.name(mid) or mid} ({mid}) from {span!r}, scores {score:.2f} where the "
            f"linker's threshold is {linker.config.threshold:g}")


def resolve(linker: Linker, question: str, entities: list[str] | None, trace: Trace) -> dict[str, str]:
    """Topic entities (id -> name) for ``question`` from nothing or names alone; links and drops traced."""
    if entities is None:
        links = linker.link(question)
        if not links:
            raise LinkingError(f"no topic entity found in the question {question[:80]!r}: {unlinked(linker, question)}"
                               "; give the entities (ids with names, or names)")
        entries = link_entries(linker, links)
        trace.links.extend(entries)
        trace.fallbacks.append("entity linking: no entities given; linked " + "; ".join(
            _shown(link, repr(link.mention) + (", a learnt alias" if entry.get("learnt_alias") else "")
                   + (", a demonym" if entry.get("demonym") else ""))
            for link, entry in zip(links, entries, strict=True)))
        return {link.id: link.name for link in links}
    out: dict[str, str] = {}
    missing = []
    for name in check_names(entities):
        link = linker.resolve_name(name)
        if link is None:
            missing.append(name)
            trace.fallbacks.append(f"entity linking: the name {name!r} matches no entity of the index; dropped")
            continue
        trace.links.append({**link.to_json(), "given": name})
        if link.match < 1.0:
            trace.fallbacks.append(f"entity linking: the name {name!r} has no exact match; "
                                   + _shown(link, "a fuzzy or partial match"))
        out.setdefault(link.id, name)
    if not out:
        raise LinkingError(f"no entity of the index is named {', '.join(map(repr, missing))}; give ids with names "
                           "or other names")
    return out


def known_entities(kg, entities: dict[str, str], trace: Trace, timeout: float | None = None) -> dict[str, str]:
    """The entities ``kg`` holds a triple about; an unknown one is dropped with a traced fallback, and
    :class:`~memq.errors.LinkingError` (naming the ids) is raised when none is left. Ids reach the KG validated and
    as IRIs only (:func:`memq.sparql.safety.entity_iri`)."""
    from ..sparql.safety import entity_iri

    unknown = []
    for mid in entities:
        rows = kg.select(f"SELECT ?p WHERE {{ {entity_iri(mid)} ?p ?o }} LIMIT 1", timeout=timeout)
        if not rows:
            rows = kg.select(f"SELECT ?p WHERE {{ ?s ?p {entity_iri(mid)} }} LIMIT 1", timeout=timeout)
        if not rows:
            unknown.append(mid)
    if len(unknown) == len(entities):
        ids = ", ".join(map(repr, unknown))
        raise LinkingError(f"unknown entity id{'s' if len(unknown) > 1 else ''} {ids}: the knowledge graph has no "
                           "triple about it")
    for mid in unknown:
        trace.fallbacks.append(f"unknown entity id {mid!r} ({entities[mid]!r}): the knowledge graph has no triple "
                               "about it; dropped, the question is answered about the other entities")
    return {mid: name for mid, name in entities.items() if mid not in unknown}


def cached_index(kg_file: str | Path, cache_dir: str | Path | None = None) -> EntityIndex:
    """The index of the RDF file ``kg_file``, built once per file content under the memq cache
    (``entity_index/<file stem>-<sha256 prefix>``) from the file's own Oxigraph store, like that store."""
    from memq.kg.oxigraph import default_cache_dir

    path = Path(kg_file)
    if not path.is_file():
        raise EntityIndexError(f"knowledge graph file {path.name} does not exist, so it has no entity index")
    source = kg_source(path, None)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = root / "entity_index" / f"{path.name.split('.')[0]}-{source['kg_sha256'][:16]}"
    if not (target / MANIFEST).is_file():
        log.warning("first use of entity linking on %s: building its entity index in the memq cache "
                    "(once per file content, about a minute for the benchmark KG)", path.name)
        from memq.kg.oxigraph import OxigraphStore

        index = build_index(OxigraphStore.cached(path), source=source)
        add_training_mentions(index)
        index.save(target)
    index = EntityIndex.load(target)
    if index.info.get("source", {}).get("kg_sha256") != source["kg_sha256"]:
        raise EntityIndexError(f"{target / MANIFEST}: built from another KG than {path.name}")
    counted = index.info.get("mentions_from") or ""
    if not counted.endswith(f"; {MENTIONS_RULE}") or any(f"{dataset} train (" not in counted
                                                          for dataset in MENTION_DATASETS):
        log.warning("the cached entity index of %s counted its mention prior on %s; counting it again on the "
                    "training questions of %s", path.name, counted or "nothing", ", ".join(MENTION_DATASETS))
        add_training_mentions(index)
        index.info["build_s"] = index.info["manifest"].get("build_s")
        index.save(target)
    return index
