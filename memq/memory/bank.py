"""MemoryBank: statements with their descriptions, searchable by meaning.

A FAISS ``IndexFlatIP`` holds one row per description (a statement may have
several); rows map back to statements and ``search`` returns one hit per
statement, scored by its best description.

On disk a bank is a directory (format version 1)::

    manifest.json      format_version, memq_version, created, embedder {name, dim},
                       describer {name, prompt_hash}, source, counts
                       (statements, descriptions, by_structure, by_source, fallbacks),
                       files {name: sha256}
    statements.jsonl   one statement per line: Statement.to_json() + descriptions,
                       describer, fallback, sources (statements.jsonl.gz when saved compressed)
    index.faiss        FAISS inner-product index (flat float32, or fp16 / sq8 scalar-quantised: manifest
                       index.type); row i is the i-th description in file order
                       (line 1's descriptions first, in their order, then line 2's ...)

A manifest may name other banks to ``include`` (paths relative to the bank, e.g. ``["../schema"]``): loading
the bank loads each of them too and adds the statements it lacks (:meth:`MemoryBank.merged`): the WebQSP and CWQ
banks include the committed schema bank. ``MemoryBank.load(path, include=False)`` loads the bank alone.

No pickle. Every file is written to a temporary name and renamed; the
manifest goes last. :meth:`MemoryBank.load` checks the manifest, the sha256 of
every file, the row count and the embedder (name and dim) and raises
:class:`~memq.errors.MemoryBankError` naming the file that failed.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from memq.describe.base import shared_descriptions
from memq.errors import MemoryBankError
from memq.files import read_manifest, sha256_file, write_atomic
from memq.types import STRUCTURES, MemoryRecord, Statement

from .embed import Embedder, embedder_for

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
STATEMENTS = "statements.jsonl"
STATEMENTS_GZ = "statements.jsonl.gz"
INDEX = "index.faiss"
INDEX_TYPES = ("flat", "fp16", "sq8")

Hit = tuple[MemoryRecord, str, float]


def index_type_of(index) -> str:
    """``flat``, ``fp16`` or ``sq8``: how a bank's FAISS index stores its vectors (the manifest's index.type)."""
    import faiss

    if isinstance(index, faiss.IndexScalarQuantizer):
        return "fp16" if index.sq.qtype == faiss.ScalarQuantizer.QT_fp16 else "sq8"
    return "flat"


def _flat_index(vecs: np.ndarray, dim: int):
    import faiss

    index = faiss.IndexFlatIP(dim)
    if len(vecs):
        index.add(np.ascontiguousarray(vecs, dtype=np.float32))
    return index


def _unsaved(info: dict) -> dict:
    """A derived bank's info: the source bank's, less the manifest it was loaded with (save() writes a new one)."""
    return {k: v for k, v in info.items() if k != "manifest"}


def memq_version() -> str:
    try:
        from importlib.metadata import version

        return version("memq")
    except Exception:  # not installed (running from a checkout)
        return "unknown"


def record_to_json(record: MemoryRecord, sources: Iterable[str] = ()) -> dict:
    return {**record.statement.to_json(), "descriptions": list(record.descriptions),
            "describer": record.describer, "fallback": record.fallback, "sources": sorted(sources)}


def record_from_json(obj: dict) -> tuple[MemoryRecord, tuple[str, ...]]:
    st = Statement.from_json(obj)
    descs = tuple(obj["descriptions"])
    if not descs or not all(isinstance(d, str) and d for d in descs):
        raise ValueError(f"statement {st.id} has no descriptions")
    return MemoryRecord(st, descs, obj["describer"], obj.get("fallback")), tuple(obj.get("sources", ()))


class MemoryBank:
    """Records + a FAISS index over their descriptions. Build with :meth:`build`, or :meth:`load`."""

    def __init__(self, records: list[MemoryRecord], index, embedder: Embedder,
                 sources: list[tuple[str, ...]] | None = None, info: dict | None = None) -> None:
        self.records = records
        self.index, self.embedder = index, embedder
        self.sources = sources or [() for _ in records]
        self.info = dict(info or {})
        self._row_text = descs = [d for rec in records for d in rec.descriptions]
        counts = np.fromiter((len(rec.descriptions) for rec in records), dtype=np.int64, count=len(records))
        self._row_record = np.repeat(np.arange(len(records), dtype=np.int64), counts)
        self._has_rows = counts > 0  # a record's rows are contiguous: where they start (similarities' reduceat)
        self._row_starts = (np.cumsum(counts) - counts)[self._has_rows]
        self._max_desc = max((len(r.descriptions) for r in records), default=1)
        if index.ntotal != len(descs):
            raise MemoryBankError(f"{INDEX}: holds {index.ntotal} rows but the statements have {len(descs)} "
                                  "descriptions")
        self._ids = [r.statement.id for r in records]
        self._by_id = dict(zip(self._ids, records, strict=True))

    # ------------------------------------------------------------------ build
    @classmethod
    def build(cls, records: list[MemoryRecord], embedder: Embedder, *,
              sources: list[tuple[str, ...]] | None = None, info: dict | None = None,
              batch_size: int = 512, progress=None, index_type: str = "flat") -> MemoryBank:
        """Embed every description of ``records`` (in order) into a new inner-product index (:meth:`compacted`).

        ``progress`` is called with the number of distinct descriptions encoded after each batch.
        """
        ids = [r.statement.id for r in records]
        if len(set(ids)) != len(ids):
            dup = next(i for i, n in Counter(ids).items() if n > 1)
            raise MemoryBankError(f"statement id {dup!r} occurs more than once")
        texts = [d for r in records for d in r.descriptions]
        # each distinct text is embedded once: equal descriptions (a relation and its reverse property, the schema's
        # CVT forms) get the very same vector, so they stay tied after quantisation, whatever batch they fell in
        unique = list(dict.fromkeys(texts))
        vecs = np.zeros((len(unique), embedder.dim), dtype=np.float32)
        for start in range(0, len(unique), batch_size):
            got = embedder.encode(unique[start:start + batch_size])
            if got.shape != (min(batch_size, len(unique) - start), embedder.dim):
                raise MemoryBankError(f"embedder {embedder.name!r} returned shape {got.shape}")
            vecs[start:start + len(got)] = got
            if progress is not None:
                progress(len(got))
        at = {t: i for i, t in enumerate(unique)}
        index = _flat_index(vecs[[at[t] for t in texts]] if texts else vecs, embedder.dim)
        bank = cls(list(records), index, embedder, sources, info)
        return bank if index_type == "flat" else bank.compacted(index_type)

    def subset(self, keep: Callable[[MemoryRecord, tuple[str, ...]], bool]) -> MemoryBank:
        """The bank of the records ``keep(record, sources)`` accepts, their vectors copied (no re-embedding), in
        the same index type. A memory without some questions' statements, to measure on those questions."""
        kept = [i for i, (r, s) in enumerate(zip(self.records, self.sources, strict=True)) if keep(r, s)]
        rows = np.flatnonzero(np.isin(self._row_record, kept))
        vecs = np.stack([self.index.reconstruct(int(r)) for r in rows]) if len(rows) else \
            np.zeros((0, self.index.d), dtype=np.float32)
        flat = type(self)([self.records[i] for i in kept], _flat_index(vecs, self.index.d), self.embedder,
                          [self.sources[i] for i in kept], _unsaved(self.info))
        kind = index_type_of(self.index)
        return flat if kind == "flat" else flat.compacted(kind)

    def trimmed(self, descriptions: int) -> MemoryBank:
        """The same statements with at most their first ``descriptions`` descriptions each, vectors copied (no
        re-embedding), in the same index type. The first is the one the grounded planner writes its lines from."""
        if descriptions < 1:
            raise ValueError(f"descriptions must be >= 1, got {descriptions}")
        rows, records, at = [], [], 0
        for r in self.records:
            keep = r.descriptions[:descriptions]
            rows.extend(range(at, at + len(keep)))
            at += len(r.descriptions)
            records.append(MemoryRecord(r.statement, keep, r.describer, r.fallback))
        vecs = self.index.reconstruct_n(0, self.index.ntotal)[rows] if rows else \
            np.zeros((0, self.index.d), dtype=np.float32)
        flat = type(self)(records, _flat_index(vecs, self.index.d), self.embedder, self.sources, _unsaved(self.info))
        kind = index_type_of(self.index)
        return flat if kind == "flat" else flat.compacted(kind)

    def merged(self, other: MemoryBank, *, descriptions: bool = False) -> MemoryBank:
        """This bank and the records of ``other`` it lacks, vectors copied (no re-embedding), in this bank's index
        type; a statement in both keeps this bank's record, with the sources of both. The embedders must match.

        ``descriptions``: a statement in both also gets ``other``'s descriptions that its record lacks, as
        further rows after its own (a mixed bank: template and LLM descriptions of the same statements, each
        recalled on its own); its ``describer`` then names both (``llm:qwen2.5-coder-0.5b+template``)."""
        if (other.embedder.name, other.embedder.dim) != (self.embedder.name, self.embedder.dim):
            raise MemoryBankError(f"cannot merge banks embedded by {self.embedder.name!r} and {other.embedder.name!r}")
        theirs = {r.statement.id: src for r, src in zip(other.records, other.sources, strict=True)}
        sources = [tuple(dict.fromkeys(src + theirs.get(r.statement.id, ())))
                   for r, src in zip(self.records, self.sources, strict=True)]
        mine = self.index.reconstruct_n(0, self.index.ntotal)
        their_vecs = other.index.reconstruct_n(0, other.index.ntotal) if other.index.ntotal else mine[:0]
        # a description this bank also has takes this bank's vector: equal texts stay tied across the two banks
        # when one of them is quantised (sq8 moves a score by up to ~1e-2, recall's TIE is 1e-4)
        my_row = {t: i for i, t in enumerate(self._row_text)}
        same = [(j, my_row[t]) for j, t in enumerate(other._row_text) if t in my_row]
        if same:
            their_vecs = their_vecs.copy()
            theirs_at, mine_at = zip(*same, strict=True)
            their_vecs[list(theirs_at)] = mine[list(mine_at)]
        records, vecs = list(self.records), [mine]
        if descriptions:
            their_rows: dict[int, list[int]] = {}
            for row, rec_i in enumerate(other._row_record.tolist()):
                their_rows.setdefault(rec_i, []).append(row)
            at = {r.statement.id: i for i, r in enumerate(other.records)}
            my_rows: dict[int, list[int]] = {}
            for row, rec_i in enumerate(self._row_record.tolist()):
                my_rows.setdefault(rec_i, []).append(row)
            records, vecs = [], []
            for i, r in enumerate(self.records):
                vecs.append(mine[my_rows.get(i, [])])
                j = at.get(r.statement.id)
                add = [row for row in their_rows.get(j, []) if other._row_text[row] not in r.descriptions] \
                    if j is not None else []
                if add:
                    names = dict.fromkeys(r.describer.split("+") + other.records[j].describer.split("+"))
                    r = MemoryRecord(r.statement, r.descriptions + tuple(other._row_text[row] for row in add),
                                     "+".join(names), r.fallback)
                    vecs.append(their_vecs[add])
                records.append(r)
        new = [i for i, r in enumerate(other.records) if r.statement.id not in self._by_id]
        rows = np.flatnonzero(np.isin(other._row_record, new))  # the new records' rows, in order
        if len(rows):
            vecs.append(their_vecs[rows])
        merged_source = {"merged": [self.info.get("source", {}), other.info.get("source", {})]}
        info = {**self.info, "source": merged_source}
        if descriptions:
            info["describer"] = {"merged": [self.info.get("describer", {}), other.info.get("describer", {})]}
        flat = type(self)(records + [other.records[i] for i in new],
                          _flat_index(np.concatenate(vecs).astype(np.float32), self.index.d),
                          self.embedder, sources + [other.sources[i] for i in new], _unsaved(info))
        kind = index_type_of(self.index)
        return flat if kind == "flat" else flat.compacted(kind)

    def compacted(self, index_type: str) -> MemoryBank:
        """The same bank with its vectors stored as ``index_type``: ``flat`` (float32), ``fp16`` (half the
        size, scores within about 1e-3) or ``sq8`` (a quarter, one byte a dimension, trained on the bank's own
        vectors; scores within about 1e-2, so a γ threshold can fall the other way for a statement at its edge).
        Recall compared on WebQSP dev: docs/memory.md."""
        import faiss

        if index_type not in INDEX_TYPES:
            raise MemoryBankError(f"unknown index type {index_type!r}; expected one of {', '.join(INDEX_TYPES)}")
        vecs = self.index.reconstruct_n(0, self.index.ntotal)
        if index_type == "flat":
            index = faiss.IndexFlatIP(self.index.d)
        else:
            kind = faiss.ScalarQuantizer.QT_fp16 if index_type == "fp16" else faiss.ScalarQuantizer.QT_8bit
            index = faiss.IndexScalarQuantizer(self.index.d, kind, faiss.METRIC_INNER_PRODUCT)
            index.train(vecs)
        index.add(vecs)
        return type(self)(self.records, index, self.embedder, self.sources, _unsaved(self.info))

    # ------------------------------------------------------------------ search
    def __len__(self) -> int:
        return len(self.records)

    def get(self, statement_id: str) -> MemoryRecord | None:
        return self._by_id.get(statement_id)

    def search(self, text: str, k: int = 5) -> list[Hit]:
        """The ``k`` statements whose best description is closest to ``text``, best first."""
        return self.search_many([text], k)[0]

    def similarities(self, text: str) -> dict[str, float]:
        """Every statement's id -> the similarity of its best description to ``text`` (:meth:`search` over the whole
        bank, without sorting it when the index holds the vectors as they are)."""
        import faiss

        if not isinstance(self.index, faiss.IndexFlat) or not self.records:
            return {rec.statement.id: score for rec, _, score in self.search(text, k=len(self))}
        vec = np.ascontiguousarray(self.embedder.encode([text]), dtype=np.float32)[0]
        rows = faiss.rev_swig_ptr(self.index.get_xb(), self.index.ntotal * self.index.d).reshape(-1, self.index.d)
        best = np.full(len(self.records), -np.inf, dtype=np.float32)
        best[self._has_rows] = np.maximum.reduceat(rows @ vec, self._row_starts)
        return dict(zip(self._ids, best.tolist(), strict=True))

    def search_many(self, texts: list[str], k: int = 5) -> list[list[Hit]]:
        """:meth:`search` for many texts, encoded and searched in one batch."""
        if isinstance(texts, str):
            raise TypeError("search_many expects a list of str")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if not texts or not self.records:
            return [[] for _ in texts]
        vecs = np.ascontiguousarray(self.embedder.encode(list(texts)), dtype=np.float32)
        # A statement has at most _max_desc rows, so k * _max_desc rows hold >= k statements.
        rows = min(self.index.ntotal, k * self._max_desc)
        scores, found = self.index.search(vecs, rows)
        out = []
        for srow, frow in zip(scores, found, strict=True):
            hits: list[Hit] = []
            seen: set[int] = set()
            for score, row in zip(srow, frow, strict=True):
                if row < 0:
                    continue
                rec_i = int(self._row_record[row])
                if rec_i in seen:
                    continue
                seen.add(rec_i)
                hits.append((self.records[rec_i], self._row_text[row], float(score)))
                if len(hits) == k:
                    break
            out.append(hits)
        return out

    # ------------------------------------------------------------------ counts
    def counts(self) -> dict:
        by_structure = Counter(r.statement.structure for r in self.records)
        by_source = Counter(s for srcs in self.sources for s in srcs)
        return {
            "statements": len(self.records),
            "descriptions": len(self._row_text),
            "by_structure": {s: by_structure.get(s, 0) for s in STRUCTURES},
            "by_source": dict(sorted(by_source.items())),
            "by_describer": dict(sorted(Counter(r.describer for r in self.records).items())),
            "fallbacks": dict(sorted(Counter(r.fallback for r in self.records if r.fallback).items())),
            "shared_first_descriptions": shared_descriptions(r.descriptions[0] for r in self.records),
        }

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path, *, compress: bool = False, include: Iterable[str] = ()) -> Path:
        """Write the bank into directory ``path`` (created if needed); returns it. ``compress``: the statements
        as ``statements.jsonl.gz`` (gzip, no timestamp, so the same bank gives the same bytes). ``include``: other
        banks that loading this one adds (paths relative to ``path``; the manifest's ``include``)."""
        import faiss

        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        include = list(include)
        for rel in include:
            if Path(rel).is_absolute():
                raise MemoryBankError(f"include {rel!r}: give a path relative to the bank, e.g. '../schema'")
            if not (out / rel / MANIFEST).is_file():
                raise MemoryBankError(f"include {rel!r}: {out / rel} holds no memory bank")
        lines = [json.dumps(record_to_json(r, s), ensure_ascii=False, sort_keys=True)
                 for r, s in zip(self.records, self.sources, strict=True)]
        data = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
        name, stale = (STATEMENTS_GZ, STATEMENTS) if compress else (STATEMENTS, STATEMENTS_GZ)
        write_atomic(out / name, gzip.compress(data, compresslevel=9, mtime=0) if compress else data)
        write_atomic(out / INDEX, faiss.serialize_index(self.index).tobytes())
        manifest = {
            "format_version": FORMAT_VERSION,
            "memq_version": memq_version(),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "embedder": {"name": self.embedder.name, "dim": int(self.embedder.dim)},
            "describer": self.info.get("describer", {}),
            "source": self.info.get("source", {}),
            "index": {"type": index_type_of(self.index), "rows": int(self.index.ntotal),
                      "row_order": "row i = i-th description in statements.jsonl order"},
            "counts": self.counts(),
            "files": {n: sha256_file(out / n) for n in (name, INDEX)},
        }
        if include:
            manifest["include"] = include
        write_atomic(out / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8"))
        (out / stale).unlink(missing_ok=True)
        self.info["manifest"] = manifest
        return out

    @property
    def manifest(self) -> dict:
        return self.info.get("manifest", {})

    @classmethod
    def load(cls, path: str | Path, embedder: Embedder | None = None, *, include: bool = True) -> MemoryBank:
        """Load and verify a bank directory. ``embedder`` defaults to the one the manifest names. ``include``:
        also the banks the manifest's ``include`` names, their statements added (``info["included"]`` lists them)."""
        bank = cls._load_one(Path(path), embedder)
        if include:
            bank = bank._with_includes(Path(path), (Path(path).resolve(),))
        return bank

    def _with_includes(self, root: Path, chain: tuple[Path, ...]) -> MemoryBank:
        names = self.manifest.get("include") or []
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise MemoryBankError(f"{root / MANIFEST}: include must be a list of bank paths, got {names!r}")
        bank, included = self, []
        for name in names:
            where = (root / name).resolve()
            if where in chain:
                raise MemoryBankError(f"{root / MANIFEST}: include {name!r} includes itself")
            other = type(self)._load_one(root / name, self.embedder)._with_includes(root / name, (*chain, where))
            bank = bank.merged(other)
            included += [str(root / name), *other.info.get("included", [])]
        if included:
            bank.info.update(manifest=self.manifest, included=included)
        return bank

    @staticmethod
    def _manifest_files(mpath: Path) -> tuple[str, str]:
        """The statements file the manifest lists (plain or gzipped) and the index."""
        try:
            listed = json.loads(mpath.read_text(encoding="utf-8")).get("files") or {}
        except (OSError, ValueError, AttributeError):
            listed = {}  # read_manifest says what is wrong
        return (STATEMENTS_GZ if STATEMENTS_GZ in listed else STATEMENTS), INDEX

    @classmethod
    def _load_one(cls, root: Path, embedder: Embedder | None) -> MemoryBank:
        import faiss

        mpath = root / MANIFEST
        names = cls._manifest_files(mpath)
        manifest = read_manifest(mpath, names, FORMAT_VERSION, MemoryBankError, "memory bank manifest")
        try:
            emb_name, emb_dim = manifest["embedder"]["name"], int(manifest["embedder"]["dim"])
        except (ValueError, KeyError, TypeError) as exc:
            raise MemoryBankError(f"{mpath}: unreadable manifest ({exc})") from None
        if embedder is None:
            embedder = embedder_for(emb_name, emb_dim)
        if embedder.name != emb_name or int(embedder.dim) != emb_dim:
            raise MemoryBankError(f"{mpath}: bank was built with embedder {emb_name!r} (dim {emb_dim}), "
                                  f"not {embedder.name!r} (dim {embedder.dim})")
        records, sources = [], []
        spath = root / names[0]
        raw = spath.read_bytes()
        lines = (gzip.decompress(raw) if spath.suffix == ".gz" else raw).decode("utf-8").splitlines()
        try:  # one parse of all lines (a bank holds up to ~60k); a bad line is then found line by line
            objs = json.loads("[" + ",".join(line for line in lines if line.strip()) + "]")
        except ValueError:
            objs = None
        numbered = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
        for i, (n, line) in enumerate(numbered):
            try:
                rec, src = record_from_json(objs[i] if objs is not None else json.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                raise MemoryBankError(f"{spath}: line {n}: {exc}") from None
            records.append(rec)
            sources.append(src)
        try:
            index = faiss.deserialize_index(np.frombuffer((root / INDEX).read_bytes(), dtype=np.uint8))
        except RuntimeError as exc:
            raise MemoryBankError(f"{root / INDEX}: not a FAISS index ({str(exc).splitlines()[0]})") from None
        if index.d != emb_dim:
            raise MemoryBankError(f"{root / INDEX}: dimension {index.d}, manifest says {emb_dim}")
        try:
            bank = cls(records, index, embedder, sources,
                       {"describer": manifest.get("describer", {}), "source": manifest.get("source", {}),
                        "manifest": manifest})
        except MemoryBankError as exc:
            raise MemoryBankError(f"{root}/{exc}") from None
        return bank
