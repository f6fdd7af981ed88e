"""``memq ask``: answer one question from the command line."""

from __future__ import annotations

import argparse
import json
import re

from .types import Answer

_ENTITY = re.compile(r"^(?P<mid>[^=]+)=(?P<name>.*)$")


def register(sub: argparse._SubParsersAction) -> None:
    ask = sub.add_parser("ask", help="answer one question")
    ask.add_argument("question")
    ask.add_argument("--entity", action="append", default=[], metavar="ID=NAME",
                     help='a topic entity, e.g. --entity m.03_r3="Jamaica", or a name alone, --entity Jamaica '
                          "(repeatable; left out: the question's entities are linked and printed)")
    add_link_arg(ask)
    ask.add_argument("--memory", help="memory bank directory (default: memory_bank/webqsp)")
    ask.add_argument("--kg", help="RDF file for the embedded store (default: the benchmark KG; GrailQA's own for "
                     "a GrailQA bank)")
    ask.add_argument("--endpoint", help="SPARQL endpoint URL instead of the embedded store")
    ask.add_argument("--planner", choices=("fewshot", "finetuned", "grounded", "hybrid"), default=None)
    ask.add_argument("--adapter", help="LoRA adapter directory for --planner finetuned, grounded or hybrid")
    add_backend_arg(ask)
    add_search_args(ask)
    ask.add_argument("--no-ground", action="store_true", help="turn grounded choice off")
    ask.add_argument("--no-repair", action="store_true", help="turn self-repair off")
    ask.add_argument("--json", action="store_true", help="print the Answer as JSON")
    ask.set_defaults(handler=run)


def add_link_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--entity-index", help="entity index directory of `memq link build` (default: the index of "
                                               "the embedded KG, built once in the memq cache)")


def add_backend_arg(parser: argparse.ArgumentParser) -> None:
    from .plan.base import BACKENDS

    parser.add_argument("--backend", choices=BACKENDS, default=None,
                        help="the planner's LLM runtime (default llamacpp; transformers when llama-cpp-python is "
                             "missing, which the trace records)")


