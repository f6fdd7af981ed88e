"""llama.cpp's thread count (memq.llm.threads): every CPU while other processes leave them idle, fewer when not."""

import os
from types import SimpleNamespace

import pytest

from memq.llm.kv_state import Runner
from memq.llm.threads import Sample, ThreadGovernor, note_threads, read_sample, threads_left
from memq.types import Plan


@pytest.mark.parametrize(("cpus", "others", "threads"), [
    (2, 0.0, 2), (2, 0.2, 2), (2, 0.3, 1), (2, 1.0, 1), (2, 2.0, 1),  # never fewer than one
    (8, 0.1, 8), (8, 1.2, 7), (8, 1.3, 6), (8, 3.0, 5), (1, 0.0, 1), (1, 5.0, 1)])
def test_a_core_counts_as_taken_once_others_use_a_quarter_of_it(cpus, others, threads):
    assert threads_left(cpus, others) == threads


class Machine:
    """A scripted /proc: each window, the other processes', this process's and its children's busy ticks, on
    ``cores`` cores. A look given the known children reads only those; one given None scans for them all."""

    def __init__(self, cores=2):
        self.busy = self.total = self.ours = 0
        self.cores = cores
        self.children: dict[int, int] = {}  # pid -> ticks
        self.scans = 0

    def run(self, seconds, others, ours, child=None, child_cores=0.0):  # cores busy, at 100 ticks a second
        self.busy += round((others + ours + child_cores) * 100 * seconds)
        self.ours += round(ours * 100 * seconds)
        self.total += round(self.cores * 100 * seconds)
        if child is not None:
            self.children[child] = self.children.get(child, 0) + round(child_cores * 100 * seconds)

    def sample(self, known=None):
        self.scans += known is None
        pids = set(self.children) if known is None else set(known) & set(self.children)
        return Sample(self.busy, self.total, self.ours + sum(self.children[p] for p in pids), self.cores,
                      frozenset(pids))


def test_the_governor_gives_back_the_core_no_other_process_wants():
    machine, now = Machine(), [0.0]
    governor = ThreadGovernor(cpus=2, interval=0.5, sample=machine.sample, clock=lambda: now[0])
    assert governor.threads == 1 and governor.others is None  # one fewer than the CPUs until it has looked
    assert "not yet measured" in governor.describe()
    machine.run(2.0, others=0.0, ours=1.0)  # the model loads
    now[0] = 2.0
    assert governor.update() == 2 and governor.others == 0.0  # this process's own work does not count
    machine.run(0.3, others=1.0, ours=1.0)
    now[0] = 2.3
    assert governor.update() is None and governor.threads == 2  # looked at again only after the interval
    machine.run(0.3, others=1.0, ours=1.0)
    now[0] = 2.6
    assert governor.update() == 1 and governor.others == pytest.approx(1.0)  # another process took a core
    assert "other processes used 1.00 cores" in governor.describe()
    machine.run(1.0, others=0.5, ours=1.0)
    now[0] = 3.6
    assert governor.update() is None and governor.threads == 1  # half a core is still taken
    machine.run(1.0, others=0.05, ours=2.0)
    now[0] = 4.6
    assert governor.update() == 2


def test_a_child_process_works_for_this_one_and_is_found_when_it_starts():
    machine, now = Machine(), [0.0]
    governor = ThreadGovernor(cpus=2, interval=0.5, sample=machine.sample, clock=lambda: now[0])
    machine.run(1.0, others=0.0, ours=1.0)
    now[0] = 1.0
    assert governor.update() == 2 and machine.scans == 1  # the first look scanned; this one read what it knew
    machine.run(1.0, others=0.0, ours=0.5, child=77, child_cores=0.8)  # the store's worker starts and works
    now[0] = 2.0
    assert governor.update() is None and governor.threads == 2 and machine.scans == 2  # found: not judged
    machine.run(1.0, others=0.0, ours=0.5, child=77, child_cores=0.8)
    now[0] = 3.0
    assert governor.update() is None and governor.others == 0.0 and machine.scans == 2  # known: counted as ours
    machine.run(1.0, others=0.9, ours=1.0, child=77, child_cores=0.1)
    now[0] = 4.0
    assert governor.update() == 1 and machine.scans == 3  # another process: scanned, then believed


def test_where_cpu_use_cannot_be_read_the_count_stays_fixed_and_says_why():
    def unreadable(known=None):
        raise OSError("no /proc/stat")

    governor = ThreadGovernor(cpus=4, interval=0.01, sample=unreadable, clock=lambda: 100.0)
    assert governor.update() is None and governor.threads == 3
    assert governor.describe() == "3 thread(s) of 4, fixed: CPU use is not readable here (no /proc/stat)"
    with pytest.raises(ValueError, match="interval must be > 0, got 0"):
        ThreadGovernor(cpus=2, interval=0, sample=Machine().sample)


def _stat(pid, name, ppid, utime, stime, cutime=0, cstime=0):
    return (f"{pid} ({name}) S {ppid} 1 1 0 -1 4194560 100 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0 "
            "100 1000 10 18446744073709551615\n")


