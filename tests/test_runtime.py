"""graphcheck never disturbs the program it watches: threads, tasks, interrupts, and what
Warp itself sees of its caller.

Every race here is made deterministic with barriers and events: a thread is held inside
Warp by a value whose conversion waits (Warp converts kernel arguments with ``float()``),
and interrupts are injected at each step of installing and removing the hooks through
``_warp.HOOKS.checkpoint``, graphcheck's test hook.
"""

import asyncio
import contextlib
import contextvars
import gc as python_gc
import inspect
import io
import os
import threading
import traceback
import warnings

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from tests import kernels as K
from tests.internals import _session, _warp

TIMEOUT = 30  # seconds a barrier waits before the test fails rather than hangs


def arrays(n=16):
    return wp.zeros(n, dtype=float, device="cpu"), wp.ones(n, dtype=float, device="cpu")


class Waiting:
    """A float kernel argument that, when Warp converts it, waits for the test to go on."""

    def __init__(self, value, arrived, resume):
        self.value, self.arrived, self.resume = value, arrived, resume

    def __float__(self):
        self.arrived.set()
        assert self.resume.wait(TIMEOUT), "the test never let the launch go on"
        return float(self.value)


def run_in_thread(fn, context=None):
    """Start ``fn`` in a thread (in a copy of ``context`` when given); join() re-raises."""
    outcome = {}

    def body():
        try:
            outcome["value"] = context.run(fn) if context is not None else fn()
        except BaseException as exc:  # handed to the test by join()
            outcome["error"] = exc

    thread = threading.Thread(target=body)
    thread.start()

    def join():
        thread.join(TIMEOUT)
        assert not thread.is_alive(), "the thread did not finish"
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")

    return join


# -- 1. A hook stays callable after it is removed ---------------------------------------------


def test_an_untraced_thread_holding_a_hook_forwards_to_warp_after_the_last_trace_ends():
    a, b = arrays()
    fetched, trace_ended = threading.Event(), threading.Event()

    def untraced():
        # Fetched while a trace records elsewhere: these are graphcheck's hooks.
        zero, fill = a.zero_, b.fill_
        command = wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, 1], device="cpu", record_cmd=True)
        replay = command.launch
        fetched.set()
        assert trace_ended.wait(TIMEOUT)
        zero()
        fill(3.0)
        replay()
        wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, 1], device="cpu")
        return a.numpy().copy()

    with gc.trace_launches() as trace:
        join = run_in_thread(untraced)
        assert fetched.wait(TIMEOUT)
    trace_ended.set()
    result = join()
    assert len(trace) == 0, "the other thread is not traced"
    np.testing.assert_array_equal(result, np.full(16, 7.0, dtype=np.float32))


def test_a_thread_inside_a_launch_when_the_hooks_go_finishes_it():
    a, b = arrays()
    arrived, resume = threading.Event(), threading.Event()

    def untraced():
        wp.launch(K.scale, dim=16, inputs=[a, b, Waiting(2.0, arrived, resume), 1], device="cpu")
        return a.numpy().copy()

    with gc.trace_launches():
        join = run_in_thread(untraced)
        assert arrived.wait(TIMEOUT)
    assert not _warp.hooks_installed()
    resume.set()
    np.testing.assert_array_equal(join(), np.full(16, 3.0, dtype=np.float32))


# -- 2. Interrupts at any step of installing or removing -----------------------------------------


def checkpoint_labels():
    labels = []
    _warp.HOOKS.checkpoint = labels.append
    try:
        with gc.trace_launches():
            pass
    finally:
        _warp.HOOKS.checkpoint = None
    return labels


class Interrupt(BaseException):
    """Stands for a KeyboardInterrupt (not one, so that pytest itself is not stopped)."""


def interrupt_at(label):
    def checkpoint(seen):
        if seen == label:
            _warp.HOOKS.checkpoint = None  # once
            raise Interrupt(label)

    return checkpoint