def add_search_args(parser: argparse.ArgumentParser) -> None:
    """The grounded planner's search settings (:class:`memq.plan.grounded.GroundedConfig`), which are also the hybrid
    planner's rescue search."""
    g = "--planner grounded or hybrid (its rescues):"
    parser.add_argument("--beam", type=int, help=f"{g} partial plans kept per step")
    parser.add_argument("--lines", type=int, help=f"{g} best lines searched per partial plan")
    parser.add_argument("--norm", choices=("sum", "mean"), help=f"{g} how partial plans are ranked")
    parser.add_argument("--max-candidates", type=int, help=f"{g} path statements offered per step")
    parser.add_argument("--prune", type=float, help=f"{g} nats below the best line not expanded")
    parser.add_argument("--budget", type=int, help=f"{g} forward passes per search (one planned again counts its "
                                                   "own) after which it goes on with a beam of 1 (0: no budget)")
    parser.add_argument("--prior", type=float, help=f"{g} weight of the question prior on Find lines (0: off)")
    parser.add_argument("--neighbours", type=int, help=f"{g} training questions that vote in the question prior")
    parser.add_argument("--prior-floor", type=float, help=f"{g} added to a statement's support before its log is "
                                                          "taken")
    parser.add_argument("--coverage", type=float, help=f"{g} nats off a Finally line for each topic entity the plan "
                                                       "does not name (0: off)")
    parser.add_argument("--asked-class", type=float, help=f"{g} nats off a Finally line whose answer is not of the "
                                                          "class the question asks for, and off a start from another "
                                                          "class (GrailQA's lines; 0: off)")
    parser.add_argument("--asked-beam", type=int, help=f"{g} when no plan ends naming the class asked for, the beam "
                                                       "of a second search before the class is given up (0: none)")
    parser.add_argument("--asked-directed", action=argparse.BooleanOptionalAction,
                        help=f"{g} when no plan ends naming the class asked for, a search whose Find lines lose "
                             "--asked-class nats where another's values have that class and theirs do not, before "
                             "it is given up")
    parser.add_argument("--asked-redirect", action=argparse.BooleanOptionalAction,
                        help=f"{g} when the best plan ends without naming the class asked for, a search directed to "
                             "it (as --asked-directed's), whose plan is taken only when it names the class")
    parser.add_argument("--check-passes", action=argparse.BooleanOptionalAction,
                        help=f"{g} keep a written 'Make sure ?v is X' line only when some value of the plan so far "
                             "passes it")
    parser.add_argument("--check-values", action=argparse.BooleanOptionalAction,
                        help=f"{g} keep a written 'Make sure ?v is X' line, X an entity, only when X is anywhere in "
                             "the KG a value of what the plan assigns to ?v (default: on)")
    parser.add_argument("--ranker", help=f"{g} the statement ranker's directory, or 'none' for the model alone "
                                         "(default: the committed memory_bank/ranker when there is one)")
    parser.add_argument("--rank-top", type=int, help=f"{g} best-ranked candidates offered to the model per step")
    parser.add_argument("--rank-pool", type=int, help=f"{g} candidates the ranker scores per step")
    parser.add_argument("--rank-weight", type=float, help=f"{g} weight of the ranker's score on Find lines "
                                                          "(0: it only cuts the candidates)")
    parser.add_argument("--unseen-top", type=int, help=f"{g} Find statements no training question gave (the "
                                                       "schema's): -1 compete with the others, 0 only where none "
                                                       "that one gave binds, K the ranker's K best of them besides")
    parser.add_argument("--calibrate", type=float, help=f"{g} weight of each first-step Find line's log-probability "
                                                        "under a question-less prompt, taken off its score (0: off)")
    parser.add_argument("--backtrack", type=int, help=f"{g} searches again, each without the first lines taken before, "
                                                      "when a search ends with no complete plan (0: off)")
    parser.add_argument("--value-finds", action=argparse.BooleanOptionalAction,
                        help=f"{g} while a number or date the question writes waits for its check, a class start, "
                             "and a Find line after it, only where a value that passes one is near (GrailQA's lines)")
    parser.add_argument("--start-lookahead", type=float,
                        help=f"{g} weight of the ranker's logit of the best Find line after each class start "
                             "(GrailQA's lines, a question with no entity; 0: off)")
    parser.add_argument("--superlative-ends", action=argparse.BooleanOptionalAction,
                        help=f"{g} a plan of a question with a superlative word and no number or date ends only "
                             "after a superlative (GrailQA's lines)")
    parser.add_argument("--rescue-hops", action=argparse.BooleanOptionalAction,
                        help=f"{g} a hybrid rescue answers only with a node as many Find steps from the entities as "
                             "the free plan's answer at least (default: on)")
    parser.add_argument("--sorted-answers", action=argparse.BooleanOptionalAction,
                        help=f"{g} a plan answers with the ?variable it sorts only when the question asks for a time "
                             "(default: on)")
    parser.add_argument("--classed-answers", action=argparse.BooleanOptionalAction,
                        help=f"{g} a plan that checks the notable type of a ?variable answers with one whose notable "
                             "type it checks; with GrailQA's lines, one a class line names (default: on)")
    parser.add_argument("--distinct-steps", action=argparse.BooleanOptionalAction,
                        help=f"{g} the lines a partial plan takes are distinct steps: a Find line that differs from a "
                             "better one only in the ?variable it assigns, or in its statement, does not count")
    parser.add_argument("--closed-sorts", action=argparse.BooleanOptionalAction,
                        help=f"{g} each Sort line the plan may take is scored whole, where the model wrote one "
                             "after \"Sort\" (default: on)")


def parse_entities(items: list[str]) -> dict[str, str] | list[str] | None:
    """``--entity`` values: ids with names (``ID=NAME``), names alone, or None when there are none (link them).
    Both kinds at once are refused, naming the first value of the other kind."""
    if not items:
        return None
    out = {}
    names = []
    for item in items:
        m = _ENTITY.match(item)
        if m:
            out[m.group("mid").strip()] = m.group("name").strip().strip('"')
        else:
            names.append(item.strip().strip('"'))
    if out and names:
        raise ValueError(f"--entity takes ids with names (ID=NAME) or names alone, not both: got {names[0]!r} "
                         f"beside {next(iter(out))}={out[next(iter(out))]!r}")
    return out or names


def answer_json(a: Answer) -> dict:
    return {
        "question": a.question,
        "answers": [{"id": i, "name": n} for i, n in a.answers],
        "sparql": a.sparql,
        "plan": [s.text for s in a.plan.steps],
        "plan_dropped": [{"line": line, "reason": r} for line, r in a.plan.dropped],
        "recalled": [{"step": r.step_index + 1, "statement": r.statement.id, "structure": r.statement.structure,
                      "sparql": r.statement.sparql, "description": r.description, "score": round(r.score, 4)}
                     for r in a.recalled],
        "linked": a.trace.links,
        "fallbacks": a.trace.fallbacks,
        "repair_attempts": a.trace.attempts,
        "timings": {k: round(v, 4) for k, v in a.trace.timings.items()},
        "llm_calls": a.trace.llm_calls,
        "backend": a.trace.backend,
        "planning_cost": a.trace.cost,
        "plans_tried": a.trace.plans,
        "ranked": ranked_steps(a.plan),
        "searched": searched_steps(a.plan),
    }


