"""Step programs composed at random from what Warp users write, judged by graphcheck and by values.

A :class:`Program` is a few constructs over a pool of state arrays ("slots"), each slot held
the way real code holds its arrays (an attribute, a dict, a list, a sub-object). The
constructs are what users write in a ``step()``: launches whose scalar is a constant, a
device value, a host counter, a schedule, or differs on the first call only; recorded
commands; launch dimensions; ping-pong swaps; copies; fills; temporaries; host uploads;
readbacks; host staging; structs; launch sequences; views; work only the first call does;
and changes between replays (in-place writes, arrays rebound on the owner).

:func:`judge` builds two producers from one program: one steps eagerly, the other's step
goes through :func:`graphcheck.capture` (``on_failure="ignore"``) and its graph is replayed,
with the same changes applied to both between replays (the replay check runs after each
such change). The truth is the values: every array either producer holds, compared by its
path after each step. graphcheck's verdict is its findings. The outcome is:

``agree``
    unsafe and wrong by values, or safe and right.
``false alarm``
    findings, yet every replay equals eager stepping.
``miss``
    no finding, yet a replay differs from eager stepping.
``values blind``
    findings and right values, in a program with a construct whose wrong replay values
    cannot show on the CPU (a host upload whose freed temporary still holds the data, a
    readback that breaks only a CUDA capture).
``late drift``
    no finding and wrong values, in a program whose drift starts after the calls graphcheck
    compares (a schedule that changes at the sixth call): a documented limit.
``no graph``
    the capture failed (a finding says why); there is nothing to replay.

Every kernel is from a fixed library (:mod:`tests.program_kernels`): Warp compiles it once,
whatever the programs. ``python -m tests.generator --count 2000`` (``nox -s generate``) runs
many programs, prints the agreement table by construct, and shrinks each disagreement to the
constructs it needs.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import warp as wp

import graphcheck as gc
from tests import program_kernels as PK

DEVICE = "cpu"
N = 8
REPLAYS = 5
LATE = 6  # a "late" schedule changes from this call on: after the calls graphcheck compares

HOLDERS = ("attr", "dict", "list", "sub")
SLOTS = ("out", "src", "a", "b", "dst", "slot", "field")  # the fields of a construct that name a slot

# -- schedules: how a host value changes from call to call ----------------------------------------

#: ``constant``: the same every call; ``first_call``: other on the first call only (a warm start);
#: ``every_third``: other on calls 2, 5, 8...; ``alternating``: other on even calls; ``counter``:
#: another value every call; ``late``: other from call LATE on.
SCHEDULES = ("constant", "first_call", "every_third", "alternating", "counter", "late")


def scheduled(schedule: str, frame: int, steady: Any, other: Any, counted: Any = None) -> Any:
    """The value a ``schedule`` gives on call ``frame`` (1 is the first call)."""
    if schedule == "constant":
        return steady
    if schedule == "first_call":
        return other if frame == 1 else steady
    if schedule == "every_third":
        return other if frame % 3 == 2 else steady
    if schedule == "alternating":
        return other if frame % 2 == 0 else steady
    if schedule == "counter":
        return counted
    if schedule == "late":
        return other if frame >= LATE else steady
    raise ValueError(f"unknown schedule {schedule!r}; one of {SCHEDULES}")


# -- the constructs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Construct:
    """One thing a step does. ``init`` makes what it keeps on the producer, ``step`` is its part
    of the step, ``between`` its change between two replays (applied to both twins)."""

    #: Its wrong replay may not show by values on the CPU.
    blind: ClassVar[bool] = False

    def init(self, p: Generated, k: int) -> None:
        pass

    def step(self, p: Generated, k: int, frame: int) -> None:
        raise NotImplementedError

    def between(self, p: Generated, k: int, replay: int) -> bool:
        """Change the producer before replay ``replay`` (1, 2...); True when it changed anything."""
        return False

    @property
    def late(self) -> bool:
        """Whether its drift starts after the calls graphcheck compares."""
        return any(getattr(self, f.name) == "late" for f in dataclasses.fields(self))

    def label(self) -> str:
        """Its row in the agreement table: the kind and the knobs that decide a verdict."""
        knobs = [f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self) if f.name not in SLOTS]
        return f"{type(self).__name__}({', '.join(knobs)})"

    def simpler(self) -> Iterator[Construct]:
        """Variants one knob simpler (for shrinking): schedules constant, kinds the first one."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str) and value in SCHEDULES and value != "constant":
                yield dataclasses.replace(self, **{f.name: "constant"})
            choices = getattr(type(self), f"{f.name}_choices", None)
            if choices and value != choices[0]:
                yield dataclasses.replace(self, **{f.name: choices[0]})


