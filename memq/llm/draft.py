"""Draft tokens for speculative greedy decoding: an n-gram model of the plans a planner was trained on.

    drafter = NgramDrafter([tokenizer(p)["input_ids"] for p in plan_texts], eos=eos_id)
    drafter.draft(context_ids, k=6)          # up to k token ids that probably come next

Plans are formulaic (``Find the ... of the person Nina Dobrev, assign it to ?x.`` / ``Finally the answer is
?x.``), so a cheap guess of the next tokens is often right. :meth:`memq.llm.llamacpp.LlamaCppLLM.generate`
evaluates the current token and the draft in one forward pass and keeps the drafted tokens up to the
first one that greedy decoding would not have chosen: the output is the greedy output, only fewer passes
are made (on one CPU thread a pass over 8 tokens costs about 2.3 passes over one, and a pass keeps about
4 tokens of WebQSP dev plans).

A draft is the model's most likely chain: the next token after the longest context of up to
:data:`ORDER` tokens (at least :data:`MIN_CONTEXT`) seen in the training plans, while that token follows
the context at least :data:`MIN_SHARE` of the time. When the model has no guess, the draft copies what
followed the last earlier occurrence of the context's final tokens in the prompt or in what was generated
(entity names, which training plans do not hold). The settings are the best of a grid replayed on the first 200 WebQSP
dev plans (``benchmarks/bench_draft.py``, ``benchmarks/results/bench_draft.json``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..files import write_atomic

ORDER = 5  # longest context (tokens) the n-gram model looks at
MIN_CONTEXT = 1  # shortest context it uses
MIN_SHARE = 0.7  # a drafted token follows its context in at least this share of the training plans
DRAFT = 7  # tokens drafted per pass
FORMAT = 1  # of a saved drafter (NgramDrafter.save)
MAX_TEXTS = 5000  # texts a planner's drafter is built from (CWQ has 26,747 training plans; 5,000 build in ~1 s)


class NgramDrafter:
    """Greedy drafts from an n-gram model over token sequences (each ended by ``eos`` when given)."""

    def __init__(self, sequences: Iterable[Sequence[int]], eos: int | None = None, *, order: int = ORDER,
                 min_context: int = MIN_CONTEXT, min_share: float = MIN_SHARE) -> None:
        if not 1 <= min_context <= order:
            raise ValueError(f"need 1 <= min_context <= order, got min_context={min_context}, order={order}")
        if not 0.0 < min_share <= 1.0:
            raise ValueError(f"min_share must be in (0, 1], got {min_share}")
        self.order, self.min_context, self.min_share = order, min_context, min_share
        counts: Counter = Counter()
        self.sequences = 0
        for seq in sequences:
            seq = list(seq) + ([eos] if eos is not None else [])
            self.sequences += 1
            for n in range(min_context, order + 1):
                for i in range(len(seq) - n):
                    counts[tuple(seq[i:i + n + 1])] += 1
        totals: Counter = Counter()
        best: dict[tuple, tuple[int, int]] = {}
        for gram, c in counts.items():
            context = gram[:-1]
            totals[context] += c
            if c > best.get(context, (0, 0))[1] or (c == best[context][1] and gram[-1] < best[context][0]):
                best[context] = (gram[-1], c)
        # context -> its most frequent next token, when that token is frequent enough to be worth drafting
        self.table = {ctx: tok for ctx, (tok, c) in best.items() if c >= min_share * totals[ctx]}

    def __len__(self) -> int:
        return len(self.table)

    @staticmethod
    def key(texts: Sequence[str], tokenizer: str, eos: int | None, order: int = ORDER, min_context: int = MIN_CONTEXT,
            min_share: float = MIN_SHARE) -> str:
        """A cache key for the drafter built from ``texts`` tokenized by ``tokenizer`` (a name that changes with it)."""
        blob = json.dumps([FORMAT, tokenizer, eos, order, min_context, min_share, list(texts)])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def save(self, path: str | Path) -> None:
        """Write the model as JSON (atomically). A saved drafter only ever changes speed: every drafted token is
        checked against the model's own choice before it is kept."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": FORMAT, "order": self.order, "min_context": self.min_context, "min_share": self.min_share,
                "sequences": self.sequences, "table": [[*ctx, tok] for ctx, tok in self.table.items()]}
        write_atomic(path, json.dumps(data, separators=(",", ":")).encode())

    @classmethod
    def load(cls, path: str | Path) -> NgramDrafter | None:
        """A drafter saved by :meth:`save`, or None when there is none or it is not one."""
        try:
            data = json.loads(Path(path).read_text())
            if data.get("format") != FORMAT:
                return None
            drafter = cls.__new__(cls)
            drafter.order, drafter.min_context = int(data["order"]), int(data["min_context"])
            drafter.min_share, drafter.sequences = float(data["min_share"]), int(data["sequences"])
            drafter.table = {tuple(int(t) for t in row[:-1]): int(row[-1]) for row in data["table"]}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return drafter

    def draft(self, context: Sequence[int], k: int = DRAFT) -> list[int]:
        """Up to ``k`` tokens likely to follow ``context`` (possibly none)."""
        out = self._model(context, k)
        return out if out else _lookup(context, k, self.min_context)

    def _model(self, context: Sequence[int], k: int) -> list[int]:
        tail = list(context[-self.order:])
        out: list[int] = []
        while len(out) < k:
            for n in range(min(self.order, len(tail)), self.min_context - 1, -1):
                token = self.table.get(tuple(tail[-n:]))
                if token is not None:
                    break
            else:
                return out
            out.append(token)
            tail = tail[1:] + [token] if len(tail) >= self.order else tail + [token]
        return out


def _lookup(context: Sequence[int], k: int, shortest: int) -> list[int]:
    """What followed the last earlier occurrence of the context's final 3 (else 2, ...) tokens."""
    for n in range(3, shortest - 1, -1):
        if len(context) <= n:
            continue
        key = list(context[-n:])
        for i in range(len(context) - n - 1, -1, -1):
            if list(context[i:i + n]) == key:
                return list(context[i + n:i + n + k])
    return []
