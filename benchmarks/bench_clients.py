"""What validating a real simulator's step costs: ``gc.capture`` of Newton's and
MuJoCo Warp's steps on the CPU, against what it inherently repeats (one eager call plus a
bare ``wp.ScopedCapture``), as the median of the ratios of adjacent rounds of thread CPU time
(bar: 1.4x; the aim is 1.2x); beside it, the same two calls only recorded (traced, not judged): recording's
share of that cost. Needs the clients ``nox -s bench-clients`` installs (newton,
mujoco-warp); skipped without them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import warp as wp

import graphcheck as gc

from ._timing import paired

DEVICE = "cpu"
#: The steps measured, where their client is installed.
CLIENTS = ("newton_pendulum", "newton_cloth_vbd", "newton_cloth_xpbd", "mujoco_cartpole", "mujoco_humanoid")


def _newton_pendulum() -> tuple[Any, Callable[[], None]]:
    import newton.viewer
    from newton.examples.basic.example_basic_pendulum import Example

    example = Example(newton.viewer.ViewerNull(), None)
    example.graph = None  # the example captured simulate on its own: graphcheck captures it here
    return example, example.simulate


def _newton_cloth(solver: str) -> tuple[Any, Callable[[], None]]:
    import types

    import newton.viewer
    from newton.examples.cloth.example_cloth_hanging import Example

    class Cloth(Example):
        def capture(self) -> None:
            self.graph = None  # graphcheck captures simulate here

    example = Cloth(newton.viewer.ViewerNull(), types.SimpleNamespace(solver=solver, width=8, height=4))
    return example, example.simulate


def _mujoco(xml: str, worlds: int = 2) -> tuple[Any, Callable[[], None]]:
    import mujoco
    import mujoco_warp as mjw

    class Sim:
        def __init__(self) -> None:
            load = mujoco.MjModel.from_xml_path if xml.endswith(".xml") else mujoco.MjModel.from_xml_string
            self.mjm = load(xml)
            mjd = mujoco.MjData(self.mjm)
            mujoco.mj_forward(self.mjm, mjd)
            self.m = mjw.put_model(self.mjm)
            self.d = mjw.put_data(self.mjm, mjd, nworld=worlds)

        def step(self) -> None:
            mjw.step(self.m, self.d)

    sim = Sim()
    return sim, sim.step


CARTPOLE = """
<mujoco model="cartpole">
  <option timestep="0.01"/>
  <worldbody>
    <body name="cart" pos="0 0 1">
      <joint name="slider" type="slide" axis="1 0 0" range="-2 2" limited="true"/>
      <geom type="box" size="0.2 0.1 0.05" mass="1"/>
      <body name="pole">
        <joint name="hinge" type="hinge" axis="0 1 0" damping="0.01"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.6" size="0.03" mass="0.1"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="slider" gear="10" ctrlrange="-1 1" ctrllimited="true"/></actuator>
