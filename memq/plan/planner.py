"""The fine-tuned planning expert, the scripted planner, and :func:`make_planner` (a planner by name).

The Planner role itself is in :mod:`memq.plan.base` (re-exported here).
``plan`` raises :class:`~memq.errors.PlanParseError` when the model wrote no readable
step; a partly readable plan comes back with ``Plan.dropped`` filled in.

>>> planner = FineTunedPlanner("memory_bank/webqsp/planner")   # doctest: +SKIP
>>> planner.plan("who is justin bieber's brother?", ["Justin Bieber", "Male"]).steps[0].text  # doctest: +SKIP
'Find the sibling of the siblings of the person Justin Bieber, assign it to ?x.'
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from memq.errors import MemQError
from memq.llm.draft import MAX_TEXTS
from memq.types import Plan

from .base import DEFAULT_BACKEND, BatchPlanner, Entities, Planner, check_backend
from .format import parse_plan
from .prompt import entity_names, planner_prompt

__all__ = ["DATASET_LORA", "DATASET_WEIGHTS", "BatchPlanner", "Entities", "FineTunedPlanner", "Planner",
           "ScriptedPlanner", "default_adapter", "default_lora", "default_weights", "make_planner", "read_manifest"]

logger = logging.getLogger(__name__)


def read_manifest(adapter: str | Path) -> dict:
    path = Path(adapter) / "manifest.json"
    if not path.exists():
        raise MemQError(f"planner adapter {adapter} has no manifest.json")
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise MemQError(f"planner manifest {path} is not JSON: {exc}") from exc


class FineTunedPlanner(BatchPlanner):
    """A base model + the LoRA adapter of ``memq planner train``; greedy, batched decoding.

    ``base`` defaults to the one named in the adapter's manifest; a base model
    whose sha256 differs from the manifest's is refused. ``backend``:
    ``"llamacpp"`` (default: the base GGUF + the adapter converted to a GGUF
    LoRA adapter, :mod:`memq.llm.llamacpp`) or ``"transformers"`` (training, and the
    fallback when llama.cpp cannot run; ``fallbacks`` then says why and
    ``backend_used`` names the backend that plans).
    """

    def __init__(self, adapter: str | Path, base: str | None = None, device: str = "cpu",
                 batch_size: int = 8, max_new_tokens: int = 160, backend: str = DEFAULT_BACKEND) -> None:
        self.adapter = Path(adapter)
        if not (self.adapter / "adapter_config.json").exists() and not (self.adapter / "config.json").exists():
            raise MemQError(f"{adapter} is not a planner adapter (no adapter_config.json) nor a fine-tuned model")
        self.manifest = read_manifest(self.adapter)
        self.base = base or self.manifest["base_model"].get("ref") or self.manifest["base_model"]["name"]
        self.device = device
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.backend = check_backend(backend)
        self.fallbacks: list[str] = []
        self.name = f"finetuned:{self.base}+{self.adapter.name}"
        self._llm = None

    @property
    def llm(self):
        if self._llm is None:
            from memq.llm import gguf_source, resolve_model
            from memq.llm.llamacpp import make_llm

            if self.manifest.get("kind") == "full-planner":  # every weight fine-tuned: the directory is the model
                self._llm, note = make_llm(self.backend, str(self.adapter), device=self.device,
                                           batch_size=self.batch_size)
            else:
                want = self.manifest["base_model"].get("sha256")
                found = gguf_source(self.base)
                have = found[2] if found else resolve_model(self.base).sha256
                if want and have != want:
                    raise MemQError(f"adapter {self.adapter} was trained on base sha256 {want[:12]}..., "
                                    f"but {self.base!r} has {have[:12]}...")
                weights = default_weights(self.adapter)
                self._llm, note = make_llm(self.backend, self.base, adapter=str(self.adapter), device=self.device,
                                           batch_size=self.batch_size, weights=weights,
                                           lora=default_lora(self.adapter, weights))
            if note:
                self.fallbacks.append(note)
            if hasattr(self._llm, "draft_from"):  # llama.cpp: speculative greedy decoding, same plans
                self._llm.draft_from(f"training plans of {self.adapter.name}",
                                     lambda: training_plans(self.manifest, MAX_TEXTS))
        return self._llm

    def prompt(self, question: str, entities: Entities) -> str:
        return planner_prompt(question, entities)


def training_plans(manifest: dict, limit: int | None = None) -> list[str]:
    """The first ``limit`` (default all) plan texts an adapter was trained on: its manifest's datasets, train
    part, derived from the bundled data once and cached (:func:`memq.plan.data.load_split`). They feed the
    llama.cpp drafter (:mod:`memq.llm.draft`)."""
    from .data import default_data_path, load_split

    data = manifest.get("data") or {}
    if not data.get("datasets"):
        raise MemQError("the adapter's manifest names no training data")
    exclude = bool(data.get("excluded_webqsp_test_ids"))
    texts: list[str] = []
    for dataset in data["datasets"]:
        path = default_data_path(dataset, "train", exclude)
        if not path.exists():
            logger.warning("deriving the %s training plans once (drafts for the llama.cpp planner) ...", dataset)
            load_split(dataset, "train", exclude_webqsp_test=exclude)  # writes the cache file
        with open(path, encoding="utf-8") as fh:  # the texts only (26,747 CWQ records parse in seconds)
            for n, line in enumerate(fh, 1):
                if limit is not None and len(texts) >= limit:
                    return texts
                if line.strip():
                    try:
                        texts.append(json.loads(line)["plan"])
                    except (ValueError, KeyError, TypeError) as exc:
                        raise MemQError(f"{path}:{n}: not a planner data record ({exc})") from exc
    return texts


class ScriptedPlanner:
    """A planner that returns fixed plan texts (tests and demos): ``{question: plan text}``."""

    name = "scripted"

    def __init__(self, plans: dict[str, str]) -> None:
        self.plans = dict(plans)
        self.calls = 0

    def plan(self, question: str, entities: Entities) -> Plan:
        self.calls += 1
        if question not in self.plans:
            raise MemQError(f"scripted planner has no plan for {question!r}")
        return parse_plan(self.plans[question], entity_names(entities))


REPO_ADAPTER = Path(__file__).resolve().parents[2] / "memory_bank" / "{dataset}" / "planner"


# the committed planner of a dataset runs on these base weights unless $MEMQ_LLAMA_WEIGHTS says otherwise, where
# they planned as f16 does on that dataset's dev and llama.cpp multiplies them natively (docs/backends.md, "bf16")
DATASET_WEIGHTS = {"grailqa": "bf16", "webqsp": "bf16"}


def _committed(adapter: str | Path, choices: dict[str, str]) -> str | None:
    """``choices``' value for the dataset whose committed planner ``adapter`` is (however the path is written)."""
    return next((w for d, w in choices.items()
                 if Path(str(REPO_ADAPTER).format(dataset=d)).resolve() == Path(adapter).resolve()), None)