def test_this_process_and_its_children_count_as_ours(tmp_path, monkeypatch):
    monkeypatch.setattr("memq.llm.threads.allowed_cpus", lambda: {0, 1, 5})
    me = os.getpid()
    (tmp_path / "stat").write_text("cpu  700 10 90 1000 50 0 0 0 0 0\ncpu0 350 5 45 500 25 0 0 0 0 0\n"
                                   "cpu1 350 5 45 500 25 0 0 0 0 0\nintr 1\n")
    files = {me: _stat(me, "python -m (memq) x", 1, 40, 10, cutime=3, cstime=2),
             me + 1: _stat(me + 1, "memq-oxigraph-worker", me, 7, 1),  # a child: ours
             me + 2: _stat(me + 2, "other", 1, 500, 100)}  # not ours
    for pid, text in files.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(text)
    (tmp_path / str(me + 3)).mkdir()  # a process gone since listed: skipped
    (tmp_path / "self").mkdir()
    assert read_sample(proc=str(tmp_path)) == Sample(busy=800, total=1850, ours=63, cores=2,
                                                     children=frozenset({me + 1}))
    assert read_sample(frozenset(), proc=str(tmp_path)).ours == 55  # the children known: none, and no scan
    assert read_sample(frozenset({me + 1, me + 2}), str(tmp_path)).children == {me + 1}  # no longer ours: dropped
    (tmp_path / "stat").write_text("garbage\n")
    with pytest.raises((ValueError, IndexError)):
        read_sample(proc=str(tmp_path))


def test_only_the_cpus_this_process_may_run_on_count(tmp_path, monkeypatch):
    (tmp_path / str(os.getpid())).mkdir()
    (tmp_path / str(os.getpid()) / "stat").write_text(_stat(os.getpid(), "python", 1, 10, 0))
    (tmp_path / "stat").write_text("cpu  2300 0 0 1700 0 0 0 0 0 0\ncpu0 100 0 0 900 0 0 0 0 0 0\n"
                                   "cpu1 200 0 0 800 0 0 0 0 0 0\ncpu2 1000 0 0 0 0 0 0 0 0 0\n"
                                   "cpu3 1000 0 0 0 0 0 0 0 0 0\n")
    monkeypatch.setattr("memq.llm.threads.allowed_cpus", lambda: {0, 1})  # pinned: cpu2 and cpu3 are not ours
    assert read_sample(frozenset(), str(tmp_path)) == Sample(busy=300, total=2000, ours=10, cores=2)
    monkeypatch.setattr("memq.llm.threads.allowed_cpus", set)  # the OS does not say: the whole machine
    assert read_sample(frozenset(), str(tmp_path)) == Sample(busy=2300, total=4000, ours=10, cores=4)


class FakeLib:
    def __init__(self):
        self.set = []

    def llama_set_n_threads(self, ctx, n, n_batch):
        self.set.append((ctx, n, n_batch))

    def llama_decode(self, ctx, batch):
        return 0


def _runner(governor):
    runner = Runner.__new__(Runner)  # a Runner over a fake llama.cpp: only _decode runs
    runner.lib, runner.llama, runner.ids = FakeLib(), SimpleNamespace(ctx="ctx"), []
    runner.batch = SimpleNamespace(n_tokens=0, token=[0] * 8, pos=[0] * 8, n_seq_id=[0] * 8,
                                   seq_id=[[0] for _ in range(8)], logits=[False] * 8)
    runner.decodes = runner.decoded = 0
    runner.governor, runner.passes_by_threads = governor, {}
    return runner


def test_each_forward_pass_runs_on_the_count_the_governor_gives():
    machine, now = Machine(), [0.0]
    governor = ThreadGovernor(cpus=2, interval=0.5, sample=machine.sample, clock=lambda: now[0])
    runner = _runner(governor)
    runner._decode([5, 6], 0, [False, True])  # before the first window ends: the starting count
    machine.run(1.0, others=0.0, ours=1.0)
    now[0] = 1.0
    runner._decode([7], 2, [True])
    runner._decode([8], 3, [True])  # within the interval: not asked again
    machine.run(1.0, others=1.0, ours=1.0)
    now[0] = 2.0
    runner._decode([9], 4, [True])
    assert runner.lib.set == [("ctx", 2, 2), ("ctx", 1, 1)]
    assert runner.passes_by_threads == {1: 2, 2: 2} and runner.ids == [5, 6, 7, 8, 9]
    fixed = _runner(None)
    fixed._decode([5], 0, [True])
    assert fixed.lib.set == [] and fixed.passes_by_threads == {}


def test_the_plan_says_when_passes_ran_on_fewer_threads_than_the_cpus():
    governor = SimpleNamespace(cpus=2, describe=lambda: "1 thread(s) of 2 (other processes used 0.90 cores)")
    lm = SimpleNamespace(thread_passes={1: 5, 2: 10}, governor=governor)
    plan = Plan(steps=[])
    note_threads(plan, lm, {1: 2, 2: 4})
    assert plan.cost["llm_threads"] == "3x1 6x2"  # passes x threads
    assert plan.notes == ["llama.cpp ran 3 of 9 passes on fewer threads than the 2 CPUs: 1 thread(s) of 2 "
                          "(other processes used 0.90 cores)"]
    alone = Plan(steps=[])
    note_threads(alone, lm, {1: 5, 2: 4})
    assert alone.cost["llm_threads"] == "6x2" and alone.notes == []
    fixed = Plan(steps=[])
    note_threads(fixed, SimpleNamespace(), {})  # not llama.cpp, or a fixed count
    assert "llm_threads" not in fixed.cost and fixed.notes == []


def test_a_count_given_or_set_in_the_environment_is_fixed(monkeypatch):
    from memq.llm.llamacpp import LlamaCppLLM

    monkeypatch.delenv("MEMQ_LLAMA_THREADS", raising=False)
    assert LlamaCppLLM("smollm2").governed and not LlamaCppLLM("smollm2", threads=2).governed
    monkeypatch.setenv("MEMQ_LLAMA_THREADS", "1")
    llm = LlamaCppLLM("smollm2")
    assert not llm.governed and llm.threads == 1
