"""Several line searches of the grounded planner in one llama.cpp forward pass each (:func:`run_together`).

The grounded planner keeps a beam of partial plans, and at each step searches the lines of each
(:func:`memq.plan.linesearch.line_search`). The searches are independent, so their forward passes need not wait for
each other: on a CPU a pass reads every weight once however many tokens it evaluates, and one token in each of 3
sequences took 84.8 ms against 54.5 ms for one (the 2-core Intel Xeon, docs/planner.md). Here each search runs in a
sequence of its own of the runner's context (:meth:`memq.llm.kv_state.Runner.logits_many`), and each pass evaluates
the next request of every search not yet done. A search's lines are the ones it finds alone, up to the rounding of a
matrix product over more rows.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

from .kv_state import expand_steps, greedy_steps


def line_end(runner, tok) -> Callable[[list[int]], bool]:
    """Whether a line the model writes greedily has ended: its last new token is EOS or holds a newline."""
    return lambda new: new[-1] == runner.eos or "\n" in tok.decode(new[-1:])


def run_together(lm, searches: list[Generator]) -> list:
    """What each search returns, in order: each is a :func:`memq.plan.linesearch.line_search` generator, whose
    requests (``("expand", ...)``, ``("greedy", ...)``) ``lm`` (a :class:`memq.llm.llamacpp.LlamaCppLLM`) answers.
    At most the runner's sequences run at once; the others wait for one to end."""
    loaded = lm.load()
    runner, ended = loaded.runner, line_end(loaded.runner, loaded.tokenizer)

    def steps(request: tuple) -> Generator:
        if request[0] == "expand":
            return expand_steps(*request[1:])
        ids, max_new_tokens = request[1:]
        return greedy_steps(ids, max_new_tokens, ended, lm.drafter, True, runner.n_ctx, runner.n_batch)

    results: list = [None] * len(searches)
    waiting = list(range(len(searches)))[::-1]
    running: dict[int, tuple] = {}  # sequence -> (search index, kind, its request's steps, their logits request)

    def go_on(seq: int, k: int, answer=None, first: bool = False) -> None:
        """Search ``k`` goes on in sequence ``seq`` from ``answer`` (or starts) until it asks for a forward pass;
        when it ends, the next search waiting takes the sequence."""
        try:
            request = next(searches[k]) if first else searches[k].send(answer)
        except StopIteration as done:
            results[k] = done.value
            running.pop(seq, None)
            if waiting:
                go_on(seq, waiting.pop(), first=True)
            return
        sub = steps(request)
        running[seq] = (k, request[0], sub, next(sub))

    for seq in range(min(runner.sequences, len(searches))):
        go_on(seq, waiting.pop(), first=True)
    while running:
        with runner.lock:
            rows = runner.logits_many({seq: item[3] for seq, item in running.items()})
        for seq, got in rows.items():
            k, kind, sub, _ = running[seq]
            try:
                running[seq] = (k, kind, sub, sub.send(got))
            except StopIteration as done:
                lm.calls += 1
                if kind == "greedy":
                    lm.tokens += len(done.value[0])
                go_on(seq, k, done.value)
    return results
