"""Planner training data: derive plans for a dataset, split train/dev, read and write JSONL.

The dev split is ~10% of a dataset's *training* questions, chosen by a hash
of the question's base id (``WebQTrn-12`` for CWQ's ``WebQTrn-12_ab34...``) and
a fixed seed, so every CWQ question built from one WebQSP question lands on
the same side and adding questions never moves others. Every threshold and
hyper-parameter is tuned on dev; test is only scored.

CWQ's train+dev set holds 9,203 questions built from WebQSP *test* questions
(ids ``WebQTest-N_...``): a planner scored on WebQSP test must not train on
them (``exclude_webqsp_test=True``).

One JSONL line per question::

    {"id": ..., "question": ..., "dataset": ..., "parse_id": ...,
     "entities": [[mid, name], ...], "plan": "Find ...\\nFinally the answer is ?x.",
     "steps": [{"kind": "find", "text": ..., ...}, ...], "statement_ids": [...]}
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memq.errors import MemQError
from memq.files import atomic_path
from memq.types import PlanStep, Statement

from .derive import DERIVE_VERSION, DerivationError, DerivedPlan, derive_plan

logger = logging.getLogger(__name__)

SEED = "memq-plan-v1"
DEV_FRACTION = 0.1
SPLITS = ("train", "dev")
WEBQSP_TEST_PREFIX = "WebQTest-"


def base_id(question_id: str) -> str:
    """``WebQTrn-12_ab34...`` -> ``WebQTrn-12`` (CWQ questions share their WebQSP question's side)."""
    return question_id.split("_", 1)[0]


def split_of(question_id: str, dev_fraction: float = DEV_FRACTION, seed: str | None = None) -> str:
    """``"dev"`` or ``"train"``, deterministic in the question's base id and the seed (``SEED`` when None, read at
    the call: a benchmark that carves dev with another seed sets ``memq.plan.data.SEED`` for its process)."""
    seed = SEED if seed is None else seed
    digest = hashlib.sha256(f"{seed}:{base_id(question_id)}".encode()).digest()
    return "dev" if int.from_bytes(digest[:8], "big") / 2**64 < dev_fraction else "train"


GRAILQA_SYNTHETIC = "grailqa-synthetic"


def grailqa_part(question_id: str) -> str:
    """GrailQA dev's two parts: ``"tune"`` (208 of the 349 questions: settings are chosen here) or ``"report"``
    (141: only scored). Split by the logical-form id (the qid without its last 6 digits), so the paraphrases of
    one question stay together."""
    return "tune" if split_of(str(question_id)[:-6], dev_fraction=0.5) == "dev" else "report"


def _questions(dataset: str, split: str) -> list:
    """The questions of a planner split. WebQSP and CWQ: ``train``/``dev`` carved from the training questions,
    ``test``. GrailQA has a dev set of its own: ``train`` is every train question, ``dev`` the tuning part of GrailQA
    dev and ``test`` its report part (:func:`grailqa_part`). ``grailqa-synthetic`` (train only): the synthetic
    programs (:func:`grailqa_synthetic`)."""
    from memq.datasets import load

    if dataset == GRAILQA_SYNTHETIC:
        if split != "train":
            raise MemQError(f"{GRAILQA_SYNTHETIC} is training data only; got split {split!r}")
        return grailqa_synthetic()
    if dataset == "grailqa":
        if split == "train":
            return load("grailqa", "train")
        part = "tune" if split == "dev" else "report"
        return [q for q in load("grailqa", "dev") if grailqa_part(q.id) == part]
    if split == "test":  # scored only, never trained or tuned on
        return load(dataset, "test")
    return [q for q in load(dataset, "train") if split_of(q.id) == split]


def without_dev(bank, dataset: str):
    """``bank`` without the statements that only ``dataset``'s dev questions (carved from train, :func:`split_of`)
    gave it: a statement another source gives too stays, since a dev question does not bring it. What a run held out
    of dev reads (benchmarks/bench_link.py ``--split dev``, benchmarks/memory_heldout.py)."""
    source = f"{dataset}-train"
    return bank.subset(lambda record, sources: any(s != source for s in sources)
                       or any(split_of(q) == "train" for q in record.statement.question_ids))


def grailqa_synthetic(skipped: list[tuple[str, str]] | None = None, *, named: bool = True) -> list:
    """FlexKBQA's 6,184 synthetic GrailQA programs (``data/grailqa/flexkbqa_synthetic_programs.json.gz``) as
    questions of dataset ``grailqa``, split ``synthetic``: each s-expression turned into GrailQA's SPARQL form
    (:func:`memq.decompose.sexpr.to_sparql`), its mids the topic entities (names from :func:`memq.datasets.mid_names`),
    no answers (an empty tuple). A program that does not convert is skipped, and so is one naming a mid without a
    name when ``named`` (a plan line needs the name; 4,885 of the 6,184 name such a mid): ``(qid, reason)`` is
    appended to ``skipped`` (reasons ``mid-without-name: m.x``, ``bad-s-expression: ...``) and the counts are
    logged. Without ``named`` such a mid is its own name: a statement and the question prior need the query and
    the question only (the memory's ``grailqa-synthetic`` source)."""
    import gzip

    from memq.datasets import GoldParse, GoldQuestion, data_path, mid_names
    from memq.decompose.sexpr import function_of, s_expression_mids, to_sparql

    names = mid_names()
    out: list[GoldQuestion] = []
    reasons: Counter[str] = Counter()
    with gzip.open(data_path("grailqa", "flexkbqa_synthetic_programs.json.gz"), "rt", encoding="utf-8") as fh:
        raw = json.load(fh)
    for r in raw:
        qid, sexpr = str(r["qid"]), r["s_expression"]
        mids = s_expression_mids(sexpr)
        missing = [m for m in mids if not names.get(m)]
        reason = f"mid-without-name: {missing[0]}" if missing and named else None
        if reason is None:
            try:
                sparql = to_sparql(sexpr)
            except ValueError as exc:
                reason = f"bad-s-expression: {exc}"
        if reason is not None:
            reasons[reason.split(":")[0]] += 1
            if skipped is not None:
                skipped.append((qid, reason))
            continue
        parse = GoldParse(qid, sparql, tuple((m, names.get(m) or m) for m in mids), ())
        out.append(GoldQuestion(qid, r["question"], "grailqa", "synthetic", (parse,), function=function_of(sexpr)))
    if reasons:
        logger.info("grailqa synthetic: %d programs read, %d skipped (%s)", len(out),
                                         sum(reasons.values()), ", ".join(f"{k} {n}" for k, n in reasons.items()))
    return out


def template_describe() -> Callable[[Statement], str]:
    """The TemplateDescriber's primary description, cached per statement id."""
    from memq.describe.template import TemplateDescriber

    describer = TemplateDescriber()
    cache: dict[str, str] = {}

    def describe(statement: Statement) -> str:
        if statement.id not in cache:
            cache[statement.id] = describer.describe([statement])[0][0]
        return cache[statement.id]

    return describe


@dataclass
class DataReport:
    """What deriving one split gave: plans, and the questions skipped with reasons."""

    dataset: str
    split: str
    questions: int
    plans: list[DerivedPlan]
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (id, reason, detail)
    excluded: int = 0

    def summary(self) -> dict:
        return {
            "dataset": self.dataset,
            "split": self.split,
            "questions": self.questions,
            "plans": len(self.plans),
            "excluded_webqsp_test": self.excluded,
            "skipped": len(self.skipped),
            "skipped_reasons": dict(Counter(r for _, r, _ in self.skipped).most_common()),
            "skipped_examples": [{"id": i, "reason": r, "detail": d[:200]} for i, r, d in self.skipped[:10]],
            "sha256": data_hash(self.plans),
        }


def derive_split(dataset: str, split: str, describe: Callable[[Statement], str] | None = None, *,
                 exclude_webqsp_test: bool = False, limit: int | None = None,
                 progress: Callable[[Iterable], Iterable] | None = None) -> DataReport:
    """Derive target plans for the ``train``/``dev`` part of a dataset's training questions (or ``test``)."""
    if split not in SPLITS + ("test",):
        raise MemQError(f"unknown planner split {split!r}; expected train, dev or test")
    questions = _questions(dataset, split)
    excluded = 0
    if exclude_webqsp_test:
        kept = [q for q in questions if not q.id.startswith(WEBQSP_TEST_PREFIX)]
        excluded = len(questions) - len(kept)
        questions = kept
    if limit is not None:
        questions = questions[:limit]
    describe = describe or template_describe()
    report = DataReport(dataset, split, len(questions), [], excluded=excluded)
    for q in (progress(questions) if progress else questions):
        try:
            report.plans.append(derive_plan(q, describe))
        except DerivationError as exc:
            report.skipped.append((q.id, exc.reason, str(exc)))
    logger.info("%s/%s: %d plans from %d questions (%d skipped)", dataset, split, len(report.plans),
                report.questions, len(report.skipped))
    return report


# --------------------------------------------------------------------------- JSONL

def to_json(plan: DerivedPlan) -> dict:
    return {
        "id": plan.question_id,
        "question": plan.question,
        "dataset": plan.dataset,
        "parse_id": plan.parse_id,
        "entities": [list(e) for e in plan.entities],
        "plan": plan.text,
        "steps": [{k: v for k, v in asdict(s).items() if v is not None} for s in plan.steps],
        "statement_ids": list(plan.statement_ids),
    }


def from_json(obj: dict) -> DerivedPlan:
    try:
        steps = tuple(PlanStep(**s) for s in obj["steps"])
        return DerivedPlan(obj["id"], obj["question"], obj.get("dataset", ""), obj.get("parse_id", obj["id"]),
                           tuple((m, n) for m, n in obj["entities"]), steps,
                           tuple(obj.get("statement_ids", ())))
    except (KeyError, TypeError, ValueError) as exc:
        raise MemQError(f"bad planner data record {str(obj)[:120]!r}: {exc}") from exc


def write_jsonl(plans: Iterable[DerivedPlan], path: str | Path) -> Path:
    """Write atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for p in plans:
            fh.write(json.dumps(to_json(p), ensure_ascii=False) + "\n")
    return path


def read_jsonl(path: str | Path) -> list[DerivedPlan]:
    path = Path(path)
    if not path.exists():
        raise MemQError(f"planner data file not found: {path}")
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(from_json(json.loads(line)))
                except ValueError as exc:
                    raise MemQError(f"{path}:{n}: not JSON ({exc})") from exc
    return out


def data_hash(plans: Iterable[DerivedPlan]) -> str:
    """sha256 (16 hex) over ids, entities and plan texts: what a planner was trained on."""
    h = hashlib.sha256()
    for p in plans:
        h.update(json.dumps([p.question_id, p.question, [list(e) for e in p.entities], p.text]).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def default_data_path(dataset: str, split: str, exclude_webqsp_test: bool = False) -> Path:
    from memq.llm import cache_root

    suffix = "-no-webqtest" if exclude_webqsp_test else ""
    return cache_root() / "plan_data" / f"{dataset}-{split}{suffix}-v{DERIVE_VERSION}.jsonl"


def load_split(dataset: str, split: str, *, exclude_webqsp_test: bool = False,
               rebuild: bool = False) -> list[DerivedPlan]:
    """Derived plans for a split, from the cache file (derived and written on first use)."""
    path = default_data_path(dataset, split, exclude_webqsp_test)
    if path.exists() and not rebuild:
        return read_jsonl(path)
    report = derive_split(dataset, split, exclude_webqsp_test=exclude_webqsp_test)
    write_jsonl(report.plans, path)
    return report.plans
