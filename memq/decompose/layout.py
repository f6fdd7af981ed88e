"""Where a query's pieces go in a decomposition: the main path from the topic to the answer, and class checks
placed after the statement that reaches their node. Only attributes of the split's units and bound statements are
read (:mod:`memq.decompose.split`), so this module imports nothing of it."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..sparql.model import Term, Var

__all__ = ["distances", "main_path", "place_classes"]


def place_classes(bounds: list, classes: list) -> list:
    """Each class check right after the first statement that reaches its node (at the end if none does)."""
    out = list(bounds)
    for c in classes:
        node = c.binding["?entity1"]
        at = next((i for i, b in enumerate(out) if b.statement.structure != "class" and any(
            v == node for k, v in b.binding.items() if not k.startswith("?cvt"))), None)
        if at is None:
            out.append(c)
        else:
            while at + 1 < len(out) and out[at + 1].statement.structure == "class":
                at += 1
            out.insert(at + 1, c)
    return out


def distances(units: list, start: Term) -> dict[Term, int]:
    adj: dict[Term, list[Term]] = {}
    for u in units:
        for a in u.ends:
            for b in u.ends:
                if a != b:
                    adj.setdefault(a, []).append(b)
    dist = {start: 0}
    queue = deque([start])
    while queue:
        n = queue.popleft()
        for m in adj.get(n, ()):
            if m not in dist:
                dist[m] = dist[n] + 1
                queue.append(m)
    return dist


def main_path(units: list, topic: Term | None, answer: Var) -> list[tuple[object, Term, Term]]:
    """Units on a shortest path from the topic to the answer: (unit, source end, target end)."""
    if topic is None:
        return []
    dist = distances(units, answer)
    if topic not in dist:
        return []
    path: list[tuple[object, Term, Term]] = []
    node, used = topic, set()
    far = 1 << 30
    while node != answer:
        step = next((u for u in sorted(units, key=lambda u: u.order) if id(u) not in used and node in u.ends
                     and any(dist.get(e, far) == dist[node] - 1 for e in u.ends)), None)
        if step is None:
            break
        used.add(id(step))
        target = next(e for e in step.ends if dist.get(e, far) == dist[node] - 1)
        path.append((step, node, target))
        node = target
    return path
