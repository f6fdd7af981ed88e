"""Build memq's benchmark knowledge graph: every gold query returns exactly its gold answers.

No Freebase subset that executes the WebQSP/CWQ gold queries can be had offline,
so this module builds one from the gold annotations themselves (see
``data/kg/PROVENANCE.md``):

1. every REAL Freebase triple bundled in ``data/freebase_subgraph`` goes in;
2. each gold query is materialised: for each gold answer its graph pattern is
   instantiated, reusing real nodes (CVTs, intermediates) where real triples
   already connect them, inventing synthetic nodes and literal values
   (satisfying the FILTERs and ORDER BYs) where not;
3. FB15k-237's real triples go in (``data/fb15k237``, CVT paths expanded
   through a CVT node), with the English names of their entities;
4. all gold queries are run on the shared graph; extra answers are traced to the
   triples that produce them, which are dropped (real triples no query needs,
   counted by relation; distractors) or the query is re-materialised on private
   synthetic nodes, or, when two gold annotations genuinely contradict, listed as
   a conflict;
5. for every constraint of every query (as :func:`memq.kg.check.constraints`
   defines them) whose removal does not yet change the answers, one near-miss
   distractor is added that violates exactly that constraint; distractors that
   disturb any gold query are removed again, and get a second and third try;
6. schema-true distractors (:mod:`memq.benchmark.density`): every node the gold
   queries touch gets the relations its types carry in the Freebase schema, and
   every CVT node a sibling; each one that adds an answer to a gold query is
   removed again;
7. the graph is written as sorted, gzip'ed N-Quads: real triples in
   ``<http://memq.dev/graph/real>``, the rest in ``<http://memq.dev/graph/synthetic>``.

Public entry points: :func:`build_benchmark` (the CLI's ``memq kg build-benchmark``)
and :func:`build_graph` (any list of gold questions, e.g. the test fixtures).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import pyoxigraph as ox

from memq.datasets import DATA_DIR, GoldQuestion, load
from memq.sparql.model import RDFS, Iri, Literal

from .density import add_density
from .distractors import add_distractors
from .graph import to_ox
from .repair import verify
from .report import VERSION, build_report
from .state import BuildState

log = logging.getLogger(__name__)

GRAPH_REAL = "http://memq.dev/graph/real"
GRAPH_SYNTHETIC = "http://memq.dev/graph/synthetic"
MARKER = "http://memq.dev/benchmark"
MARKER_TEXT = ("memq benchmark KG: synthesised from gold annotations; not Freebase. Built from the WebQSP/CWQ "
               "gold parses plus real Freebase triples: real triples are in <http://memq.dev/graph/real>, "
               "invented ones in <http://memq.dev/graph/synthetic>. Answers are only meaningful on this graph.")
DEFAULT_OUT = DATA_DIR / "kg" / "benchmark.nq.gz"


def marker_text(sources: str) -> str:
    """The marker comment of a KG built from other questions than the default benchmark's."""
    return (f"memq benchmark KG: synthesised from gold annotations; not Freebase. Built from {sources}: real "
            "triples are in <http://memq.dev/graph/real>, invented ones in <http://memq.dev/graph/synthetic>. "
            "Answers are only meaningful on this graph.")


