"""The pipeline's settings (:class:`Config`) and which planner and bank each dataset gets by default."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..files import ROOT
from ..link.settings import LinkConfig
from ..plan.base import BACKENDS, DEFAULT_BACKEND
from ..plan.grounded import GroundedConfig
from ..recall import RecallConfig

PLANNERS = ("auto", "fewshot", "finetuned", "grounded", "hybrid", "given")
# datasets whose ``auto`` planner is the grounded one: it won on their dev split (WebQSP dev, first 150: F1
# 0.804 against 0.727 for free generation and 0.792 for the hybrid planner, docs/planner.md; GrailQA's tuning part,
# first 40: 0.448 against 0.361, docs/results.md)
GROUNDED_BY_DEFAULT = ("webqsp", "grailqa")
# datasets whose ``auto`` planner is the hybrid one. CWQ dev has no gold answers to decide on; the hybrid planner's
# answers differ from free generation's only where free generation found none, so its F1 cannot be lower
HYBRID_BY_DEFAULT = ("cwq",)
# planners that read a bank without the banks it includes (the schema), as on held-out dev it lowered free plans
# (WebQSP F1 0.710 -> 0.687, CWQ EHR 0.554 -> 0.541), and pairs with no dev run with it (CWQ grounded; docs/memory.md)
FREE_PLANNERS = ("fewshot", "finetuned", "hybrid")
BANK_ALONE = {("grounded", "cwq")}
# the benchmark KG (WebQSP's and CWQ's gold facts among distractors), and GrailQA's own, which its questions are
# answered on unless a KG or an endpoint is named
BENCHMARK_KG = str(ROOT / "data" / "kg" / "benchmark.nq.gz")
GRAILQA_KG = str(ROOT / "data" / "kg" / "grailqa.nq.gz")


@dataclass(frozen=True)
class Config:
    """Where the memory and the KG are, which planner, and how to recall.

    Defaults work on a fresh clone: the committed WebQSP memory bank and the
    bundled benchmark KG in an embedded Oxigraph store.
    """

    memory: str = str(ROOT / "memory_bank" / "webqsp")
    # the RDF file of the embedded store; None: the planner's dataset's benchmark KG (``kg_file``)
    kg: str | None = None
    endpoint: str | None = None
    planner: str = "auto"
    planner_model: str = "qwen2.5-coder-0.5b"
    adapter: str | None = None
    # whose few-shot examples, default adapter, ranker, search and ``auto`` choice the planner takes; None: the
    # dataset of the memory bank (:func:`bank_dataset`: its own planner's, else GrailQA for a bank of GrailQA's
    # form), else WebQSP (memq evaluate names it)
    planner_dataset: str | None = None
    planner_batch_size: int = 8  # prompts per generate call (batched evaluation)
    backend: str = DEFAULT_BACKEND  # the planner's LLM: "llamacpp", or "transformers" (also the traced fallback)
    recall: RecallConfig = field(default_factory=RecallConfig)
    # the grounded planner's search; None: the planner's dataset's (GrailQA's ``GRAILQA_SEARCH``, else the defaults)
    search: GroundedConfig | None = None
    # the grounded planner's statement ranker: "auto" (memory_bank/<dataset>/ranker, else memory_bank/ranker, if
    # committed), "none", or a directory
    ranker: str = "auto"
    grounded: bool = True
    repair: bool = True
    # every node of a query differs from every other, as in GrailQA's gold queries; None: where the planner's
    # dataset's gold queries are written so (memq.datasets.DISTINCT_NODES)
    distinct_nodes: bool | None = None
    max_repairs: int = 4
    timeout: float = 20.0
    # entity linking (questions asked without ids): an index directory (``memq link build``); None: the index of
    # the embedded KG file, built once in the memq cache
    entity_index: str | None = None
    link: LinkConfig = field(default_factory=LinkConfig)
    # constraint entities suggested for a linked question at this support (memq.link.constraints; 0: off)
    constraints: float = 0.3

    def __post_init__(self) -> None:
        if self.planner not in PLANNERS:
            raise ValueError(f"unknown planner {self.planner!r}; expected one of {', '.join(PLANNERS)}")
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}; expected one of {', '.join(BACKENDS)}")
        if self.planner_batch_size < 1:
            raise ValueError(f"planner_batch_size must be >= 1, got {self.planner_batch_size}")
        if self.max_repairs < 0:
            raise ValueError(f"max_repairs must be >= 0, got {self.max_repairs}")
        if not 0 <= self.constraints <= 1:
            raise ValueError(f"constraints must be in [0, 1], got {self.constraints!r}")

    @cached_property
    def dataset(self) -> str | None:
        """The dataset whose questions this config plans: ``planner_dataset``, else the memory bank's
        (:func:`bank_dataset`), else None. Read once a config (the bank's manifests are read to know it; the fields
        it depends on are frozen, and ``replace`` makes a new config)."""
        return self.planner_dataset or bank_dataset(self.memory)

    @cached_property
    def kg_file(self) -> str:
        """The RDF file of the embedded store: ``kg``, else the benchmark KG of the planner's dataset (``dataset``):
        GrailQA's own (``GRAILQA_KG``) for GrailQA, whose questions' facts the other one does not hold, else
        ``BENCHMARK_KG``."""
        if self.kg:
            return self.kg
        return GRAILQA_KG if self.dataset == "grailqa" else BENCHMARK_KG


def search_for(dataset: str | None) -> GroundedConfig:
    """The grounded planner's search settings for ``dataset``'s questions: the defaults with the dataset's own
    (``DATASET_SEARCH``: GrailQA's chosen on its tuning part, WebQSP's on its dev) over them."""
    from ..plan.search import DATASET_SEARCH

    return GroundedConfig(**DATASET_SEARCH.get(dataset, {}))


def bank_dataset(memory) -> str | None:
    """The dataset whose questions the memory bank at ``memory`` serves, or None when it does not say: the one dataset
    its own planner (``<memory>/planner``) was trained on (``grailqa`` and its synthetic programs,
    ``grailqa-synthetic``, are GrailQA's), else ``grailqa`` when it is of GrailQA's form (:func:`class_bank`)."""
    import json
    from pathlib import Path

    from ..datasets import DATASETS

    try:
        manifest = json.loads((Path(memory) / "planner" / "manifest.json").read_text(encoding="utf-8"))
        trained = {str(name).removesuffix("-synthetic") for name in (manifest.get("data") or {}).get("datasets") or ()}
    except (OSError, ValueError, AttributeError):
        trained = set()
    if len(trained) == 1 and (dataset := trained.pop()) in DATASETS:
        return dataset
    return "grailqa" if class_bank(memory) else None


def class_bank(memory) -> bool:
    """Whether the memory bank at ``memory``, or a bank it includes (as :meth:`memq.memory.bank.MemoryBank.load`
    follows them: every level, each bank once), holds class statements, GrailQA's form of the schema, by the
    manifests' counts (the banks are not loaded; an unreadable manifest counts none, and loading says what is
    wrong). Such a bank is answered as ``memq evaluate --dataset grailqa`` answers: GrailQA's adapter, ranker, search
    settings (those of every flag not given) and distinct nodes."""
    import json
    from pathlib import Path

    from ..memory.bank import MANIFEST

    todo, seen = [Path(memory)], set()
    while todo:
        folder = todo.pop()
        if folder.resolve() in seen:
            continue
        seen.add(folder.resolve())
        try:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
            if ((manifest.get("counts") or {}).get("by_structure") or {}).get("class"):
                return True
            todo += [folder / name for name in manifest.get("include") or () if isinstance(name, str)]
        except (OSError, ValueError, AttributeError):
            continue
    return False
