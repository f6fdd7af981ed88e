"""The state of a benchmark build: gold items, the graph, and materialising one gold query.

An :class:`Item` is one gold parse. :class:`BuildState` loads the items and the
real triples, materialises an item (one solution per gold answer, see
:mod:`memq.benchmark.paths`), commits or rolls back its triples, and runs
its query on the graph.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from memq.datasets import GoldParse, GoldQuestion
from memq.errors import SparqlParseError
from memq.kg.check import answer_key, same_answers
from memq.kg.dialect import virtuoso_dates
from memq.sparql import parse_query, to_standard
from memq.sparql.model import FB, Iri, Literal, Query

from .builder_schema import load_schema, reverse_relations
from .grail import builder_form
from .graph import BenchmarkGraph, TripleKey
from .order import OrderSpec, competitor_keys, gold_key, key_better
from .paths import SYN, Binder, Binding, Want, synthetic
from .shape import Shape, analyse
from .sources import NAME, Names, is_fb15k_cvt, is_mid, load_fb15k237, load_real_triples
from .values import RelationTypes


@dataclass
class Item:
    """One gold parse being materialised.

    ``owned``: triples its gold answers need (never removed for another query);
    ``touched``: the same without the names of fresh nodes; ``added``: the
    triples it created.
    """

    key: str
    question: GoldQuestion
    parse: GoldParse
    query: Query | None = None
    shape: Shape | None = None
    sparql: str = ""
    answers: tuple[tuple[str, str], ...] = ()  # what is materialised: the gold answers, or a count's members
    function: str = "none"  # GrailQA: "count" or "superlative" when the builder's form changed the query
    gold_keys: frozenset[str] = frozenset()
    status: str = "pending"
    reason: str = ""
    mode: str = "reuse"
    tries: int = 0
    owned: set[TripleKey] = field(default_factory=set)
    touched: set[TripleKey] = field(default_factory=set)
    added: set[TripleKey] = field(default_factory=set)

    @property
    def dataset(self) -> str:
        return f"{self.question.dataset}-{self.question.split}"

    @property
    def limited_order(self) -> bool:
        return bool(self.query is not None and self.query.order_by and self.query.limit is not None)

    @property
    def topic(self) -> str | None:
        return self.parse.topic_entities[0][0] if self.parse.topic_entities else None


class BuildState:
    def __init__(self, questions: Iterable[GoldQuestion], *, progress: bool = False,
                 real_triples: bool = True, fb15k237: bool | Path = True, density: bool = True,
                 reverse: bool = False) -> None:
        self.questions = list(questions)
        self.progress = progress
        self.real_triples = real_triples
        # FB15k-237's real triples: True for data/fb15k237, a folder of the same files, or False
        self.fb15k237 = fb15k237
        self.density = density
        self.schema = load_schema()
        self.names = Names()
        self.graph = BenchmarkGraph(reverse_relations() if reverse else None)  # reverse: both directions
        self.types = RelationTypes(self.schema)
        self.binder = Binder(self.graph, self.schema, self.types, swap=self.try_swap)
        self.items: list[Item] = []
        self.by_key: dict[str, Item] = {}
        self.distractors: dict[str, set[TripleKey]] = {}
        self.dropped_real: Counter = Counter()
        self.removed_distractors: Counter = Counter()
        self.stats: dict = {}
        self.pair_notes: dict[tuple[str, str], str] = {}
        self.distractor_tried: dict[str, set] = {}  # distractor id -> answers tried for it

    # ------------------------------------------------------------------ setup
    def prepare(self) -> None:
        """Parse and analyse every gold parse with answers; unusable ones fail with a reason."""
        for q in self.questions:
            for p in q.parses:
                if p.answers is None:
                    continue
                item = Item(p.parse_id if p.parse_id.startswith(q.id) else f"{q.id}/{p.parse_id}", q, p,
                            answers=tuple(p.answers))
                item.gold_keys = frozenset(answer_key(a) for a, _ in p.answers)
                for mid, name in list(p.topic_entities) + list(p.answers):
                    self.names.note_gold(mid, name)
                self.items.append(item)
                self.by_key[item.key] = item
                reason = self._analyse(item)
                if reason:
                    self.fail(item, reason)
                    continue
                for v in item.shape.variants:
                    self.types.observe(v, tuple(k.expr for k in item.query.order_by))

    def _analyse(self, item: Item) -> str | None:
        p = item.parse
        try:
            # as memq.kg.oxigraph.OxigraphStore runs it: Virtuoso's date semantics spelled out
            item.query = virtuoso_dates(parse_query(p.sparql))
        except SparqlParseError as exc:
            return f"parse error: {exc}"
        form = builder_form(item.query, item.answers, item.key)  # GrailQA's form, else None
        if isinstance(form, str):
            return f"unsupported: {form}"
        if form is not None:
            item.query, item.answers, item.function = form.query, form.answers, form.function
            self.binder.thresholds = True
            item.gold_keys = frozenset(answer_key(Iri(a) if a.startswith(SYN) else a) for a, _ in form.answers)
        item.sparql = to_standard(item.query)
        item.shape = analyse(item.query, self.schema)
        if item.shape.unsupported:
            return f"unsupported: {item.shape.unsupported}"
        if len(item.query.order_by) > 1:
            return "unsupported: ORDER BY with several keys"
        lim = item.query.limit
        if lim is not None and len(item.answers) > lim:
            return f"contradictory: {len(item.answers)} gold answers but LIMIT {lim}"
        return None

    def add_real(self) -> None:
        """Every real triple of ``data/freebase_subgraph`` (unless ``real_triples=False``)."""
        if not self.real_triples:
            self.stats["real_source_triples"] = 0
            return
        real = load_real_triples(self.schema, self.types.hinted_kind)
        self.stats["real_source_triples"] = len(real.triples)
        self.stats["real_skipped"] = dict(sorted(real.skipped.items()))
        for key, source in sorted(real.triples.items(), key=lambda kv: triple_sort(kv[0])):
            self.graph.add(key, real=True, source=source)

    def add_fb15k237(self) -> None:
        """FB15k-237's real triples; a CVT-path triple goes in as two triples through a CVT node.

        They come after the gold queries are materialised, as the schema-true
        distractors do: the repair then leaves out each one that adds an answer
        to a gold query, and materialising works as on the gold paths alone.
        """
        if self.fb15k237 is False:
            self.stats["fb15k237_triples"] = 0
            return
        triples = load_fb15k237(None if self.fb15k237 is True else Path(self.fb15k237))
        self.stats["fb15k237_triples"] = len(triples)
        for key, path in sorted(triples.items(), key=lambda kv: triple_sort(kv[0])):
            self.graph.add(key, real=True, source="fb15k237:" + path)

    def drop_real(self, key: TripleKey) -> None:
        """Leave out a real triple that gave a gold query a non-gold answer, counted by its relation.

        Half of an FB15k-237 CVT path takes the other half with it (unless a gold
        query needs it), counted once under the path relation.
        """
        info = self.graph.info.get(key)
        if info is None:
            return
        self.graph.remove(key)
        if not info.source.startswith("fb15k237:"):
            self.dropped_real[key[1].local] += 1
            return
        path = info.source.split(":", 1)[1]
        self.dropped_real[f"{path} (FB15k-237)"] += 1
        for node in (key[0], key[2]):
            if not is_fb15k_cvt(node):
                continue
            for other in self.graph.around(node):
                other_info = self.graph.info.get(other)  # None: gone with a mirror removed just before
                if other_info is not None and other_info.real and not other_info.owners:
                    self.graph.remove(other)

    def add_names(self) -> None:
        """English names of every mid in the real triples and the gold parses (real Freebase names)."""
        mids: set[str] = set()
        for s, _, o in list(self.graph.info):
            for t in (s, o):
                if isinstance(t, Iri) and t.is_entity:
                    mids.add(t.local)
        for item in self.items:
            mids.update(m for m, _ in item.parse.topic_entities)
            mids.update(a for a, _ in item.answers if is_mid(a))
            if item.query is not None:
                for t in item.query.where.all_triples():
                    mids.update(x.local for x in (t.s, t.o) if isinstance(x, Iri) and x.is_entity)
        named = 0
        for mid in sorted(mids):
            name = self.names.get(mid)
            node = Iri(FB + mid)
            if name and not self.graph.values(node, NAME):
                self.graph.add((node, Iri(NAME), Literal(name, lang="en")), real=True, source="names")
                named += 1
        self.stats["names_real"] = self.stats.get("names_real", 0) + named
        self.stats["mids_without_name"] = sum(1 for m in mids if not self.names.get(m))

    # ------------------------------------------------------------------ bookkeeping
    def fail(self, item: Item, reason: str) -> None:
        self.rollback(item)
        item.status, item.reason = "failed", reason

    def rollback(self, item: Item) -> None:
        """Give up an item's ownership; delete the synthetic triples nobody else needs."""
        for key in item.owned:
            info = self.graph.info.get(key)
            if info is not None:
                info.owners.discard(item.key)
        for key in sorted(item.added, key=triple_sort):
            info = self.graph.info.get(key)
            if info is not None and not info.owners and not info.distractors and not info.real:
                self.graph.remove(key)
        item.owned, item.added, item.touched = set(), set(), set()

    def commit(self, item: Item, binding: Binding, *, distractor: str | None = None) -> set[TripleKey]:
        """Add a binding's triples (and names of its fresh entities).

        Returns the triples that are new, or for a distractor every triple it tagged.
        """
        new: set[TripleKey] = set()
        heirs = self._release(binding.replaces)
        keys = list(binding.triples)
        named = {s for s, p, _ in keys if p.value == NAME}
        for node, (kind, label) in sorted(binding.fresh.items(), key=lambda kv: kv[0].value):
            if kind == "ent" and node not in named and not self.graph.values(node, NAME):
                keys.append((node, Iri(NAME), Literal(synthetic_name(node, label), lang="en")))
        for key in keys:
            existed = key in self.graph
            if distractor:
                self.graph.add(key, distractor=distractor)
            else:
                self.graph.add(key, owner=item.key)
                item.owned.add(key)
            if not existed:
                new.add(key)
        self._inherit(binding.triples, heirs)
        if distractor:
            return set(keys)
        item.added |= new
        item.touched |= set(binding.triples)
        return new

    def _release(self, olds: list[TripleKey]) -> dict[tuple, set[str]]:
        """Delete replaced values; ``(subject, predicate) -> owners`` who must own the new value."""
        heirs: dict[tuple, set[str]] = {}
        for key in olds:
            info = self.graph.info.get(key)
            if info is None or info.distractors:
                continue
            if info.real:
                self.dropped_real[key[1].local + " (value replaced)"] += 1
            heirs.setdefault(key[:2], set()).update(info.owners)
            for owner in info.owners:
                other = self.by_key[owner]
                other.owned.discard(key)
                other.touched.discard(key)
            self.graph.remove(key)
        return heirs

    def _inherit(self, keys, heirs: dict[tuple, set[str]]) -> None:
        for key in keys:
            for owner in sorted(heirs.get(key[:2], ())):
                self.graph.add(key, owner=owner)
                self.by_key[owner].owned.add(key)
                self.by_key[owner].touched.add(key)

    def swap_value(self, old: TripleKey, new: TripleKey) -> None:
        """Replace a synthetic attribute value; the queries that owned it own the new one."""
        heirs = self._release([old])
        self.graph.add(new)
        self._inherit([new], heirs)

    def remove_distractor(self, did: str, why: str) -> None:
        for key in sorted(self.distractors.pop(did, set()), key=triple_sort):
            info = self.graph.info.get(key)
            if info is None:
                continue
            info.distractors.discard(did)
            if not info.distractors and not info.owners and not info.real:
                self.graph.remove(key)
        self.removed_distractors[why] += 1

    # ------------------------------------------------------------------ materialise
    def materialise(self, item: Item) -> None:
        """One solution per gold answer; an ordered query's gold answer gets the winning key."""
        shape = item.shape
        reuse = item.mode == "reuse"
        spec = OrderSpec.of(item.query) if item.limited_order else None
        want = Want()
        wants = [Want()]
        if spec is not None:
            # beat every competitor; failing that, the ones whose triples some gold query needs
            # (the others are dropped by the repair rounds when they come first)
            wants = []
            for comp in competitor_keys(self.graph, item, spec):
                wants.append(Want(extra=lambda b, _, c=comp: key_better(spec, gold_key(spec, b), c),
                                  extra_constants=tuple(spec.constants(comp))))
        bindings: list[Binding] = []
        for answer, _ in sorted(item.answers):
            best, best_score, reason = None, -1, "no variant"
            for want in wants:
                for vi, variant in enumerate(shape.variants):
                    term = self.binder.answer_term(shape, variant, answer)
                    b = self.binder.bind(item.key, shape, variant, term, reuse=reuse,
                                         salt=f"{item.mode}{item.tries}:{vi}", want=want)
                    if isinstance(b, str):
                        reason = b
                        continue
                    score = sum(1 for t in b.triples if t in self.graph and self.graph.info[t].real)
                    if score > best_score:
                        best, best_score = b, score
                    if not reuse:
                        break
                if best is not None:
                    break
            if best is None:
                if spec is not None and reason.startswith("no literal values"):
                    reason += " (ORDER BY: the gold answer cannot get a key that ranks first)"
                self.fail(item, f"cannot materialise answer {answer}: {reason}")
                return
            bindings.append(best)
            self.commit(item, best)
        if spec is not None and spec.offset and bindings:
            self._ahead(item, spec, bindings)
        if item.status != "failed":
            item.status = "ok"

    def _ahead(self, item: Item, spec: OrderSpec, bindings: list[Binding]) -> None:
        """OFFSET n: n synthetic answers ranked before the gold one."""
        best = gold_key(spec, bindings[0].values)
        for n in range(spec.offset):
            term = synthetic("ent", item.key, "ahead", str(n))
            want = Want(extra=lambda b, _, k=best: key_better(spec, gold_key(spec, b), [k]),
                        extra_constants=tuple(spec.constants([best])))
            b = self.binder.bind(item.key, item.shape, item.shape.variants[0], term, reuse=False,
                                 salt=f"ahead{n}", want=want)
            if isinstance(b, str):
                self.fail(item, f"OFFSET {spec.offset}: cannot rank an answer before the gold one ({b})")
                return
            self.commit(item, b)
            best = gold_key(spec, b.values)

    def try_swap(self, olds: list[TripleKey], new: TripleKey, check=None) -> bool:
        """Would every gold query owning ``olds`` still be exact with ``new`` in their place?

        ``check()``, when given, must also hold with the swap in place.
        """
        owners = sorted({o for k in olds if (i := self.graph.info.get(k)) for o in i.owners})
        # GrailQA builds: owners are judged by "no worse" (mid-build they are often not exact yet: many share
        # a class and a compared relation, and the repair rounds come later); other builds by "exact"
        before = {o: set(self.answers(self.by_key[o])) for o in owners} if self.binder.thresholds else None
        store = self.graph.store
        quads = [self.graph.quad(k) for k in olds if k in self.graph.info]
        added = new not in self.graph.info
        for q in quads:
            store.remove(q)
        if added:
            store.add(self.graph.quad(new))
        try:
            if before is not None:
                good = all(_no_worse(before[o], set(self.answers(self.by_key[o])), self.by_key[o].gold_keys)
                           for o in owners)
            else:
                good = all(self.exact(self.by_key[o]) for o in owners)
            return good and (check is None or check())
        finally:
            if added:
                store.remove(self.graph.quad(new))
            for q in quads:
                store.add(q)

    # ------------------------------------------------------------------ run queries
    def answers(self, item: Item, sparql: str | None = None) -> dict[str, object]:
        """Answer key -> result term of the item's query (or ``sparql``) on the graph."""
        rows = self.graph.run(sparql or item.sparql)
        var = item.shape.answer.name
        return {answer_key(r[var]): r[var] for r in rows if var in r}

    def exact(self, item: Item) -> bool:
        return same_answers(self.answers(item), item.gold_keys)

    def ok_items(self) -> list[Item]:
        return [it for it in self.items if it.status == "ok"]

    def bar(self, seq, desc: str):
        if not self.progress:
            return seq
        from tqdm import tqdm
        return tqdm(seq, desc=desc, unit="q", leave=False)


def _no_worse(before: set[str], after: set[str], gold: frozenset[str]) -> bool:
    """No gold answer lost and no extra answer gained."""
    return before & gold <= after & gold and after - gold <= before - gold


def synthetic_name(node: Iri, label: str) -> str:
    """A readable name for a synthetic entity: ``Synthetic person 3f2a1c``."""
    kind = label.rsplit(".", 1)[-1].replace("_", " ") if label else "entity"
    return f"Synthetic {kind} {node.value.rsplit('_', 1)[-1][:6]}"


def triple_sort(key: TripleKey) -> tuple:
    s, p, o = key
    return (s.value, p.value, o.value, getattr(o, "datatype", None) or "", getattr(o, "lang", None) or "")