@dataclass(frozen=True)
class Launch(Construct):
    """``out += 0.5 * src + s``: ``s`` from a schedule, through ``wp.launch``, a recorded
    ``wp.Launch`` made at init (its arrays fixed then), or a device counter."""

    out: int = 0
    src: int = 1
    scalar: str = "constant"
    via: str = "launch"
    via_choices: ClassVar = ("launch", "command", "device")

    def value(self, frame: int) -> float:
        return scheduled(self.scalar, frame, 0.25, 0.75, 0.25 * frame)

    def init(self, p, k):
        if self.via == "command":
            inputs = [p.get(self.out), p.get(self.src), self.value(1)]
            p.own[k]["cmd"] = wp.launch(PK.advance, dim=N, inputs=inputs, device=p.device, record_cmd=True)
        elif self.via == "device":
            p.own[k]["s"] = wp.zeros(1, dtype=float, device=p.device)

    def step(self, p, k, frame):
        if self.via == "command":
            cmd = p.own[k]["cmd"]
            cmd.set_param_by_name("s", self.value(frame))
            cmd.launch()
        elif self.via == "device":
            wp.launch(PK.count_up, dim=1, inputs=[p.own[k]["s"]], device=p.device)
            wp.launch(PK.advance_by_device, dim=N, inputs=[p.get(self.out), p.get(self.src), p.own[k]["s"]],
                      device=p.device)  # fmt: skip
        else:
            wp.launch(PK.advance, dim=N, inputs=[p.get(self.out), p.get(self.src), self.value(frame)], device=p.device)

    def label(self):
        return f"Launch(via={self.via}, scalar={'device' if self.via == 'device' else self.scalar})"