def records_one_launch():
    a, b = arrays()
    with gc.trace_launches() as trace:
        wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, 1], device="cpu")
    assert len(trace) == 1 and trace[0].kernel == "tests.kernels.scale"
    assert not _warp.hooks_installed()


def test_every_step_of_installing_and_removing_has_a_checkpoint():
    labels = checkpoint_labels()
    assert any(label.startswith("install ") for label in labels)
    assert any(label.startswith("remove ") for label in labels)
    assert "stop: trace ended" in labels and "stop: context reset" in labels


def test_the_patches_on_one_namespace_go_in_and_out_in_one_step():
    # Warp's native library holds dozens of hooked functions: one update of its namespace
    # each way, not a setattr per function (every gc.capture installs and removes them).
    labels = checkpoint_labels()
    (native,) = [label for label in labels if label.startswith("install CDLL (")]
    assert "wp_cpu_launch_kernel" in native and native.count(",") > 10
    assert f"remove {native.removeprefix('install ')}" in labels
    assert len([label for label in labels if label.startswith("install ")]) < len(_warp.HOOKS._patches)


@pytest.mark.parametrize("step", ["install", "remove", "stop"])
def test_an_interrupt_at_any_step_leaves_no_hook_and_the_next_trace_works(step):
    labels = [label for label in checkpoint_labels() if label.startswith(step)]
    assert labels
    for label in labels:
        trace = gc.trace_launches()
        _warp.HOOKS.checkpoint = interrupt_at(label)
        try:
            with pytest.raises(Interrupt):
                with trace:
                    pass
        finally:
            _warp.HOOKS.checkpoint = None
        assert not trace.recording, label
        assert not _warp.hooks_installed(), f"hooks left after an interrupt at {label!r}"
        records_one_launch()


def test_installing_twice_is_installing_once():
    a, b = arrays()
    with gc.trace_launches() as trace:
        _warp.HOOKS.install(_session.RECORDER)
        _warp.HOOKS.state = "partial"  # as after an interrupted install: the next one completes it
        _warp.HOOKS.install(_session.RECORDER)
        wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, 1], device="cpu")
        wp.copy(a, b)
    assert [r.kernel for r in trace] == ["tests.kernels.scale", "wp.copy"]
    assert not _warp.hooks_installed()


# -- 3. An ended trace receives nothing ----------------------------------------------------------


def test_a_task_spawned_inside_a_trace_does_not_record_into_it_after_it_ended():
    a, b = arrays()

    async def main():
        go = asyncio.Event()

        async def later():
            await go.wait()
            for _ in range(2):  # the first launch from this code takes the general path, the second the fast one
                wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, 1], device="cpu")
            a.zero_()
            wp.zeros(4, dtype=float, device="cpu")

        with gc.trace_launches() as inner:
            task = asyncio.get_running_loop().create_task(later())
            await asyncio.sleep(0)
        go.set()
        await task
        return inner

    with gc.trace_launches() as outer:  # keeps the hooks in
        inner = asyncio.run(main())
    assert len(inner) == 0 and inner.allocations == []
    assert [r.kernel for r in outer] == ["tests.kernels.scale", "tests.kernels.scale", "array.zero_"]


def test_a_trace_ended_in_one_thread_receives_nothing_from_another():
    a, b = arrays()
    arrived, resume = threading.Event(), threading.Event()

    def shares_the_context():
        wp.launch(K.scale, dim=16, inputs=[a, b, Waiting(2.0, arrived, resume), 1], device="cpu")
        wp.copy(a, b)

    with gc.trace_launches() as outer:  # keeps the hooks in
        with gc.trace_launches() as inner:
            join = run_in_thread(shares_the_context, contextvars.copy_context())
            assert arrived.wait(TIMEOUT)
        resume.set()
        join()
    assert len(inner) == 0
    assert [r.kernel for r in outer] == ["tests.kernels.scale", "wp.copy"]


# -- 4. Pending calls are per thread -------------------------------------------------------------