def default_weights(adapter: str | Path) -> str:
    """The base weights llama.cpp runs the planner ``adapter`` on: ``$MEMQ_LLAMA_WEIGHTS``; else
    :data:`DATASET_WEIGHTS`' choice when ``adapter`` is that dataset's committed planner (bf16 only where
    :func:`memq.llm.gguf_weights.native_bf16`); else f16."""
    from memq.llm.gguf_weights import native_bf16, weights_from_env

    own = _committed(adapter, DATASET_WEIGHTS)
    return weights_from_env(own if own != "bf16" or native_bf16() else None)


# the committed planner of a dataset runs with its adapter merged into the base weights (memq.llm.lora_gguf) unless
# $MEMQ_LLAMA_LORA says otherwise, where that planned as the runtime adapter does on dev (docs/backends.md)
DATASET_LORA = {"grailqa": "merged", "webqsp": "merged"}


def default_lora(adapter: str | Path, weights: str | None = None) -> str:
    """How llama.cpp applies the planner ``adapter``: ``$MEMQ_LLAMA_LORA``; else :data:`DATASET_LORA`'s choice when
    ``adapter`` is that dataset's committed planner and its ``weights`` (default :func:`default_weights`) are f16 or
    bf16, which an adapter can be added into; else ``runtime``."""
    from memq.llm.lora_gguf import lora_from_env

    weights = weights or default_weights(adapter)
    return lora_from_env(_committed(adapter, DATASET_LORA) if weights in ("f16", "bf16") else None)


def default_adapter(dataset: str = "webqsp") -> Path:
    """``memory_bank/<dataset>/planner`` when it holds an adapter, else
    ``$MEMQ_CACHE/planners/qwen2.5-coder-0.5b-<dataset>``."""
    from memq.llm import cache_root

    repo = Path(str(REPO_ADAPTER).format(dataset=dataset))
    if (repo / "adapter_config.json").exists():
        return repo
    return cache_root() / "planners" / f"qwen2.5-coder-0.5b-{dataset}"


def make_planner(kind: str = "fewshot", *, model: str = "qwen2.5-coder-0.5b", adapter: str | Path | None = None,
                 device: str = "cpu", dataset: str = "webqsp", k: int = 4, batch_size: int = 8,
                 backend: str = DEFAULT_BACKEND, kg=None, bank=None, search=None, timeout: float | None = 20.0,
                 ranker: str | Path | None = None):
    """A planner by name: ``"fewshot"`` (``model`` + k retrieved examples), ``"finetuned"`` (``adapter``), or
    ``"grounded"`` (``adapter`` choosing lines grounded in ``kg`` from the memory ``bank``; ``search`` is its
    :class:`~memq.plan.grounded.GroundedConfig`), or ``"hybrid"`` (free generation, the grounded planner when its
    plan finds nothing: :mod:`memq.plan.hybrid`), run by ``backend`` (``"llamacpp"`` or ``"transformers"``).
    ``ranker``: the directory of the statement ranker that orders the grounded planner's candidates
    (:mod:`memq.plan.ranker`); None: the model alone chooses."""
    check_backend(backend)
    if kind == "fewshot":
        from memq.llm.llamacpp import make_llm

        from .fewshot import FewShotPlanner

        llm, note = make_llm(backend, model, device=device, batch_size=batch_size)
        planner = FewShotPlanner(llm, dataset=dataset, k=k)
        planner.fallbacks = [note] if note else []
        return planner
    if kind in ("finetuned", "grounded", "hybrid"):
        path = Path(adapter) if adapter else default_adapter(dataset)
        if not (path / "adapter_config.json").exists():
            raise MemQError(f"no planner adapter at {path}; train one with `memq planner train` or pass an adapter")
        free = FineTunedPlanner(path, device=device, batch_size=batch_size, backend=backend)
        if kind == "finetuned":
            return free
        if kg is None or bank is None:
            raise MemQError(f"the {kind} planner needs the KG and the memory bank (kg=, bank=)")
        from .grounded import GroundedPlanner

        scorer = None
        if ranker is not None:
            from .ranker import load_ranker

            scorer = load_ranker(ranker, dataset=dataset)
        grounded = GroundedPlanner(free, kg=kg, bank=bank, config=search, timeout=timeout, ranker=scorer)
        if kind == "grounded":
            return grounded
        from .hybrid import HybridPlanner

        return HybridPlanner(grounded)
    raise MemQError(f"unknown planner {kind!r}; expected 'fewshot', 'finetuned', 'grounded' or 'hybrid'")