</mujoco>
"""


def _humanoid_xml() -> str | None:
    from importlib import resources

    for candidate in ("test_data/humanoid/humanoid.xml", "_src/test_data/humanoid/humanoid.xml"):
        path = resources.files("mujoco_warp").joinpath(candidate)
        if path.is_file():
            return str(path)
    return None


def _clients() -> dict[str, Callable[[], tuple[Any, Callable[[], None]]]]:
    clients: dict[str, Callable[[], tuple[Any, Callable[[], None]]]] = {}
    try:
        import newton  # noqa: F401
    except ImportError:
        pass
    else:
        clients["newton_pendulum"] = _newton_pendulum
        clients["newton_cloth_vbd"] = lambda: _newton_cloth("vbd")
        clients["newton_cloth_xpbd"] = lambda: _newton_cloth("xpbd")
    try:
        import mujoco_warp  # noqa: F401
    except ImportError:
        pass
    else:
        clients["mujoco_cartpole"] = lambda: _mujoco(CARTPOLE)
        humanoid = _humanoid_xml()
        if humanoid is not None:
            clients["mujoco_humanoid"] = lambda: _mujoco(humanoid)
    return clients


def bench_clients(rounds: int = 21, names: tuple[str, ...] = ()) -> dict[str, Any]:
    """``gc.capture`` of each client's step against one eager call plus a bare capture.

    21 rounds by default: on a 2-core machine, runs of 7 rounds moved by up to 0.3x, runs of
    21 by up to 0.06x."""
    clients = _clients()
    if not clients:
        return {"skipped": "newton and mujoco-warp are not installed (nox -s bench-clients installs them)"}
    out: dict[str, Any] = {}
    for name, make in clients.items():
        if names and name not in names:
            continue
        owner, step = make()
        step()  # compile and load, and any first-call setup

        def bare_capture(step: Callable[[], None] = step) -> None:
            with wp.ScopedCapture(device=DEVICE):
                step()

        def eager_then_capture(step: Callable[[], None] = step) -> None:
            step()
            bare_capture(step)

        def recorded(step: Callable[[], None] = step) -> None:
            # What gc.capture records, without judging it: the share recording takes.
            with gc.trace_launches():
                step()
            with gc.trace_launches(include_warp=True):
                bare_capture(step)

        def checked(step: Callable[[], None] = step, owner: Any = owner) -> None:
            gc.capture(step, device=DEVICE, owners=(owner,), revalidate=True, on_failure="ignore")

        checked()
        with gc.trace_launches() as trace:
            step()
        variants = {"eager_plus_capture": eager_then_capture, "recorded": recorded, "checked": checked}
        figures = paired(variants, rounds=rounds)
        base, ours = figures["eager_plus_capture"], figures["checked"]
        out[f"{name}_operations"] = len(trace.records)
        out[f"{name}_eager_plus_capture_ms"] = round(base[0] / 1e3, 1)
        out[f"{name}_recording_ratio"] = round(figures["recorded"][1], 2)
        out[f"{name}_ratio"] = round(ours[1], 2)
    return out


def bench_clients_crosscheck(rounds: int = 21, names: tuple[str, ...] = (), alone: int = 200) -> dict[str, Any]:
    """What the graph cross-check adds to ``gc.capture`` of each client's step on the CPU:
    ``gc.capture`` with it against ``gc.capture`` without it, in alternating rounds of one
    process (the cross-check turned off by a graph that cannot be read); beside it, the
    cross-check alone (the graph read, matched to its trace and checked) of one capture,
    timed over ``alone`` rounds, and as a share of the capture without it
    (``crosscheck_alone_ratio``: 1 + median cross-check / median capture). A whole capture
    moves by more than the cross-check costs on a shared machine; the cross-check alone
    does not. (It runs with the caches a tight loop keeps warm: inside a capture it takes
    somewhat longer.)"""
    from graphcheck import crosscheck, guard
    from graphcheck.nodes import GraphReadError

    clients = _clients()
    if not clients:
        return {"skipped": "newton and mujoco-warp are not installed (nox -s bench-clients installs them)"}
    read_match = guard.read_match

    def unread(graph: Any, trace: Any) -> Any:
        raise GraphReadError("not read for the benchmark")

    out: dict[str, Any] = {}
    for name, make in clients.items():
        if names and name not in names:
            continue
        owner, step = make()
        step()

        def checked(step: Callable[[], None] = step, owner: Any = owner) -> None:
            gc.capture(step, device=DEVICE, owners=(owner,), revalidate=True, on_failure="ignore")

        def without(step: Callable[[], None] = step, owner: Any = owner) -> None:
            guard.read_match = unread
            try:
                gc.capture(step, device=DEVICE, owners=(owner,), revalidate=True, on_failure="ignore")
            finally:
                guard.read_match = read_match

        checked()
        figures = paired({"without": without, "with": checked}, rounds=rounds)
        out[f"{name}_without_crosscheck_ms"] = round(figures["without"][0] / 1e3, 1)
        out[f"{name}_crosscheck_ratio"] = round(figures["with"][1], 3)
        out[f"{name}_crosscheck_added_ms"] = round(figures["with"][2] / 1e3, 2)
        graph, trace = _captured(step, owner)

        def cross_check(graph: Any = graph, trace: Any = trace) -> None:
            crosscheck.check(read_match(graph, trace))

        times = sorted(_thread_ms(cross_check) for _ in range(alone))
        median = statistics.median(times)
        out[f"{name}_crosscheck_alone_least_ms"] = round(times[0], 3)
        out[f"{name}_crosscheck_alone_ms"] = round(median, 3)
        out[f"{name}_crosscheck_alone_ratio"] = round(1 + median / (figures["without"][0] / 1e3), 3)
    return out


def _captured(step: Callable[[], None], owner: Any) -> tuple[Any, Any]:
    """The graph and the trace of one ``gc.capture`` of ``step``, as its cross-check gets them."""
    from graphcheck import guard

    got: list[tuple[Any, Any]] = []
    read_match = guard.read_match

    def keep(graph: Any, trace: Any) -> Any:
        got.append((graph, trace))
        return read_match(graph, trace)

    guard.read_match = keep
    try:
        gc.capture(step, device=DEVICE, owners=(owner,), revalidate=True, on_failure="ignore")
    finally:
        guard.read_match = read_match
    return got[-1]


def _thread_ms(fn: Callable[[], None]) -> float:
    start = time.thread_time_ns()
    fn()
    return (time.thread_time_ns() - start) / 1e6


def bench_replay_clients(
    rounds: int = 150, calls: int = 20, names: tuple[str, ...] = ("mujoco_cartpole", "mujoco_humanoid")
) -> dict[str, Any]:
    """What ``replay_check="always"`` (the default) adds to every launch of a real client's
    captured step whose owners changed nothing, against a bare ``wp.capture_launch`` of the
    same graph (as :func:`benchmarks.bench_guard.bench_replay`): MuJoCo Warp's ``Data`` and
    ``Model`` hold hundreds of arrays as attributes, each baked address's array checked before
    every launch."""
    from .bench_guard import replay_figures

    clients = {name: make for name, make in _clients().items() if name in names}
    if not clients:
        return {"skipped": "mujoco-warp is not installed (nox -s bench-clients installs it)"}
    out: dict[str, Any] = {}
    for name, make in clients.items():
        owner, step = make()
        step()  # compile and load, and any first-call setup
        checked = gc.capture(step, device=DEVICE, owners=(owner,), replay_check="always")
        bare_us, added_us, ratio = replay_figures(checked, rounds, calls)
        out[f"{name}_baked_addresses"] = len(checked.baked)
        out[f"{name}_bare_us"] = round(bare_us, 1)
        out[f"{name}_added_us"] = round(added_us, 2)
        out[f"{name}_ratio"] = round(ratio, 3)
    return out