def test_threads_sharing_a_session_never_mix_call_sites():
    a, b = arrays()
    c, d = arrays()
    first_in, first_go = threading.Event(), threading.Event()
    second_in, second_go = threading.Event(), threading.Event()

    def first():
        wp.launch(K.scale, dim=16, inputs=[a, b, Waiting(2.0, first_in, first_go), 1], device="cpu")  # first's line

    def second():
        wp.launch(K.axpy, dim=16, inputs=[c, d, Waiting(1.0, second_in, second_go)], device="cpu", max_blocks=7)

    with gc.trace_launches() as trace:
        join_first = run_in_thread(first, contextvars.copy_context())
        assert first_in.wait(TIMEOUT)
        join_second = run_in_thread(second, contextvars.copy_context())
        assert second_in.wait(TIMEOUT)
        first_go.set()  # the first finishes while the second is inside its own launch
        join_first()
        second_go.set()
        join_second()
    by_kernel = {r.kernel: r for r in trace}
    assert set(by_kernel) == {"tests.kernels.scale", "tests.kernels.axpy"}
    assert by_kernel["tests.kernels.scale"].site.function.endswith("first")
    assert by_kernel["tests.kernels.scale"].max_blocks == 0
    assert by_kernel["tests.kernels.axpy"].site.function.endswith("second")
    assert by_kernel["tests.kernels.axpy"].max_blocks == 7


# -- 5. Warp sees the caller it sees without graphcheck ------------------------------------------


def traced_and_untraced(fn):
    """``fn()`` untraced, then inside two nested traces; both results."""
    untraced = fn()
    with gc.trace_launches(), gc.trace_launches(include_warp=True):
        traced = fn()
    return untraced, traced


def test_warps_allocation_tracker_names_the_users_line():
    import warp._src.context as warp_context

    core = warp_context.runtime.core
    report = warp_context.alloc_tracker_report_text

    def allocate():
        with wp.ScopedMemoryTracker("graphcheck", print=False):
            core.wp_alloc_tracker_reset()
            line = inspect.currentframe().f_lineno + 1
            kept = [wp.zeros(32, dtype=float, device="cpu"), wp.array(np.ones(8, dtype=np.float32), device="cpu")]
            text = report(0, 10)
        del kept
        return line, text

    untraced, traced = traced_and_untraced(allocate)
    line = traced[0]
    assert f"test_runtime.py:{line} : allocate()" in traced[1]
    assert f"graphcheck{os.sep}" not in traced[1]  # no frame of graphcheck's (its Warp adapter, its recorder)
    assert untraced[1].replace(str(untraced[0]), "L") == traced[1].replace(str(line), "L")


@wp.kernel
def read_then_write(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    # Alone in this module: Warp works out which arguments a kernel reads when it builds
    # the kernel's module with verify_autograd_array_access on.
    i = wp.tid()
    y[i] = x[i] * x[i]


def test_warps_copy_warning_names_the_users_line():
    saved = wp.config.verify_autograd_array_access
    wp.config.verify_autograd_array_access = True

    def copy_after_read():
        a = wp.array(np.array([1.0, 2.0, 3.0]), dtype=float, requires_grad=True, device="cpu")
        b = wp.zeros_like(a)
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()) as err, wp.Tape():
            warnings.simplefilter("always")  # the same message twice: show it both times
            wp.launch(read_then_write, a.shape, inputs=[a], outputs=[b], device="cpu")
            line = inspect.currentframe().f_lineno + 1
            wp.copy(a, b)
        return line, err.getvalue()

    try:
        untraced, traced = traced_and_untraced(copy_after_read)
    finally:
        wp.config.verify_autograd_array_access = saved
    if "by an array copy at" not in untraced[1]:
        pytest.skip(f"warp-lang {wp.__version__} does not name the copy's caller")
    assert f"by an array copy at {__file__}:{untraced[0]}" in untraced[1]
    assert f"by an array copy at {__file__}:{traced[0]}" in traced[1]


