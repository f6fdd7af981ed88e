"""Best-first search over a prefix tree of candidate lines: the k likeliest lines under a language model.

The grounded planner (:mod:`memq.plan.grounded`) offers the model a set of
candidate step lines (token ids). Scoring each one in full costs one forward
pass over all of its tokens, which on a 2-core CPU is about 0.5 s per
candidate; a step can have a hundred. Instead the candidates are put in a
prefix tree (trie) and searched best-first:

* a partial line's score is the sum of its tokens' log-probabilities. Each
  token's log-probability is <= 0, so a partial line's score bounds every line
  below it and the search finds the exact k best lines (summed log-probability);
* one forward pass evaluates a whole chain of tokens with one child each and
  then gives the log-probabilities of every child of the node where the chain
  branches; a forward pass is spent only where the lines differ;
* a candidate may carry a ``bonus`` <= 0 (the grounded planner's question
  prior, its ranker, entity coverage), added to its score. A partial line is
  ranked by its log-probability plus the highest bonus of a candidate below
  it: that still bounds every line below it (A* with an admissible bound), so
  the search stays exact, and a branch whose candidates all carry a low bonus
  waits until its bound is reached, where it used to be expanded first when the
  model liked its first tokens;
* branches more than ``prune`` nats below the best complete line (an open one
  only once the caller finds it usable) are not expanded (the beam threshold
  of speech decoders), and at most ``max_passes`` forward passes are spent.

A candidate may be *open*: a line start (``Make sure``) whose rest the model
writes greedily (:meth:`LineModel.greedy`); it is completed when the search
reaches it.

The model is anything with the small :class:`LineModel` protocol
(:class:`memq.llm.llamacpp.LlamaCppLLM` has it).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Generator, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np


class LineModel(Protocol):
    def expand(self, ids: list[int], first: int, children: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(log p of ``ids[first:]`` each given what precedes it, log p of each of ``children`` after ``ids``)."""
        ...

    def greedy(self, ids: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
        """Greedy continuation of ``ids`` to the end of the line (newline or EOS included), with log p of each token."""
        ...


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    ends: list[int] = field(default_factory=list)  # indexes of candidates that end here
    bonus: float = -math.inf  # the highest bonus of a candidate at or below this node
    later: list = field(default_factory=list)  # deferred candidates below this node, made when it is reached


@dataclass(frozen=True)
class Scored:
    """One candidate line as found: its index, the tokens of the whole line, the log-probability of each,
    the candidate's bonus, and whether it is a usable line of a step found before (:func:`best_lines`' ``same``)."""

    index: int
    ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    bonus: float = 0.0
    same_step: bool = False

    @property
    def logprob(self) -> float:
        return float(sum(self.logprobs))

    @property
    def score(self) -> float:
        """What the search ranks by: the summed log-probability plus the bonus."""
        return self.logprob + self.bonus


@dataclass
class SearchCost:
    passes: int = 0  # forward passes (one per expand / greedy token)
    tokens: int = 0  # tokens whose log-probability was computed


def best_lines(model: LineModel, prefix: list[int], candidates: Sequence[Sequence[int]], k: int,
               **options) -> list[Scored]:
    """The ``k`` candidate lines with the highest score after ``prefix``, best first (:func:`line_search`, whose
    requests ``model`` answers one at a time)."""
    return answer(model, line_search(prefix, candidates, k, **options))


def answer(model: LineModel, search: Generator) -> list[Scored]:
    """Runs one :func:`line_search`, answering each of its requests with ``model``."""
    try:
        request = next(search)
        while True:
            request = search.send(ask(model, request))
    except StopIteration as done:
        return done.value


def ask(model: LineModel, request: tuple):
    """``model``'s answer to one request of :func:`line_search`: ``("expand", ids, first, children)`` or
    ``("greedy", ids, max_new_tokens)``."""
    return model.expand(*request[1:]) if request[0] == "expand" else model.greedy(*request[1:])


def best_lines_together(model: LineModel, searches: Sequence[Generator]) -> list[list[Scored]]:
    """Several :func:`line_search` at once, each one's lines as :func:`best_lines` would find them: with a model that
    answers several requests in one forward pass (``model.together``, :meth:`memq.llm.llamacpp.LlamaCppLLM.together`,
    and ``model.sequences`` > 1), each pass takes the next request of every search not yet done; else one search
    after another."""
    together = getattr(model, "together", None)
    if together is None or len(searches) < 2 or getattr(model, "sequences", 1) < 2:
        return [answer(model, search) for search in searches]
    return together(list(searches))


def line_search(prefix: list[int], candidates: Sequence[Sequence[int]], k: int, *,
                open_ends: Sequence[bool] = (), bonus: Sequence[float] = (), prune: float = 8.0,
                max_passes: int = 64, max_new_tokens: int = 48, cost: SearchCost | None = None,
                usable: Callable[[Scored], bool] | None = None,
                deferred: Sequence[tuple[Sequence[int], Callable[[], list[tuple[Sequence[int], float]]]]] = (),
                same: Callable[[int], Hashable] | None = None) -> Generator[tuple, object, list[Scored]]:
    """The ``k`` candidate lines with the highest score (summed log-probability plus bonus) after ``prefix``,
    best first. A generator: it yields each forward pass it needs as a request (``("expand", ids, first,
    children)`` or ``("greedy", ids, max_new_tokens)``, the :class:`LineModel` calls), is sent the answer, and
    returns the lines (:func:`best_lines` and :func:`best_lines_together` run it).

    ``usable(line)``: whether the caller can use a complete line (an open line the model completed may not parse).
    The search then stops at the ``k`` best usable lines and also returns the unusable ones it found before them
    (the caller sees every line it paid for); without it every line counts. The first line found sets the ``prune``
    threshold, unless it is an open line the caller cannot use.

    ``deferred``: ``(path, make)`` pairs for candidates that cost something to make (the grounded planner's Find
    lines, which the statement ranker scores first). Each is made only when the search reaches ``path``, the
    tokens every one of them starts with: ``make()`` returns them as ``(ids, bonus)``, and they take the next
    indexes, after the candidates and those made before. Until then a bonus of 0 bounds them, so the search is
    as exact as with the candidates given at once.

    ``open_ends[i]``: candidate ``i`` is a line start the model completes greedily (its score then includes
    the greedy tokens). ``bonus[i]`` (<= 0, default 0) is added to candidate ``i``'s score. Candidates must be
    non-empty; two equal candidates are two lines.

    ``same(i)``: candidate ``i``'s step (any hashable). A usable line whose step a line found before it has counts
    no more, so the search goes on to ``k`` distinct steps; it is still returned, marked ``same_step`` (the caller
    keeps each step's first).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if len(bonus) > len(candidates):
        raise ValueError(f"{len(bonus)} bonuses for {len(candidates)} candidates")
    bonus = [float(b) for b in bonus] + [0.0] * (len(candidates) - len(bonus))
    for i, b in enumerate(bonus):
        if not b <= 0:
            raise ValueError(f"bonus {i} is {b!r}; a bonus must be <= 0 to keep the search exact")
    cost = cost if cost is not None else SearchCost()
    opens = list(open_ends) + [False] * (len(candidates) - len(open_ends))
    root = _Node()

    def insert(node: _Node, tokens: Sequence[int], b: float) -> _Node:
        node.bonus = max(node.bonus, b)
        for t in tokens:
            node = node.children.setdefault(int(t), _Node())
            node.bonus = max(node.bonus, b)
        return node

    for i, cand in enumerate(candidates):
        if not cand:
            raise ValueError(f"candidate {i} is empty")
        insert(root, cand, bonus[i]).ends.append(i)
    for path, make in deferred:
        if not path:
            raise ValueError("a deferred path must not be empty")
        insert(root, path, 0.0).later.append(make)

    def fill(node: _Node, path: list[int]) -> bool:
        """The deferred candidates below ``node`` made now (True if it had any): its bound is then theirs."""
        if not node.later:
            return False
        for make in node.later:
            for ids, b in make():
                if list(ids[:len(path)]) != path or len(ids) == len(path):
                    raise ValueError(f"a deferred candidate {list(ids)} does not continue its path {path}")
                if not b <= 0:
                    raise ValueError(f"deferred bonus {b!r}; a bonus must be <= 0 to keep the search exact")
                bonus.append(float(b))
                opens.append(False)
                insert(node, ids[len(path):], float(b)).ends.append(len(bonus) - 1)
        node.later = []
        below, node.bonus = [node], -math.inf
        while below:  # the highest bonus below, now that no deferred bound of 0 stands for them
            n = below.pop()
            node.bonus = max([node.bonus, *(bonus[i] for i in n.ends)])
            below.extend(n.children.values())
        return True

    found: list[Scored] = []
    tick = itertools.count()
    # entries: (-bound, tick, a trie node with its path and the path's log-probs | a complete line). A node's bound
    # is its path's log-probability plus the highest bonus below it: no line below scores more
    heap: list = [(-root.bonus, next(tick), (root, [], []))]
    best = None
    passes_before = cost.passes  # ``cost`` may add up several searches; ``max_passes`` is for this one
    counted = 0  # the usable lines found
    counted_same: set = set()  # their ``same`` keys
    while heap and counted < k and cost.passes - passes_before < max_passes:
        neg, _, item = heapq.heappop(heap)
        if best is not None and -neg < best - prune:
            break
        if isinstance(item, Scored):  # complete, and no entry left scores higher: it is the next best line
            ok = usable is None or bool(usable(item))
            if ok and same is not None:  # a line the same as one counted before is marked and does not count again
                step = same(item.index)
                if step in counted_same:
                    ok, item = False, replace(item, same_step=True)
                counted_same.add(step)
            found.append(item)
            counted += ok
            if best is None and (ok or not opens[item.index]):  # an open line sets the bound once found usable
                best = item.score
            continue
        node, path, lps = item
        # walk the chain of single children: one forward pass scores it and branches at its end
        chain_start = len(path)
        made = fill(node, path)
        while len(node.children) == 1 and not node.ends:
            (t, node), = node.children.items()
            path = path + [t]
            made = fill(node, path) or made
        if made and sum(lps) + node.bonus < -neg:  # bounded by 0 until made: back in line with its own bound
            heapq.heappush(heap, (-(sum(lps) + node.bonus), next(tick), item))
            continue
        children = sorted(node.children)
        ids = prefix + path
        if chain_start < len(path) or children:  # the token into the popped node was scored at its parent
            chain_lp, child_lp = yield ("expand", ids, len(prefix) + chain_start, children)
            cost.passes += 1
            cost.tokens += len(chain_lp) + len(children)
            lps = lps + [float(x) for x in chain_lp]
        else:
            child_lp = np.zeros(0)
        score = float(sum(lps))
        for i in node.ends:
            if opens[i]:
                new, new_lp = yield ("greedy", ids, max_new_tokens)
                cost.passes += len(new)
                cost.tokens += len(new)
                line = Scored(i, tuple(path + new), tuple(lps + list(new_lp)), bonus[i])
            else:
                line = Scored(i, tuple(path), tuple(lps), bonus[i])
            heapq.heappush(heap, (-line.score, next(tick), line))
        for t, lp in zip(children, child_lp, strict=True):
            child = node.children[t]
            heapq.heappush(heap, (-(score + float(lp) + child.bonus), next(tick),
                                  (child, path + [t], lps + [float(lp)])))
    found.sort(key=lambda s: -s.score)
    return found
