"""How many threads llama.cpp runs on: every CPU while no other process wants one, fewer when others do.

ggml's threads meet at a barrier after every operation of a forward pass. On an idle machine more threads make a
pass faster: on 2 cores, Qwen2.5-Coder-0.5B (f16) evaluates 8 tokens in 95 ms on 2 threads against 166 ms on 1,
and the first 20 WebQSP test questions spend 37 s in llama.cpp against 59 s (the same passes, the same plans).
But a thread that another process keeps off its core holds up the others at every barrier: with one busy process
beside it, the same 2 tokens took 232 ms on 2 threads against 101 ms on 1, and on other machines a token has
taken seconds. So a fixed count is either slow alone or slow when shared.

:class:`ThreadGovernor` measures, every ``interval`` seconds, how much CPU the *other* processes used since the
last look (``/proc/stat``'s busy time less this process's and its children's, ``/proc/<pid>/stat``), and gives
llama.cpp the CPUs they left free: a core counts as taken when others used more than a quarter of one. It starts
at one fewer than the CPUs (memq's fixed default before) until its first look. Where ``/proc`` cannot be read
(not Linux) it stays there, and says why (:attr:`ThreadGovernor.note`).

    governor = ThreadGovernor(cpus=2)
    governor.update()          # None, or the new thread count when it changed
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from .base import LLMError

TAKEN = 0.25  # a core counts as taken when other processes used more than this share of it
INTERVAL = 0.5  # seconds between looks


@dataclass(frozen=True)
class Sample:
    """One look: the machine's busy and total CPU ticks (all cores), this process tree's ticks, the CPUs, and the
    ids of the children counted in ``ours``."""

    busy: int
    total: int
    ours: int
    cores: int
    children: frozenset[int] = frozenset()


def allowed_cpus() -> set[int]:
    """The ids of the CPUs this process may run on (its affinity), or an empty set where the OS does not say."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set()


def usable_cpus() -> int:
    """How many CPUs this process may run on (its affinity where the OS tells it), at least one."""
    return max(1, len(allowed_cpus()) or os.cpu_count() or 1)


def _ticks(stat: str, waited: bool = False) -> tuple[int, int]:
    """(ppid, utime + stime) from the text of ``/proc/<pid>/stat`` (the name may hold spaces and parentheses);
    ``waited`` adds the ticks of its children that ended and were waited for (cutime + cstime)."""
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[1]), sum(int(v) for v in fields[11:15 if waited else 13])


def read_sample(children: frozenset[int] | None = None, proc: str = "/proc") -> Sample:
    """The busy and total ticks of the CPUs this process may run on (their lines of ``/proc/stat``; the machine's
    where the OS does not say which), and those of this process and its children; OSError or ValueError when
    ``/proc`` does not hold them. ``children``: the child processes known from an earlier look, read alone; None:
    all of ``/proc`` is scanned for them (about a millisecond per hundred processes)."""
    with open(f"{proc}/stat") as f:
        lines = f.read().splitlines()
    per_cpu = {int(line.split()[0][3:]): line for line in lines if line.startswith("cpu") and line[3:4].isdigit()}
    mine = [per_cpu[c] for c in sorted(allowed_cpus() & set(per_cpu))]  # only the CPUs this process may run on
    busy = total = 0
    for line in mine or lines[:1]:  # else the machine's total line
        values = [int(v) for v in line.split()[1:9]]  # user nice system idle iowait irq softirq steal
        busy += sum(values) - values[3] - values[4]
        total += sum(values)
    cores = len(mine) or len(per_cpu)
    me = os.getpid()
    with open(f"{proc}/{me}/stat") as f:
        ours = _ticks(f.read(), waited=True)[1]
    found = set()
    pids = children if children is not None else (int(n) for n in os.listdir(proc) if n.isdigit())
    for pid in pids:  # children (the embedded store's timeout worker) work for this process
        if pid == me:
            continue
        try:
            with open(f"{proc}/{pid}/stat") as f:
                parent, ticks = _ticks(f.read())
        except (OSError, ValueError):  # gone since listed
            continue
        if parent == me:
            ours += ticks
            found.add(pid)
    return Sample(busy, total, ours, max(1, cores), frozenset(found))


def threads_left(cpus: int, others: float) -> int:
    """The threads to run on ``cpus`` CPUs when other processes use ``others`` cores: a core counts as taken
    once they used more than :data:`TAKEN` of it; at least one."""
    taken = max(0, math.ceil(others - TAKEN))
    return max(1, min(cpus, cpus - taken))