def test_the_tapes_caller_metadata_is_the_users_line():
    def taped():
        a = wp.zeros(4, dtype=float, device="cpu", requires_grad=True)
        b = wp.zeros(4, dtype=float, device="cpu", requires_grad=True)
        with wp.Tape() as tape:
            line = inspect.currentframe().f_lineno + 1
            wp.launch(K.square, 4, inputs=[a], outputs=[b], device="cpu")
        return line, tape.launches[0][-1]["caller"]

    untraced, traced = traced_and_untraced(taped)
    assert traced[1] == {"file": __file__, "lineno": traced[0], "func": "taped"}
    assert untraced[1] == {"file": __file__, "lineno": untraced[0], "func": "taped"}


def test_warps_deprecation_warning_points_at_the_users_line():
    out = wp.zeros(16, dtype=float, device="cpu")
    params = K.Params()
    params.scratch = wp.zeros(16, dtype=float, device="cpu")

    values = iter([np.int8(1), np.uint8(1)])  # Warp shows a deprecation once per message

    def implicit_vector():
        # Warp shows its warnings on stderr, with the place when verbose_warnings is on.
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()) as err:
            warnings.simplefilter("always")
            line = inspect.currentframe().f_lineno + 1
            wp.launch(K.echo, 1, inputs=[out, 1.0, 2, next(values), wp.mat22(), 1.0, 1.0, True, params], device="cpu")
        return line, [text for text in err.getvalue().splitlines() if "DeprecationWarning" in text]

    saved = wp.config.verbose_warnings
    wp.config.verbose_warnings = True
    try:
        untraced, traced = traced_and_untraced(implicit_vector)
    finally:
        wp.config.verbose_warnings = saved
    if not untraced[1]:
        pytest.skip(f"warp-lang {wp.__version__} does not deprecate this implicit conversion")
    assert traced[1], "warned untraced, not traced"
    assert all(text.endswith(f"({__file__}:{traced[0]})") for text in traced[1]), traced[1]
    assert all(text.endswith(f"({__file__}:{untraced[0]})") for text in untraced[1]), untraced[1]


def test_a_woven_function_is_warps_own_line_for_line():
    with gc.trace_launches():
        woven = wp.launch.__code__
        assert woven is not _warp.HOOKS._patches[0].original
    original = wp.launch.__code__
    assert woven.co_filename == original.co_filename and woven.co_firstlineno == original.co_firstlineno
    assert getattr(woven, "co_qualname", None) == getattr(original, "co_qualname", None)
    # Every line of Warp's function is the same line of the same file.
    assert {line for *_, line in original.co_lines()} <= {line for *_, line in woven.co_lines()}


# -- 6. The user's own error comes out unchanged -------------------------------------------------


class BadCount:
    def __int__(self):
        raise ZeroDivisionError("a count that cannot be read")


@pytest.mark.parametrize("count", [BadCount(), "3", None, 2.5])
def test_a_copy_with_a_bad_count_fails_as_it_does_untraced(count):
    a, b = arrays()

    def copy():
        try:
            wp.copy(a, b, count=count)
        except Exception as exc:  # the outcome to compare
            return type(exc), str(exc)
        return None

    untraced, traced = traced_and_untraced(copy)
    assert traced == untraced


def test_nothing_the_collector_traverses_is_kept_per_eager_launch():
    a, b = arrays()
    with gc.trace_launches() as trace:
        for i in range(50):
            wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, i], device="cpu")
    python_gc.collect()
    assert len(trace._items) == 50
    assert not any(python_gc.is_tracked(item) for item in trace._items)
    assert [r.args["n"] for r in trace] == list(range(50))


def test_a_session_belongs_to_one_thread():
    with gc.trace_launches():
        mine = _warp.current_session()
        theirs = run_in_thread(_warp.current_session, contextvars.copy_context())()
    assert isinstance(theirs, _session.Session) and theirs is not mine
    assert theirs.traces == mine.traces