class BenchmarkBuild(BuildState):
    """One build: :meth:`run` materialises, repairs and adds distractors; :meth:`write` saves the graph."""

    marker = MARKER_TEXT

    def run(self) -> dict:
        started = time.perf_counter()
        self.prepare()
        self.add_real()
        self.add_names()
        pending = [it for it in self.items if it.status == "pending"]
        # ordered queries last: their gold answer must beat what the others put on the path
        for it in self.bar(sorted(pending, key=lambda it: it.limited_order), "materialise"):
            self.materialise(it)
        self.add_fb15k237()
        self.add_names()
        verify(self, "gold")
        add_distractors(self)
        verify(self, "distractors")
        for n in range(2):  # distractors removed by the repair get another try, with other answers
            add_distractors(self, first_pass=False)
            verify(self, f"distractors pass {n + 2}")
        if self.density:
            add_density(self)
            verify(self, "density")
        self.stats["seconds"] = round(time.perf_counter() - started, 1)
        self.report_data = build_report(self)
        return self.report_data

    # ------------------------------------------------------------------ output
    def nquads(self) -> list[str]:
        """Sorted N-Quads lines: real triples in the real graph, the rest and the marker in the synthetic one."""
        real, syn = ox.NamedNode(GRAPH_REAL), ox.NamedNode(GRAPH_SYNTHETIC)
        lines = [str(ox.Quad(to_ox(s), to_ox(p), to_ox(o), real if info.real else syn)) + " ."
                 for (s, p, o), info in self.graph.info.items()]
        for p, o in ((Iri(RDFS + "comment"), Literal(self.marker)), (Iri("http://memq.dev/version"), Literal(VERSION))):
            lines.append(str(ox.Quad(ox.NamedNode(MARKER), to_ox(p), to_ox(o), syn)) + " .")
        lines.sort()
        return lines

    def write(self, out: Path) -> int:
        """Write gzip'ed sorted N-Quads with mtime 0 (same input, same bytes), atomically; the size in bytes."""
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        data = ("\n".join(self.nquads()) + "\n").encode("utf-8")
        fd, tmp = tempfile.mkstemp(prefix=out.name + ".", dir=out.parent)
        try:
            with os.fdopen(fd, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                            compresslevel=9) as gz:
                gz.write(data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, out)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return out.stat().st_size


def benchmark_questions() -> list[GoldQuestion]:
    """The questions the benchmark KG is built from, test splits first: WebQSP test, CWQ test, WebQSP train."""
    return load("webqsp", "test") + load("cwq", "test") + load("webqsp", "train")


def build_graph(questions: Iterable[GoldQuestion], *, progress: bool = False, real_triples: bool = True,
                fb15k237: bool | Path = True, density: bool = True, reverse: bool = False) -> BenchmarkBuild:
    """Build the benchmark graph of ``questions``; the build holds the graph and ``report_data``.

    ``real_triples=False`` leaves out the bundled real Freebase triples, ``fb15k237=False`` the
    FB15k-237 ones (or names another folder of them), ``density=False`` the schema-true
    distractors (fast unit tests). ``reverse=True`` adds each triple of a relation with a Freebase
    reverse property with its mirror, as Freebase holds both directions.
    """
    build = BenchmarkBuild(questions, progress=progress, real_triples=real_triples, fb15k237=fb15k237,
                           density=density, reverse=reverse)
    build.run()
    return build


def build_benchmark(out: Path = DEFAULT_OUT, *, progress: bool = True, questions: list[GoldQuestion] | None = None,
                    sources: str | None = None, real_triples: bool = True, fb15k237: bool = True,
                    density: bool = True, reverse: bool = False) -> dict:
    """Build the benchmark KG and write it to ``out``; a report dict.

    By default from WebQSP train+test and CWQ test (``data/kg/benchmark.nq.gz``); ``questions``
    (with ``sources``, the words the marker triple uses for them) builds another KG, e.g. GrailQA's
    or a user's own gold-annotated split. The report (without the timing) is also written next to
    it as ``<stem>_report.json``.
    """
    out = Path(out)
    build = BenchmarkBuild(benchmark_questions() if questions is None else questions, progress=progress,
                           real_triples=real_triples, fb15k237=fb15k237, density=density, reverse=reverse)
    if sources is not None:
        build.marker = marker_text(sources)
    build.run()
    report = dict(build.report_data)
    report["path"] = str(out)
    report["bytes"] = build.write(out)
    stem = out.name.split(".")[0]
    saved = {k: v for k, v in report.items() if k not in ("seconds", "path")}
    _write_json(out.with_name(f"{stem}_report.json"), saved)
    return report


def _write_json(path: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True, ensure_ascii=False)
        fh.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


__all__ = ["BenchmarkBuild", "DEFAULT_OUT", "GRAPH_REAL", "GRAPH_SYNTHETIC", "benchmark_questions",
           "build_benchmark", "build_graph"]