class ThreadGovernor:
    """The thread count for llama.cpp, looked at again at most every ``interval`` seconds (:func:`threads_left`
    of what other processes used since the last look). A look reads the children it knows; when others seem to
    have used more than :data:`TAKEN` of a core it scans for new ones before it believes so (a child started
    since, the embedded store's worker, works for this process); a window in which a child was found is not
    judged, as the child's ticks since it began are in it. ``sample`` and ``clock`` are for tests.
    """

    def __init__(self, cpus: int | None = None, interval: float = INTERVAL,
                 sample: Callable[[frozenset[int] | None], Sample] = read_sample,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cpus = cpus or usable_cpus()
        if self.cpus < 1:
            raise ValueError(f"cpus must be >= 1, got {self.cpus}")
        if not interval > 0:
            raise ValueError(f"interval must be > 0, got {interval!r}")
        self.threads = max(1, self.cpus - 1)
        self.others = None  # cores the other processes used in the last window (None before the first look)
        self.note = ""  # why the count is fixed, when /proc cannot be read
        self.interval = interval
        self._sample, self._clock = sample, clock
        self._last = self._look()
        self._at = clock()

    def _look(self, children: frozenset[int] | None = None) -> Sample | None:
        try:
            return self._sample(children)
        except (OSError, ValueError, IndexError) as exc:
            self.note = f"{self.threads} thread(s) of {self.cpus}, fixed: CPU use is not readable here ({exc})"
            return None

    def update(self) -> int | None:
        """The new thread count if it changed since the last call, else None."""
        now = self._clock()
        if self._last is None or now - self._at < self.interval:
            return None
        old = self._last
        new = self._look(old.children)
        if new is not None and self._others(old, new) > TAKEN:
            new = self._look()  # a new child, or really another process: scan
        if new is None:
            return None
        self._last, self._at = new, now
        others = self._others(old, new)
        if others < 0 or new.children - old.children:  # a new child's ticks, since it began, are in this window
            return None
        self.others = others
        threads = threads_left(self.cpus, others)
        if threads == self.threads:
            return None
        self.threads = threads
        return threads

    @staticmethod
    def _others(old: Sample, new: Sample) -> float:
        """Cores the other processes used between two looks (-1 when no time passed)."""
        total = new.total - old.total
        if total <= 0:
            return -1.0
        return max(0.0, (new.busy - old.busy) - (new.ours - old.ours)) / total * new.cores

    def describe(self) -> str:
        """One line for traces and /health."""
        if self.note:
            return self.note
        seen = "not yet measured" if self.others is None else f"other processes used {self.others:.2f} cores"
        return f"{self.threads} thread(s) of {self.cpus} ({seen})"


def note_threads(plan, lm, before: dict[int, int]) -> None:
    """Into ``plan`` (its ``cost`` and ``notes``): the passes it ran on each thread count since ``before`` (``lm``'s
    ``thread_passes`` then; llama.cpp with a governed count), and a note when some ran on fewer than the CPUs
    because other processes wanted them."""
    after = getattr(lm, "thread_passes", {})
    used = {n: after[n] - before.get(n, 0) for n in sorted(after) if after[n] > before.get(n, 0)}
    if not used:
        return
    plan.cost["llm_threads"] = " ".join(f"{k}x{n}" for n, k in used.items())  # "3x1 6x2": 3 passes on 1 thread
    governor = lm.governor  # passes are counted per thread count only when it is governed
    fewer = sum(k for n, k in used.items() if n < governor.cpus)
    if fewer:
        plan.notes.append(f"llama.cpp ran {fewer} of {sum(used.values())} passes on fewer threads than the "
                          f"{governor.cpus} CPUs: {governor.describe()}")


def env_threads() -> int | None:
    """``$MEMQ_LLAMA_THREADS`` as a thread count (None when unset); a value that is not a positive int is refused."""
    value = os.environ.get("MEMQ_LLAMA_THREADS")
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise LLMError(f"MEMQ_LLAMA_THREADS must be a positive integer, got {value!r}")
    return int(value)


def default_threads() -> int:
    """``$MEMQ_LLAMA_THREADS`` when set, else one thread fewer than the CPUs, at least one: the count a context
    that is not governed (the describer's parallel decoding) runs on, and where a governed one starts.

    ggml's threads meet at spin barriers after every operation: when another process takes a core, a
    thread that loses it stalls the others, and on 2 busy cores a token took 5-7 s with 2 threads against
    75 ms with 1 (measured on one machine). One core left free keeps a shared machine's worst case close to its
    best; :mod:`memq.llm.threads` takes that core back while no other process wants it."""
    return env_threads() or max(1, usable_cpus() - 1)