def test_the_fast_path_names_each_launch_site_when_sites_alternate():
    # The woven invoke keeps the user code that launched last: another function, or
    # another line of the same one, must still name its own site.
    a = wp.zeros(16, dtype=float, device="cpu")
    b = wp.ones(16, dtype=float, device="cpu")

    def first(i):
        wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, i], device="cpu")

    def second(i):
        wp.launch(K.scale, dim=16, inputs=[a, b, 3.0, i], device="cpu")
        wp.launch(K.scale, dim=16, inputs=[a, b, 4.0, i], device="cpu")

    with gc.trace_launches() as trace:
        for i in range(3):
            first(i)
            second(i)
    python_gc.collect()
    assert all(type(item) is tuple for item in trace._items)  # every one took the fast path
    assert [r.args["s"] for r in trace] == [2.0, 3.0, 4.0] * 3
    assert [r.args["n"] for r in trace] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    sites = [(r.site.function.rsplit(".", 1)[-1], r.site.lineno) for r in trace]
    assert sites[0][0] == "first" and sites[1][0] == sites[2][0] == "second"
    assert sites[1][1] + 1 == sites[2][1]
    assert sites[:3] * 3 == sites


def _what_was_launched(trace):
    return [(r.kernel, r.adjoint, r.param_bytes, r.max_blocks, r.dim, r.device) for r in trace]


def _launch_scaled(a, b, times):
    for i in range(times):
        wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, i], device="cpu", max_blocks=i % 3)


def count_on_invoke(monkeypatch):
    """A list that grows by one each time invoke's prologue calls _on_invoke (the launch
    site did not record the launch)."""
    import warp._src.context as warp_context

    reached = []
    with gc.trace_launches():  # the woven names are in Warp's module from the first install
        pass
    on_invoke = warp_context._graphcheck_on_invoke
    monkeypatch.setattr(warp_context, "_graphcheck_on_invoke", lambda *args: reached.append(1) or on_invoke(*args))
    return reached


def test_a_launch_from_user_code_is_recorded_at_wp_launchs_call_of_invoke(monkeypatch):
    # The commonest launch is recorded where wp.launch calls Warp's invoke; invoke's
    # prologue sees only a kernel's first launch (which teaches its parameter block).
    a, b = arrays()
    reached = count_on_invoke(monkeypatch)
    with gc.trace_launches() as trace:
        _launch_scaled(a, b, 20)
    python_gc.collect()
    assert len(reached) <= 1  # none when an earlier test launched K.scale from user code
    assert not any(python_gc.is_tracked(item) for item in trace._items)
    assert [r.args["n"] for r in trace] == list(range(20))
    assert [r.max_blocks for r in trace] == [i % 3 for i in range(20)]
    assert np.allclose(a.numpy(), 2.0 + 19)


def test_launches_alternating_between_two_user_functions_keep_their_own_sites(monkeypatch):
    # The fast path remembers the user code of the last launch it recorded; a launch from
    # another function is looked up, learnt once, and becomes the one remembered.
    a, b = arrays()

    def integrate(i):
        wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, i], device="cpu")

    def collide(i):
        wp.launch(K.scale, dim=16, inputs=[a, b, 3.0, i], device="cpu")

    reached = count_on_invoke(monkeypatch)
    with gc.trace_launches() as trace:
        for i in range(4):
            integrate(i)
            collide(i)
            collide(i)
    assert len(reached) <= 2  # each function's first launch learns its code
    assert [r.site.function.rsplit(".", 1)[-1] for r in trace] == ["integrate", "collide", "collide"] * 4
    assert [(r.args["s"], r.args["n"]) for r in trace] == [(s, i) for i in range(4) for s in (2.0, 3.0, 3.0)]
    assert np.allclose(a.numpy(), 3.0 + 3)


def test_a_launch_inside_a_conditional_body_is_nested_though_its_code_was_just_recorded():
    # A body runs its launches through the general path (which marks them nested), even
    # when the fast path has just recorded a launch from the same function.
    a, b = arrays()
    condition = wp.array([1], dtype=int, device="cpu")

    def step(i):
        wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, i], device="cpu")

    with gc.trace_launches() as trace:
        step(0)
        step(1)
        wp.capture_if(condition, on_true=lambda: step(2))
        step(3)
    launches = [r for r in trace if r.kind == "launch"]
    assert [bool(r.nested) for r in launches] == [False, False, True, False]
    assert [r.site.function.rsplit(".", 1)[-1] for r in launches] == ["step"] * 4
    assert np.allclose(a.numpy(), 2.0 + 3)


