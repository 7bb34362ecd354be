"""A bounded stress run of recording beside a busy program: a few seconds.

Threads start and end traces over and over beside threads that never trace, asyncio
tasks each record their own trace, and one thread is interrupted at every step of
installing and removing the hooks in turn. Barriers line the threads up (no sleeps).
Checked: nothing crashes, no hook is left, every trace holds exactly its own launches,
and every buffer ends bit-identical to an untraced run of the same work.
"""

import asyncio
import threading

import numpy as np
import warp as wp

import graphcheck as gc
from tests import kernels as K
from tests.internals import _warp

ROUNDS = 12
LAUNCHES = 8  # per worker and round
TRACERS, BYSTANDERS, TASKS = 3, 2, 3
TIMEOUT = 60


class Interrupt(BaseException):
    """Stands for a KeyboardInterrupt in the interrupted thread."""


def alpha(worker, round_, i):
    # Exact in float32: the recorded alpha says who launched it.
    return float(worker * 10_000 + round_ * 100 + i)


def work(worker, round_, x, y):
    for i in range(LAUNCHES):
        wp.launch(K.axpy, dim=x.shape[0], inputs=[x, y, alpha(worker, round_, i)], device="cpu")


def expected_alphas(worker, round_):
    return [alpha(worker, round_, i) for i in range(LAUNCHES)]


def buffers(workers):
    return {w: (wp.ones(8, dtype=float, device="cpu"), wp.zeros(8, dtype=float, device="cpu")) for w in workers}


def untraced_reference(workers):
    arrays = buffers(workers)
    for round_ in range(ROUNDS):
        for w in workers:
            work(w, round_, *arrays[w])
    return {w: arrays[w][1].numpy().copy() for w in workers}


def test_traces_churning_beside_untraced_threads_tasks_and_interrupts():
    tracers = list(range(TRACERS))
    bystanders = list(range(100, 100 + BYSTANDERS))
    tasks = list(range(200, 200 + TASKS))
    victim = 300
    everyone = [*tracers, *bystanders, *tasks, victim]
    reference = untraced_reference(everyone)
    arrays = buffers(everyone)
    wrong: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(TRACERS + BYSTANDERS + 2, timeout=TIMEOUT)

    def check(trace, worker, round_):
        got = [r.args["alpha"] for r in trace]
        if got != expected_alphas(worker, round_):
            wrong.append(f"worker {worker} round {round_}: {got}")

    def tracer(worker):
        for round_ in range(ROUNDS):
            barrier.wait()
            with gc.trace_launches() as outer:
                with gc.trace_launches() as inner:
                    work(worker, round_, *arrays[worker])
            check(outer, worker, round_)
            check(inner, worker, round_)

    def bystander(worker):
        for round_ in range(ROUNDS):
            barrier.wait()
            work(worker, round_, *arrays[worker])

    def asyncio_thread():
        async def one(worker, round_):
            with gc.trace_launches() as trace:
                x, y = arrays[worker]
                for i in range(LAUNCHES):
                    wp.launch(K.axpy, dim=8, inputs=[x, y, alpha(worker, round_, i)], device="cpu")
                    await asyncio.sleep(0)  # the other tasks launch in between
            check(trace, worker, round_)

        async def rounds():
            for round_ in range(ROUNDS):
                barrier.wait()
                await asyncio.gather(*(one(w, round_) for w in tasks))

        asyncio.run(rounds())

    # The victim is interrupted at one step of installing or removing per round, in turn.
    labels = []
    _warp.HOOKS.checkpoint = labels.append
    with gc.trace_launches():
        pass
    _warp.HOOKS.checkpoint = None
    victim_thread: list[int] = []
    pending_label: list[str] = []

    def checkpoint(label):
        if victim_thread and threading.get_ident() == victim_thread[0] and pending_label == [label]:
            pending_label.clear()
            raise Interrupt(label)

    def victim_worker():
        victim_thread.append(threading.get_ident())
        for round_ in range(ROUNDS):
            pending_label[:] = [labels[round_ * len(labels) // ROUNDS]]
            trace = gc.trace_launches()
            try:
                with trace:
                    work(victim, round_, *arrays[victim])
            except Interrupt:
                # Interrupted before its launches: do them untraced, as the program would go on.
                if len(trace) == 0 and not trace.recording:
                    work(victim, round_, *arrays[victim])
            else:
                check(trace, victim, round_)

    def guarded(fn, *args):
        def run():
            try:
                fn(*args)
            except BaseException as exc:  # reported below
                errors.append(exc)
                barrier.abort()

        return threading.Thread(target=run)

    threads = [guarded(tracer, w) for w in tracers]
    threads += [guarded(bystander, w) for w in bystanders]
    threads.append(guarded(asyncio_thread))
    _warp.HOOKS.checkpoint = checkpoint
    try:
        for thread in threads:
            thread.start()
        victim_worker_thread = guarded(victim_worker)
        victim_worker_thread.start()
        for _round in range(ROUNDS):
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                break  # a worker failed: its error is reported below
        for thread in [*threads, victim_worker_thread]:
            thread.join(TIMEOUT)
    finally:
        _warp.HOOKS.checkpoint = None
    assert not errors, [f"{type(e).__name__}: {e}" for e in errors]
    assert not any(t.is_alive() for t in threads)
    assert not wrong, wrong
    assert not _warp.hooks_installed()
    for w in everyone:
        np.testing.assert_array_equal(arrays[w][1].numpy(), reference[w], err_msg=f"worker {w}")