@dataclass(frozen=True)
class Dim(Construct):
    """A launch whose dimension comes from a schedule."""

    out: int = 0
    src: int = 1
    dims: str = "constant"

    def step(self, p, k, frame):
        dim = scheduled(self.dims, frame, N, N // 2, max(1, N - frame))
        wp.launch(PK.advance, dim=dim, inputs=[p.get(self.out), p.get(self.src), 0.125], device=p.device)


@dataclass(frozen=True)
class Swap(Construct):
    """Ping-pong: ``b = 0.75 * b + 0.5 * a + 0.25``, then ``a`` and ``b`` swapped on the holder, ``times`` per call
    on the calls ``when`` says (``counter``: not on every third call, which starts after the
    calls graphcheck compares). ``mirror`` copies ``b`` into ``a`` before each swap, so both
    hold the same values at every call's end."""

    a: int = 0
    b: int = 1
    times: int = 1
    when: str = "constant"
    mirror: bool = False

    @property
    def late(self) -> bool:
        return self.when in ("late", "counter")

    @property
    def blind(self) -> bool:  # type: ignore[override]
        # Mirrored, the two hold the same values at every call's end: a replay that reads the
        # other one shows only once one of them is updated between replays (Mutate).
        return self.mirror

    def step(self, p, k, frame):
        if not scheduled(self.when, frame, True, False, frame % 3 != 0):
            return  # "first_call": no swap on the first call only; "counter": every third call not
        if p.index(self.a) == p.index(self.b):
            return
        for _ in range(self.times):
            a, b = p.get(self.a), p.get(self.b)
            wp.launch(PK.ping, dim=N, inputs=[b, a], device=p.device)
            if self.mirror:
                wp.copy(a, b)
            p.put(self.a, b)
            p.put(self.b, a)

    def simpler(self):
        yield from super().simpler()
        if self.times != 1:
            yield dataclasses.replace(self, times=1)
        if self.mirror:
            yield dataclasses.replace(self, mirror=False)


@dataclass(frozen=True)
class Copy(Construct):
    """``wp.copy`` of ``src`` into a buffer the producer keeps (all of it, or half at an offset,
    as a schedule says), then read into ``out``."""

    out: int = 0
    src: int = 1
    span: str = "constant"

    def init(self, p, k):
        p.own[k]["prev"] = wp.zeros(N, dtype=float, device=p.device)

    def step(self, p, k, frame):
        count, offset = scheduled(self.span, frame, (N, 0), (N // 2, N // 4), (N // 2, frame % 3))
        wp.copy(p.own[k]["prev"], p.get(self.src), dest_offset=offset, count=count)
        wp.launch(PK.advance, dim=N, inputs=[p.get(self.out), p.own[k]["prev"], 0.0], device=p.device)


@dataclass(frozen=True)
class Fill(Construct):
    """An accumulator the producer keeps, ``fill_``-ed with a value from a schedule, then
    accumulated into and read into ``out``."""

    out: int = 0
    src: int = 1
    value: str = "constant"

    def init(self, p, k):
        p.own[k]["acc"] = wp.zeros(N, dtype=float, device=p.device)

    def step(self, p, k, frame):
        acc = p.own[k]["acc"]
        acc.fill_(scheduled(self.value, frame, 0.5, 2.0, 0.5 * frame))
        wp.launch(PK.advance, dim=N, inputs=[acc, p.get(self.src), 0.0], device=p.device)
        wp.launch(PK.advance, dim=N, inputs=[p.get(self.out), acc, 0.0], device=p.device)


@dataclass(frozen=True)
class Temp(Construct):
    """A temporary made in the call and read into ``out``: device scratch (``zeros``, a
    ``clone``, scratch ``kept`` on the owner), or host data uploaded into it each call."""

    out: int = 0
    src: int = 1
    kind: str = "zeros"
    kind_choices: ClassVar = ("zeros", "clone", "kept", "upload", "upload_constant", "assign")

    @property
    def blind(self) -> bool:  # type: ignore[override]
        # The replay copies the host data from a temporary freed after the call: whether it
        # still holds that data is up to the allocator.
        return self.kind in ("upload", "upload_constant", "assign")

    def step(self, p, k, frame):
        d, kind = p.device, self.kind
        if kind in ("zeros", "kept"):
            t = wp.zeros(N, dtype=float, device=d)
            if kind == "kept":
                p.own[k]["t"] = t
            wp.launch(PK.advance, dim=N, inputs=[t, p.get(self.src), 1.0], device=d)
        elif kind == "clone":
            t = wp.clone(p.get(self.src))
        elif kind == "upload":
            t = wp.array(np.full(N, 0.25 * frame, dtype=np.float32), dtype=float, device=d)
        elif kind == "upload_constant":
            t = wp.array(np.full(N, 0.5, dtype=np.float32), dtype=float, device=d)
        else:
            t = wp.zeros(N, dtype=float, device=d)
            t.assign(np.full(N, 0.25 * frame, dtype=np.float32))
        wp.launch(PK.advance, dim=N, inputs=[p.get(self.out), t, 0.0], device=d)


@dataclass(frozen=True)
class Staging(Construct):
    """Host staging the producer keeps, copied up and read into ``out``: written inside the
    call (``in_call``), or between replays (``between``, the canonical pattern)."""

    out: int = 0
    kind: str = "between"
    kind_choices: ClassVar = ("between", "in_call")

    def init(self, p, k):
        p.own[k]["staging"] = wp.full(N, 0.25, dtype=float, device="cpu")
        p.own[k]["v"] = wp.zeros(N, dtype=float, device=p.device)

    def step(self, p, k, frame):
        if self.kind == "in_call":
            p.own[k]["staging"].numpy()[:] = 0.25 * frame
        wp.copy(p.own[k]["v"], p.own[k]["staging"])
        wp.launch(PK.advance, dim=N, inputs=[p.get(self.out), p.own[k]["v"], 0.0], device=p.device)

    def between(self, p, k, replay):
        if self.kind != "between":
            return False
        p.own[k]["staging"].numpy()[:] = 0.5 + replay
        return True


@dataclass(frozen=True)
class Readback(Construct):
    """``slot.numpy()`` inside the call: a CUDA capture fails there; on the CPU the values
    cannot show it."""

    slot: int = 0
    blind: ClassVar[bool] = True

    def step(self, p, k, frame):
        _ = p.get(self.slot).numpy()


@dataclass(frozen=True)
class Struct(Construct):
    """A struct with a ``dt`` from a schedule and an array field, built once at init (its
    field fixed then) or each call from the slot's array now."""

    out: int = 0
    field: int = 1
    dt: str = "constant"
    built: str = "init"
    built_choices: ClassVar = ("init", "call")

    def knobs(self, p, frame):
        k = PK.Knobs()
        k.src = p.get(self.field)
        k.dt = scheduled(self.dt, frame, 0.25, 0.75, 0.25 * frame)
        return k

    def init(self, p, k):
        if self.built == "init":
            p.own[k]["knobs"] = self.knobs(p, 1)

    def step(self, p, k, frame):
        if self.built == "init":
            knobs = p.own[k]["knobs"]
            knobs.dt = scheduled(self.dt, frame, 0.25, 0.75, 0.25 * frame)
        else:
            knobs = self.knobs(p, frame)
        wp.launch(PK.advance_by_struct, dim=N, inputs=[p.get(self.out), knobs], device=p.device)


@dataclass(frozen=True)
class Sequence(Construct):
    """A loop of launches whose count comes from a schedule."""

    out: int = 0
    src: int = 1
    count: str = "constant"

    def step(self, p, k, frame):
        for _ in range(scheduled(self.count, frame, 2, 3, frame)):
            wp.launch(PK.advance, dim=N, inputs=[p.get(self.out), p.get(self.src), 0.125], device=p.device)


@dataclass(frozen=True)
class View(Construct):
    """A launch on half of ``out`` through a slice taken in the call, at an offset from a schedule."""

    out: int = 0
    src: int = 1
    offset: str = "constant"

    def step(self, p, k, frame):
        o = scheduled(self.offset, frame, 0, N // 2, (frame % 3) * (N // 4))
        half = N // 2
        inputs = [p.get(self.out)[o : o + half], p.get(self.src)[:half], 0.25]
        wp.launch(PK.advance, dim=half, inputs=inputs, device=p.device)


@dataclass(frozen=True)
class FirstCall(Construct):
    """Work only the first call does: a buffer made ``lazy``-ly and kept, a ``warm_start``
    launch, an ``init_fill``."""

    out: int = 0
    kind: str = "lazy"
    kind_choices: ClassVar = ("lazy", "warm_start", "init_fill")

    def init(self, p, k):
        p.own[k]["buf"] = None

    def step(self, p, k, frame):
        d, out = p.device, p.get(self.out)
        if self.kind == "lazy":
            if p.own[k]["buf"] is None:
                p.own[k]["buf"] = wp.zeros(N, dtype=float, device=d)
            wp.launch(PK.advance, dim=N, inputs=[p.own[k]["buf"], out, 0.5], device=d)
            wp.launch(PK.advance, dim=N, inputs=[out, p.own[k]["buf"], 0.0], device=d)
        elif frame == 1:
            if self.kind == "warm_start":
                wp.launch(PK.advance, dim=N, inputs=[out, out, 1.0], device=d)
            else:
                out.fill_(2.0)


@dataclass(frozen=True)
class Mutate(Construct):
    """A change between replays, from replay ``at`` on: an in-place ``fill``, an in-place
    ``assign`` from the host, or the slot ``rebind``-ed on its holder to a new array with other
    values (the old one kept alive outside the owners, as a caller might)."""

    slot: int = 0
    how: str = "fill"
    at: int = 2
    how_choices: ClassVar = ("fill", "assign", "rebind")

    def step(self, p, k, frame):
        pass

    def between(self, p, k, replay):
        if replay != self.at:
            return False
        arr = p.get(self.slot)
        if self.how == "fill":
            arr.fill_(3.0)
        elif self.how == "assign":
            arr.assign(np.full(N, 1.5, dtype=np.float32))
        else:
            p.kept.append(arr)
            p.put(self.slot, wp.array(arr.numpy() + 1.0, dtype=float, device=p.device))
        return True


@dataclass(frozen=True)
class Churn(Construct):
    """``slot += 0.25`` every step, through its holder: state that moves, so that values rarely
    agree by chance (most programs churn most slots)."""

    slot: int = 0

    def step(self, p, k, frame):
        wp.launch(PK.churn, dim=N, inputs=[p.get(self.slot)], device=p.device)


CONSTRUCTS: tuple[type[Construct], ...] = (
    Launch, Dim, Swap, Copy, Fill, Temp, Staging, Readback, Struct, Sequence, View, FirstCall, Mutate,
)  # fmt: skip
_WEIGHTS = (5, 2, 4, 2, 2, 2, 1, 1, 2, 2, 2, 2, 3)


# -- a program and its producer ----------------------------------------------------------------------


@dataclass(frozen=True)
class Program:
    """Slots (how each state array is held) and the constructs of one ``step()``."""

    slots: tuple[str, ...]
    constructs: tuple[Construct, ...]

    def canonical(self) -> Program:
        """The same program with every slot reference within the slots (``i % len(slots)``)."""
        n = len(self.slots)
        constructs = tuple(
            dataclasses.replace(c, **{f.name: getattr(c, f.name) % n for f in dataclasses.fields(c) if f.name in SLOTS})
            for c in self.constructs
        )
        return Program(self.slots, constructs)

    def simpler(self) -> Iterator[Program]:
        """Programs one step smaller: a construct fewer, a slot fewer, a holder an attribute,
        a construct one knob simpler."""
        for i in range(len(self.constructs)):
            if len(self.constructs) > 1:
                yield Program(self.slots, self.constructs[:i] + self.constructs[i + 1 :])
        if len(self.slots) > 1:
            yield Program(self.slots[:-1], self.constructs).canonical()
        for i, holder in enumerate(self.slots):
            if holder != "attr":
                yield Program((*self.slots[:i], "attr", *self.slots[i + 1 :]), self.constructs)
        for i, c in enumerate(self.constructs):
            for simpler in c.simpler():
                yield Program(self.slots, (*self.constructs[:i], simpler, *self.constructs[i + 1 :]))


class _Sub:
    """A sub-object holding arrays as attributes (``producer.state.s0``)."""


class Generated:
    """The producer a :class:`Program` describes: its slots on their holders, ``own[k]`` for
    what construct ``k`` keeps, and ``step()``."""

    def __init__(self, program: Program, device: str = DEVICE) -> None:
        self.program = program
        self.device = device
        self.frame = 0
        self.fields: dict[str, Any] = {}
        self.ring: list[Any] = [None] * len(program.slots)
        self.state = _Sub()
        self.own: list[dict[str, Any]] = [{} for _ in program.constructs]
        self.kept: list[Any] = []  # arrays rebound away, kept alive where graphcheck does not look
        for i in range(len(program.slots)):
            start = np.arange(N, dtype=np.float32) * 0.25 + (i + 1)
            self.put(i, wp.array(start, dtype=float, device=device))
        for k, c in enumerate(program.constructs):
            c.init(self, k)

    def index(self, i: int) -> int:
        return i % len(self.program.slots)

    def get(self, i: int) -> Any:
        i = self.index(i)
        holder = self.program.slots[i]
        if holder == "attr":
            return getattr(self, f"s{i}")
        if holder == "dict":
            return self.fields[f"s{i}"]
        if holder == "list":
            return self.ring[i]
        return getattr(self.state, f"s{i}")

    def put(self, i: int, arr: Any) -> None:
        i = self.index(i)
        holder = self.program.slots[i]
        if holder == "attr":
            setattr(self, f"s{i}", arr)
        elif holder == "dict":
            self.fields[f"s{i}"] = arr
        elif holder == "list":
            self.ring[i] = arr
        else:
            setattr(self.state, f"s{i}", arr)

    def step(self) -> None:
        self.frame += 1
        for k, c in enumerate(self.program.constructs):
            c.step(self, k, self.frame)

    def arrays(self) -> dict[str, Any]:
        """Every device array it holds, by path (what a user reads after stepping)."""
        found = {f"s{i}": self.get(i) for i in range(len(self.program.slots))}
        # An array rebound away is still written by what kept it (a wp.Launch recorded at init).
        found.update({f"kept[{i}]": arr for i, arr in enumerate(self.kept)})
        for k, own in enumerate(self.own):
            for name, value in own.items():
                if isinstance(value, wp.array) and value.device == wp.get_device(self.device):
                    found[f"own[{k}].{name}"] = value
        return found


# -- judging -----------------------------------------------------------------------------------------

OUTCOMES = ("agree", "false alarm", "miss", "values blind", "late drift", "no graph")


@dataclass
class Judged:
    """A program's verdict (graphcheck's findings), its truth (the first path whose values
    differ after a replay, or None) and the outcome."""

    program: Program
    findings: list[str] = field(default_factory=list)
    wrong: str | None = None
    outcome: str = "agree"
    report: str = ""

    def __str__(self) -> str:
        verdict = "; ".join(self.findings) or "safe"
        truth = f"differs: {self.wrong}" if self.wrong else "replays equal eager stepping"
        return f"{self.outcome}: graphcheck says {verdict}; by values, {truth}\n  {self.program!r}"


def first_difference(eager: Generated, replayed: Generated) -> str | None:
    """The first path at which the two producers' arrays differ, with both values."""
    ours, theirs = eager.arrays(), replayed.arrays()
    for path in sorted(ours.keys() | theirs.keys()):
        if path not in ours or path not in theirs:
            return f"{path} held by one producer only"
        x, y = ours[path].numpy(), theirs[path].numpy()
        if x.shape != y.shape or x.tobytes() != y.tobytes():
            return f"{path}: {x.tolist()} stepping eagerly, {y.tolist()} replayed"
    return None


def judge(program: Program, replays: int = REPLAYS) -> Judged:
    """Capture one producer of ``program`` with graphcheck, replay it beside an eager twin,
    and say whether graphcheck's verdict agrees with the values."""
    eager, replayed = Generated(program), Generated(program)
    checked = gc.capture(replayed.step, device=DEVICE, owners=(replayed,), on_failure="ignore", replay_check="never")
    findings = list(checked.report.findings)
    judged = Judged(program, report=str(checked.report))
    if checked.graph is None:
        judged.findings = [f"{f.kind} ({f.arg})" for f in findings]
        judged.outcome = "no graph"
        return judged
    for _ in range(checked.eager_calls):
        eager.step()
    for replay in range(replays):
        changed = False
        for k, c in enumerate(program.constructs):
            changed |= c.between(eager, k, replay)
            c.between(replayed, k, replay)
        if changed:
            check = checked.check_replay(on_failure="ignore")
            findings += check.findings
            judged.report += f"\nbefore replay {replay}: {check}"
        eager.step()
        checked.launch()
        if judged.wrong is None:
            difference = first_difference(eager, replayed)
            if difference is not None:
                judged.wrong = f"after replay {replay + 1}: {difference}"
    judged.findings = [f"{f.kind} ({f.arg})" if f.arg else f.kind for f in findings]
    judged.outcome = outcome(program, bool(findings), judged.wrong is not None)
    return judged


def outcome(program: Program, unsafe: bool, wrong: bool) -> str:
    if unsafe == wrong:
        return "agree"
    if unsafe:
        return "values blind" if any(c.blind for c in program.constructs) else "false alarm"
    return "late drift" if any(c.late for c in program.constructs) else "miss"


# -- generating and shrinking ---------------------------------------------------------------------


def _construct(rng: random.Random, slots: int) -> Construct:
    cls = rng.choices(CONSTRUCTS, weights=_WEIGHTS)[0]
    values: dict[str, Any] = {}
    pair = rng.sample(range(slots), 2)
    for f in dataclasses.fields(cls):
        if f.name in ("out", "a", "dst", "slot"):
            values[f.name] = pair[0]
        elif f.name in ("src", "b", "field"):
            values[f.name] = pair[1]
        elif f.name == "times":
            values[f.name] = rng.choice((1, 1, 2))
        elif f.name == "mirror":
            values[f.name] = rng.random() < 0.4
        elif f.name == "at":
            values[f.name] = rng.choice((1, 2, 3))
        elif isinstance(f.default, str) and f.default in SCHEDULES:
            values[f.name] = rng.choice(SCHEDULES)
        else:
            values[f.name] = rng.choice(getattr(cls, f"{f.name}_choices"))
    return cls(**values)


def generate(seed: int) -> Program:
    """The program of ``seed``: 2 to 4 slots on random holders, 1 to 4 constructs, then most
    slots churned."""
    rng = random.Random(seed)
    slots = tuple(rng.choice(HOLDERS) for _ in range(rng.randint(2, 4)))
    constructs = tuple(_construct(rng, len(slots)) for _ in range(rng.randint(1, 4)))
    churns = tuple(Churn(i) for i in range(len(slots)) if rng.random() < 0.75)
    return Program(slots, constructs + churns)


def shrink(program: Program, want: str, budget: int = 200) -> Program:
    """The smallest program :meth:`Program.simpler` reaches whose outcome is still ``want``."""
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for smaller in program.simpler():
            tries += 1
            if judge(smaller).outcome == want:
                program, improved = smaller, True
                break
    return program


def table(judged: list[Judged], by: str = "kind") -> str:
    """Outcome counts per construct kind (``by="kind"``) or label (``by="label"``): a program
    counts once in the row of every construct it has."""
    rows: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for j in judged:
        rows["(all programs)"][j.outcome] += 1
        names = {type(c).__name__ if by == "kind" else c.label() for c in j.program.constructs}
        names |= {f"held in {h}" for h in j.program.slots} if by == "kind" else set()
        for name in names:
            rows[name][j.outcome] += 1
    width = max(len(name) for name in rows) + 2
    lines = [f"{'construct':<{width}}" + "".join(f"{o:>14}" for o in OUTCOMES)]
    for name in sorted(rows, key=lambda n: (n != "(all programs)", n)):
        lines.append(f"{name:<{width}}" + "".join(f"{rows[name][o]:>14}" for o in OUTCOMES))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.generator", description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000, help="how many programs (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--labels", action="store_true", help="also the table by construct label")
    parser.add_argument("--no-shrink", action="store_true", help="do not shrink the disagreements")
    args = parser.parse_args(argv)
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    start = time.perf_counter()
    judged, seeds = [], {}
    for seed in range(args.seed, args.seed + args.count):
        j = judge(generate(seed))
        judged.append(j)
        seeds[id(j)] = seed
    elapsed = time.perf_counter() - start
    print(f"{len(judged)} programs (seeds {args.seed} to {args.seed + args.count - 1}) in {elapsed:.1f} s\n")
    print(table(judged))
    if args.labels:
        print()
        print(table(judged, by="label"))
    disagreements = [j for j in judged if j.outcome in ("false alarm", "miss")]
    if disagreements and not args.no_shrink:
        print(f"\n{len(disagreements)} disagreements, shrunk:")
        shrunk: dict[str, list[int]] = collections.defaultdict(list)
        shown: dict[str, Judged] = {}
        for j in disagreements:
            small = shrink(j.program, j.outcome)
            key = repr(small)
            shrunk[key].append(seeds[id(j)])
            shown.setdefault(key, judge(small))
        for key, found in sorted(shrunk.items(), key=lambda kv: -len(kv[1])):
            more = f" and {len(found) - 5} more" if len(found) > 5 else ""
            print(f"\n[{len(found)} programs: seeds {found[:5]}{more}] {shown[key]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