def test_eager_launches_stand_between_the_allocations_made_around_them():
    a, b = arrays()
    with gc.trace_launches() as trace:
        first = wp.empty(16, dtype=float, device="cpu")
        for i in range(3):
            wp.launch(K.scale, dim=16, inputs=[first, b, 2.0, i], device="cpu")
        second = wp.empty(16, dtype=float, device="cpu")
        wp.launch(K.scale, dim=16, inputs=[second, b, 2.0, 3], device="cpu")
    before, after = trace.allocations
    launches = list(trace)
    assert all(before.seq < r.seq < after.seq for r in launches[:3])
    assert after.seq < launches[3].seq
    assert [trace.allocation_at(r.args["a"].ptr, r.seq) for r in launches] == [before] * 3 + [after]
    assert trace.allocation_at(second.ptr, launches[0].seq) is not after


def test_a_warp_without_the_call_records_every_launch_in_invokes_prologue_alike(monkeypatch):
    a, b = arrays()
    _launch_scaled(a, b, 1)  # Warp's caches warm
    with gc.trace_launches() as at_the_call:
        _launch_scaled(a, b, 12)
    # The same Warp as one whose wp.launch has no `invoke(kernel, hooks, params, adjoint)`:
    # the hooks are planned again without that site, then again as they were.
    with monkeypatch.context() as patch:
        patch.setattr(_warp.HOOKS, "_patches", None)
        patch.setattr(_warp.hooks, "_LAUNCH_INVOKE_CALL", "invoke(kernel, hooks, params, adjoint, None)")
        with gc.trace_launches() as in_invoke:
            assert "_graphcheck_invoke_unwoven" not in wp.launch.__code__.co_names
            _launch_scaled(a, b, 12)
    assert _what_was_launched(in_invoke) == _what_was_launched(at_the_call)
    assert [r.args for r in in_invoke] == [r.args for r in at_the_call]
    assert [r.site.function for r in in_invoke] == [r.site.function for r in at_the_call]
    with gc.trace_launches():
        assert "_graphcheck_invoke_unwoven" in wp.launch.__code__.co_names


def test_someone_elses_invoke_in_warp_is_called_and_each_launch_recorded_once(monkeypatch):
    import warp._src.context as warp_context

    a, b = arrays()
    theirs = []
    warps = warp_context.invoke

    def their_invoke(kernel, hooks, params, adjoint):
        theirs.append(kernel.key)
        return warps(kernel, hooks, params, adjoint)

    _launch_scaled(a, b, 1)
    with gc.trace_launches() as trace:
        monkeypatch.setattr(warp_context, "invoke", their_invoke)
        _launch_scaled(a, b, 5)
        monkeypatch.undo()
    assert len(theirs) == 5
    assert [r.args["n"] for r in trace] == list(range(5))
    assert np.allclose(a.numpy(), 2.0 + 4)


def test_an_error_raised_in_invoke_shows_warps_line_of_the_call(monkeypatch):
    import warp._src.context as warp_context

    a, b = arrays()

    def failing_invoke(kernel, hooks, params, adjoint):
        raise ValueError("their invoke failed")

    def launch_line():
        try:
            _launch_scaled(a, b, 1)
        except ValueError as exc:
            frames = [(frame.f_code.co_name, line) for frame, line in traceback.walk_tb(exc.__traceback__)]
            return [frame for frame in frames if frame[0] == "launch"], str(exc), len(frames)
        raise AssertionError("the launch did not raise")

    monkeypatch.setattr(warp_context, "invoke", failing_invoke)
    untraced, traced = traced_and_untraced(launch_line)
    assert traced == untraced
    assert untraced[0] and untraced[1] == "their invoke failed"