def ranked_steps(plan) -> list[dict]:
    """Each Find step the statement ranker ordered (the grounded planner's, or the hybrid one's rescue): its
    candidates with the ranker's logit, its bonus and the model's log-probability (None: not among the best)."""
    return _searched(plan, "ranked")


def searched_steps(plan) -> list[dict]:
    """Each line search of the grounded planner (or of the hybrid one's rescue), in order (``Plan.searched``)."""
    return _searched(plan, "searched")


def _searched(plan, field: str) -> list[dict]:
    """The plan's grounded-search ``field`` (``ranked``, ``searched``), or its rescue's when it has none: a hybrid
    plan that found nothing was searched again by the grounded planner."""
    return getattr(plan, field) or (getattr(plan.rescue, field) if plan.rescue is not None else [])


SEARCHED_SHOWN = 24  # line searches shown by ``memq ask`` (all of them in ``--json``)


def searched_lines(searched: list[dict]) -> list[str]:
    """The grounded search as ``memq ask`` shows it: each line search (a partial plan, by its last line) with the
    lines the model took after it, each with its log-probability and bonus; a line that could not be used is
    marked. The first ``SEARCHED_SHOWN``, and how many more."""
    out = ["search (each partial plan by its last line, its score, then the lines taken: log-prob + bonus):"]
    for s in searched[:SEARCHED_SHOWN]:
        out.append(f"  [{s['search']}] step {s['step']} after {s['after'] or '(start)'!r} ({s['score']:.2f})")
        out += [f"      {t['llm']:8.2f} {t['bonus']:+7.2f}  {t['line']}" + ("" if t["usable"] else "  (unusable)")
                for t in s["taken"]]
    if len(searched) > SEARCHED_SHOWN:
        out.append(f"  ... {len(searched) - SEARCHED_SHOWN} more line searches (memq ask --json lists them all)")
    return out


def shown_answer(value: str, name: str) -> str:
    """An answer as ``memq ask`` prints it: "Jamaican English (m.01428y)", or the value alone where it has no other
    name (a literal, "1.0"; a node the KG names by its IRI)."""
    return value if not name or name == value else f"{name} ({value})"


def show(a: Answer, gold: list[tuple[str, str]] | None = None) -> str:
    lines = [f"Q: {a.question}"]
    if a.trace.links:
        lines.append("linked:")
        lines += [f"  {x['name']} ({x['id']})  " + (
            f"suggested by similar training questions  support {x['support']:.2f}" if "suggested" in x else
            f"from {x.get('given', x['mention'])!r}  score {x['score']:.3f}"
            + ("  (a second reading: optional)" if x.get("alternative") else "")
            + (f"  (one CVT joins it with {x['coherent']})" if x.get("coherent") else "")
            + (f"  (in {x.get('within_name')} ({x['within']}), named beside it)" if x.get("within") else "")
            + ("  (dropped: a word of the class asked for)" if x.get("class_word") else
               "  (optional: a plan may leave it out)" if x.get("optional") else ""))
            + ("  (not named in the planner's prompt)" if x.get("unprompted") else "") for x in a.trace.links]
    lines.append("plan:")
    lines += [f"  {i + 1}. {s.text}" for i, s in enumerate(a.plan.steps)]
    for line, reason in a.plan.dropped:
        lines.append(f"  (dropped {line!r}: {reason})")
    lines.append("recalled:")
    for r in a.recalled:
        lines.append(f"  step {r.step_index + 1}  {r.score:.3f}  [{r.statement.structure}] {r.description}")
        lines.append("        " + r.statement.sparql.replace("\n", " "))
    lines.append("sparql:")
    lines += ["  " + line for line in a.sparql.strip().splitlines()]
    if a.trace.fallbacks:
        lines.append("fallbacks:")
        lines += [f"  - {f}" for f in a.trace.fallbacks]
    ranked = ranked_steps(a.plan)
    if ranked:
        lines.append("ranked candidates (ranker logit / best model log-prob of its lines), the five best statements:")
        for entry in ranked:
            ahead = " class starts, each by the ranker's best Find line after it" if entry.get("lookahead") else ""
            lines.append(f"  step {entry['step']} ({entry['scored']} scored{ahead})")
            best: dict[str, dict] = {}  # a statement's lines differ only in the variable they assign
            for c in entry["candidates"]:
                b = best.setdefault(c["statement"], dict(c))
                if c["llm"] is not None and (b["llm"] is None or c["llm"] > b["llm"]):
                    b["llm"] = c["llm"]
            lines += [f"    {c['ranker']:7.3f} / " + (f"{c['llm']:8.3f}" if c["llm"] is not None else "       -")
                      + f"  {c['line']}" + (f"  (then: {c['via']})" if c.get("via") else "")
                      for c in list(best.values())[:5]]
    if searched := searched_steps(a.plan):
        lines += searched_lines(searched)
    if a.trace.plans:
        lines.append("plans tried (execution-guided choice):")
        lines += [f"  {p.get('planner') or 'score ' + str(p['score'])}  rows {p['rows']}  "
                  + p["plan"].replace("\n", " / ") for p in a.trace.plans]
    if a.trace.cost:
        costs = {"": a.trace.cost, **{f"{k} ": v for k, v in a.trace.cost.items() if isinstance(v, dict)}}
        for head, cost in costs.items():  # the planner's own cost, then any nested one (the hybrid's rescue)
            flat = "  ".join(f"{k} {v}" for k, v in cost.items() if not isinstance(v, dict))
            if flat:
                lines.append(f"{head}planning cost: {flat}")
    lines.append("answers: " + (", ".join(shown_answer(i, n) for i, n in a.answers) or "(none)"))
    if gold is not None:
        lines.append("gold:    " + ", ".join(shown_answer(i, n) for i, n in gold))
    t = a.trace.timings
    lines.append("time: " + "  ".join(f"{k} {v * 1000:.0f} ms" for k, v in t.items())
                 + f"  llm calls {a.trace.llm_calls}" + (f" ({a.trace.backend})" if a.trace.backend else ""))
    return "\n".join(lines)


