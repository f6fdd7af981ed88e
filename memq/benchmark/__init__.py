"""The benchmark KG builder: a dataset-construction tool, separate from the KG interface in :mod:`memq.kg`.

One module a step: :mod:`.sources` (schema, real triples, names), :mod:`.shape`
(the pattern of a gold query), :mod:`.paths` and :mod:`.values` (instantiating it),
:mod:`.state` (the build and its items), :mod:`.repair` (every gold query exact),
:mod:`.distractors` (near-miss constraints), :mod:`.report`, and :mod:`.build`
(the steps in order, and the output file). ``memq kg build-benchmark`` runs it.
"""

from .build import (
    DEFAULT_OUT,
    GRAPH_REAL,
    GRAPH_SYNTHETIC,
    MARKER,
    BenchmarkBuild,
    benchmark_questions,
    build_benchmark,
    build_graph,
)

__all__ = ["BenchmarkBuild", "DEFAULT_OUT", "GRAPH_REAL", "GRAPH_SYNTHETIC", "MARKER", "benchmark_questions",
           "build_benchmark", "build_graph"]