def search_flags(args: argparse.Namespace) -> dict:
    """The grounded search settings the flags give (``add_search_args``), by name; those not given are left out."""
    return {k: getattr(args, k) for k in ("beam", "lines", "norm", "max_candidates", "prune", "budget", "prior",
                                            "neighbours", "prior_floor", "coverage", "asked_class", "asked_beam",
                                            "asked_directed", "asked_redirect", "check_passes", "check_values",
                                            "rank_top", "rank_pool", "rank_weight", "unseen_top", "calibrate",
                                            "backtrack", "value_finds", "start_lookahead", "superlative_ends",
                                            "rescue_hops", "sorted_answers", "classed_answers", "distinct_steps",
                                            "closed_sorts")
            if getattr(args, k, None) is not None}


def config_from(args: argparse.Namespace, by_bank: bool = True):
    """The pipeline's config from the command line's flags. ``by_bank``: a GrailQA memory bank
    (:func:`memq.pipeline.config.bank_dataset`: its planner's, or a bank of GrailQA's form) brings GrailQA's
    planner, search settings and distinct nodes (``memq evaluate`` takes them by dataset)."""
    from dataclasses import replace

    from .datasets import DISTINCT_NODES
    from .pipeline import Config
    from .pipeline.config import bank_dataset, search_for
    from .plan.search import GroundedConfig

    config = Config()
    changes = {}
    for key in ("memory", "kg", "endpoint", "planner", "adapter", "backend", "entity_index", "ranker"):
        value = getattr(args, key, None)
        if value and not (key == "planner" and value == "oracle"):
            changes[key] = value
    if getattr(args, "no_ground", False):
        changes["grounded"] = False
    if getattr(args, "no_repair", False):
        changes["repair"] = False
    search = search_flags(args)
    # the bank's dataset's search (the pipeline takes it by the bank's dataset too, memq.pipeline.config.bank_dataset;
    # said here, as memq evaluate --dataset says it), and for GrailQA's form of the schema its planner, distinct nodes
    dataset = bank_dataset(changes.get("memory", config.memory)) if by_bank else None
    base = search_for(dataset)
    if dataset == "grailqa":
        changes["planner_dataset"] = "grailqa"
        changes["distinct_nodes"] = "grailqa" in DISTINCT_NODES
    if search or base != GroundedConfig():
        changes["search"] = replace(base, **search)
    return replace(config, **changes)


def run(args: argparse.Namespace) -> int:
    from .api import answer

    a = answer(args.question, parse_entities(args.entity), config=config_from(args))
    print(json.dumps(answer_json(a), indent=2) if args.json else show(a))
    return 0
