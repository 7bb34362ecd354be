"""The hooks graphcheck puts into Warp, and the one object that installs and removes them.

While a trace is active, every operation Warp enqueues passes a hook that reports it to
the recording session of the current context (:mod:`graphcheck._session`).

The interposition points (Warp 1.15 to 1.19; what differs: see ``WARP_INTERNALS``):

============================  ====================================================
``context.launch``            woven: the function's code object is replaced by
                              Warp's own source compiled again with a prologue and
                              an epilogue, so ``wp.launch``, ``launch_tiled``,
                              adjoint copies and a ``launch`` bound early by
                              ``from warp import launch`` all pass, and no
                              graphcheck frame stands between the caller and Warp;
                              its call of ``invoke`` records the commonest launch
``context.copy``              woven, the same way: ``wp.copy``, ``array.assign``,
                              ``clone`` and the second copy Warp makes for gradients
``Launch.launch``             woven: ``wp.Launch`` replays
``context.invoke``            woven: every other CPU launch, with the exact
``invoke_cpu_blocks``         parameter objects Warp passes (the second: 1.18+)
``core.wp_cpu_launch_kernel`` ctypes attribute: CPU launches inside a capture
``core.wp_cuda_launch_kernel`` ctypes attribute: every CUDA launch
``array.zero_`` / ``fill_``   class attributes: memsets and fills
``capture_if``                module attributes (also ``wp.``): conditional
``capture_while``             graphs, their bodies' operations marked nested
``context.capture_resume``    module global: the body graphs those two capture into
``array.numpy``               readbacks and synchronisations (class and module
``synchronize*``              attributes): a CPU capture runs them, a CUDA one cannot
``array._init_new``           woven: allocations, arrays made from data (Warp's
``_init_from_data``           allocation tracker names the first frame outside Warp)
``core.wp_<native helper>``   ctypes attributes: sort, scan, reductions, hash grid,
                              BVH and mesh builds, recorded as opaque operations
``core.wp_*_host``            ctypes attributes: every other host entry point that
``wp_memcpy_h2h``             does work (the sparse helpers, a raw copy...), and the
cpu ``Device.memset/memtile`` CPU device's bound memset and fill: each call is part
                              of the operation in progress, or one of its own
``launch_deterministic``      module attribute: a deterministic-mode launch's own
                              native work, one opaque operation around its phases
``core.wp_apic_cpu_replay_*`` ctypes attributes: ``wp.capture_launch`` of a CPU graph
``Mesh`` ... ``Texture``      ``__init__`` (class attributes): structures made while
``.__init__``                 recording, as allocations of their ids
============================  ====================================================

Hooks are installed while at least one trace is active anywhere in the process and
removed when the last one ends: while nothing is recorded, Warp runs untouched.

It is longer than most modules on purpose: every interposition point is planned, woven or
wrapped, installed and removed here, beside the table above, so that a Warp release that
moves one internal changes this module alone; the weaving of Warp's own functions serves
only these hooks.
"""

from __future__ import annotations

import contextvars
import ctypes
import functools
import inspect
import re
import sys
import types
import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import warp as wp
import warp._src.codegen as _codegen
import warp._src.context as _context
import warp._src.types as _types

from .._warnings import GraphCheckWarning, user_stacklevel
from ..site import qualified_name
from .cpu_graph import SET_UP, node_type_for
from .objects import stream_handle, structure_classes
from .version import _COPY_INTENT, _CPU_INVOKERS, _LAUNCH_INTENT, _NATIVE_HELPER, _fail, _runtime, check_warp

# --------------------------------------------------------------------------------------
# Sessions: who records in this context
# --------------------------------------------------------------------------------------

#: The recording session of the current context (thread or task), or None. A session is
#: used by one thread only: a thread that inherits another's context (``asyncio.to_thread``)
#: gets its own (:func:`current_session`), so a call in progress is never another thread's.
ACTIVE: contextvars.ContextVar[Any] = contextvars.ContextVar("graphcheck_session", default=None)

LAUNCH, REPLAY = "launch", "replay"

#: Where the fields of a pending call stand in the tuple a woven prologue sets:
#: ``(LAUNCH, caller frame, *intent)`` with the intent in ``_LAUNCH_INTENT``'s order, or
#: ``(REPLAY, caller frame, command)``. The frame is held only while the call runs.
PENDING_KIND, PENDING_FRAME, PENDING_KERNEL = 0, 1, 2
PENDING_COMMAND = PENDING_KERNEL
PENDING_MAX_BLOCKS, PENDING_BLOCK_DIM, PENDING_ADJOINT = (
    PENDING_KERNEL + _LAUNCH_INTENT.index(name) for name in ("max_blocks", "block_dim", "adjoint")
)


class Recorder(NamedTuple):
    """What the recording session (:mod:`graphcheck._session`) gives the hooks for the
    eager CPU launch, the one every CPU ``wp.launch`` makes.

    Attributes:
        launch_test: an expression woven into ``wp.launch`` where it calls
            ``invoke(kernel, hooks, params, adjoint)``, with ``launch``'s locals and
            ``_graphcheck_session`` (not None) and ``_graphcheck_caller`` (the frame that
            called ``wp.launch``): whether ``launch_record`` records this launch. It
            may raise ``TypeError``, which means no.
        launch_record: the statement that then records it; the launch is not seen by
            ``invoke``'s prologue.
        invoke_prologues: woven into ``invoke`` and ``invoke_cpu_blocks`` (by their
            argument names ``kernel, hooks, params, adjoint``): every other CPU launch.
        invoke_hook: makes a hook in place of an ``invoke`` with other argument names,
            from the original and whether it is ``invoke_cpu_blocks``.
        woven_globals: the names the woven code uses, put in Warp's module globals.
    """

    launch_test: str
    launch_record: str
    invoke_prologues: tuple[str, str]
    invoke_hook: Callable[[Callable[..., Any], bool], Callable[..., Any]]
    woven_globals: Mapping[str, Any]


def current_session() -> Any:
    """The recording session of the current context and thread, or None."""
    session = ACTIVE.get()
    if session is not None and not session.owner._is_owned():
        session = session.rebind()
    return session


# --------------------------------------------------------------------------------------
# Hooks: how they go in and out
# --------------------------------------------------------------------------------------
#
# Every change graphcheck makes to Warp is a _Patch: an attribute of a module, class or
# ctypes library set to a hook, or a function's code object set to a woven copy of its
# own source. One object, HOOKS, owns them all and undoes them in one loop. Setting
# either way is idempotent (a patch knows Warp's original by name and never wraps
# whatever happens to be there), so an interrupt at any step leaves a state the next
# install or removal completes, and installing twice is the same as installing once.
#
# The patches on one namespace (a Warp module, the native library's ctypes functions) go
# in and out as one update of its `__dict__`: setting one of those attributes is setting
# that entry, and one update is one step an interrupt cannot split. A class's attributes
# and a function's code are set one by one (setattr keeps a class's caches right).
#
# A hook stays callable after it is removed: a thread still inside one forwards to Warp,
# whose original it holds for good; a woven function's globals (the few `_graphcheck_*`
# names in Warp's module) stay too, inert, for a thread still running its old code.


class _Patch:
    """One attribute of Warp set to a hook; ``original`` is Warp's own value."""

    __slots__ = ("label", "name", "original", "owner", "replacement")

    def __init__(self, label: str, owner: Any, name: str, replacement: Any) -> None:
        self.label = label
        self.owner = owner
        self.name = name
        self.original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        self.replacement = replacement

    def in_place(self) -> bool:
        owner, name = self.owner, self.name
        current = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        return current is self.replacement


class Hooks:
    """Every hook graphcheck puts into Warp, installed and removed as one.

    Attributes:
        state: ``"out"``, ``"in"``, or ``"partial"`` while (or after an interrupted)
            install or removal.
        checkpoint: a test hook, called with each step's label before the step (``"install
            wp.launch"``, ``"stop: trace ended"``) to inject an interrupt there; None in use.
    """

    def __init__(self) -> None:
        self._patches: list[_Patch] | None = None
        # (label, put the hooks in, put Warp's own back) per step: see _steps
        self._steps: list[tuple[str, Callable[[], None], Callable[[], None]]] = []
        self._stepped: list[_Patch] | None = None  # the patches _steps was made from
        self.state = "out"
        self.checkpoint: Callable[[str], None] | None = None

    def install(self, recorder: Recorder) -> None:
        """Put every hook in place (nothing happens when they already are).

        Args:
            recorder: what the recording session weaves into Warp's CPU launch path
                (``wp.launch``'s call of ``invoke``, and ``invoke``'s prologue).
        """
        if self.state == "in":
            return
        check_warp()
        self._plan(recorder)
        self.state = "partial"
        checkpoint = self.checkpoint  # (a local: every gc.capture installs and removes every step)
        for label, put_in, _ in self._steps:
            if checkpoint is not None:
                checkpoint(f"install {label}")
            put_in()
        self.state = "in"

    def remove(self) -> None:
        """Put Warp's own back everywhere (nothing happens when nothing is installed)."""
        if self.state == "out":
            return
        self.state = "partial"
        checkpoint = self.checkpoint
        for label, _, take_out in reversed(self._steps):
            if checkpoint is not None:
                checkpoint(f"remove {label}")
            take_out()
        self.state = "out"

    def left_behind(self) -> list[str]:
        """Labels of the hooks in place right now."""
        return [p.label for p in self._patches or () if p.in_place()]

    def _plan(self, recorder: Recorder) -> None:
        if self._patches is None:
            self._patches = _plan_patches(recorder)
        if self._stepped is not self._patches:  # the steps are made from the patches planned now
            self._steps, self._stepped = _steps(self._patches), self._patches


def _steps(patches: list[_Patch]) -> list[tuple[str, Callable[[], None], Callable[[], None]]]:
    """``(label, put in, take out)`` of every step that installs ``patches``, in order: the
    patches on one namespace (a module, or an object whose attributes live in its
    ``__dict__``) as one update of it, at the place of its first patch; the others one by one."""
    order: list[Any] = []  # a patch, or the owner of a namespace's patches
    namespaces: dict[int, list[_Patch]] = {}
    for patch in patches:
        owner = patch.owner
        if isinstance(owner, (type, types.FunctionType)) or type(getattr(owner, "__dict__", None)) is not dict:
            order.append(patch)
        elif id(owner) in namespaces:
            namespaces[id(owner)].append(patch)
        else:
            namespaces[id(owner)] = [patch]
            order.append(owner)
    steps: list[tuple[str, Callable[[], None], Callable[[], None]]] = []
    for item in order:
        if isinstance(item, _Patch):
            steps.append((item.label, functools.partial(setattr, item.owner, item.name, item.replacement),
                          functools.partial(setattr, item.owner, item.name, item.original)))  # fmt: skip
            continue
        group = namespaces[id(item)]
        update = item.__dict__.update
        label = f"{getattr(item, '__name__', None) or type(item).__name__} ({', '.join(p.label for p in group)})"
        steps.append((label, functools.partial(update, {p.name: p.replacement for p in group}),
                      functools.partial(update, {p.name: p.original for p in group})))  # fmt: skip
    return steps


HOOKS = Hooks()


def hooks_installed() -> bool:
    """Whether any graphcheck hook is in place right now."""
    return HOOKS.state != "out" or bool(HOOKS.left_behind())


Site = tuple[str, str]  # (a statement in a woven function's body, what takes its place)
NO_SITE: Site = ("", "")  # the body stays as it is


def _takes_invoke_prologue(invoker: Any) -> bool:
    """Whether a CPU invoker of Warp's has the argument names invoke's prologue reads (it
    is woven; else a hook stands in its place)."""
    return bool(invoker.__code__.co_varnames[:4] == ("kernel", "hooks", "params", "adjoint"))


def _plan_patches(recorder: Recorder) -> list[_Patch]:
    core = _runtime().core
    patches: list[_Patch] = []

    def attr(label: str, owner: Any, name: str, hook: Any) -> None:
        patches.append(_Patch(label, owner, name, hook))

    def weave(label: str, fn: Any, prologue: str, on_error: str, epilogue: str, site: Site = NO_SITE) -> None:
        patches.append(_Patch(label, fn, "__code__", _weave(fn, prologue, on_error, epilogue, site)))

    # Warp's CPU invoke as it is, for wp.launch to call once it has recorded the launch
    # itself; None where invoke is not woven (the hook in its place records every launch).
    invoke = _context.invoke
    woven_invoke = _takes_invoke_prologue(invoke)
    invoke_globals = {
        "_graphcheck_invoke": invoke if woven_invoke else None,
        "_graphcheck_invoke_unwoven": _copy_function(invoke) if woven_invoke else None,
    }
    for name, value in {**_WOVEN_GLOBALS, **invoke_globals, **recorder.woven_globals}.items():  # stay for good
        _context.__dict__[name] = value
        _types.__dict__[name] = value

    # Kernel launches: the Python entry points, for what the user asked. Woven, so that
    # Warp sees the caller it sees without graphcheck (the Tape's caller metadata, the
    # stack level of its warnings) and `from warp import launch` is reached too. Its call
    # of the CPU invoke records the commonest launch in wp.launch's own frame, where the
    # caller and what the user asked are at hand (see _LAUNCH_INVOKE_SITE).
    site = _LAUNCH_INVOKE_SITE.format(test=recorder.launch_test, record=_indent(recorder.launch_record, 4))
    weave("wp.launch", _context.launch, _LAUNCH_PROLOGUE, "", _PENDING_EPILOGUE, (_LAUNCH_INVOKE_CALL, site))
    # wp.launch_tiled resolves its block size (1 on the CPU) before it calls launch: the
    # size the user asked for is known only here, and a CUDA graph bakes it.
    weave("wp.launch_tiled", _context.launch_tiled, _TILED_PROLOGUE, "", _TILED_EPILOGUE)
    weave("wp.Launch.launch", _context.Launch.launch, _REPLAY_PROLOGUE, "", _PENDING_EPILOGUE)

    # Kernel launches: where the parameter block leaves Python (every CPU launch the
    # launch site did not record). Woven; a hook in its place where Warp's invoke takes
    # other arguments than the prologue reads.
    for name, blocks in _CPU_INVOKERS:
        invoker = getattr(_context, name)
        if _takes_invoke_prologue(invoker):
            weave(name, invoker, recorder.invoke_prologues[blocks], "", "pass")
        else:
            attr(name, _context, name, recorder.invoke_hook(invoker, blocks))
    attr("wp_cpu_launch_kernel", core, "wp_cpu_launch_kernel", _make_cpu_capture_launch_hook(core.wp_cpu_launch_kernel))
    attr("wp_cuda_launch_kernel", core, "wp_cuda_launch_kernel", _make_cuda_launch_hook(core.wp_cuda_launch_kernel))

    # Copies (woven: Warp names the copy's caller in its write-after-read warning), memsets, fills.
    weave("wp.copy", _context.copy, _op_prologue("copy", _COPY_INTENT), _OP_ON_ERROR, _OP_EPILOGUE)
    for cls in (_types.array, _types.noncontiguous_array_base):
        for method in ("zero_", "fill_"):
            original = cls.__dict__[method]
            attr(f"{cls.__name__}.{method}", cls, method, _make_memset_hook(method, original))

    # Conditional graphs: their bodies run as often as the data says when eager.
    for name in ("capture_if", "capture_while"):
        original = getattr(_context, name)
        conditional = _make_conditional_hook(name, original)
        attr(name, _context, name, conditional)
        if getattr(wp, name, None) is original:
            attr(f"wp.{name}", wp, name, conditional)
    attr("capture_resume", _context, "capture_resume", _make_capture_resume_hook(_context.capture_resume))

    # Readbacks and synchronisation: a CPU capture runs them, a CUDA capture cannot.
    for cls, method in ((_types.array, "numpy"), (_types.noncontiguous_array_base, "numpy")):
        attr(f"{cls.__name__}.{method}", cls, method, _host_sync_hook(f"array.{method}()", vars(cls)[method]))
    for name in _SYNCHRONIZE:
        original = getattr(_context, name)
        synchronize = _host_sync_hook(f"wp.{name}()", original)
        attr(name, _context, name, synchronize)
        if getattr(wp, name, None) is original:
            attr(f"wp.{name}", wp, name, synchronize)

    # Allocations (woven: Warp's allocation tracker names the first frame outside Warp).
    init_new, init_from_data = _types.array.__dict__["_init_new"], _types.array.__dict__["_init_from_data"]
    weave("array._init_new", init_new, _op_prologue("init_new", ("self",)), _OP_ON_ERROR, _OP_EPILOGUE)
    weave(
        "array._init_from_data", init_from_data, _op_prologue("init_from_data", ("self",)), _OP_ON_ERROR, _OP_EPILOGUE
    )

    # Deterministic mode (Warp 1.19): around a kernel's phase launches (recorded as launches),
    # Warp's deterministic launcher enqueues native work of its own (sort-reduce, counter
    # scans and write-backs, a device copy); one operation holds it.
    deterministic = sys.modules.get("warp._src.deterministic") or _import_deterministic()
    if deterministic is not None and callable(getattr(deterministic, "launch_deterministic", None)):
        original = deterministic.launch_deterministic
        attr("launch_deterministic", deterministic, "launch_deterministic", _make_deterministic_hook(original))

    # Warp's native helpers (sort, scan, reductions, spatial structures).
    for name in dir(core):
        match = _NATIVE_HELPER.match(name)
        if match:
            original = getattr(core, name)
            attr(name, core, name, _make_native_hook(name, original, match["where"] == "device"))
    # Every other call of Warp's host entry points that does work (a copy, a memset, the
    # sparse matrix helpers; a library may call them directly), and the CPU device's memset
    # and memtile, which Warp binds to wp_memset_host and wp_memtile_host once: what a CPU
    # graph holds for each call is matched to it.
    for name in dir(core):
        if _HOST_CALL.match(name) and not _NATIVE_HELPER.match(name) and node_type_for(name[3:]) != SET_UP:
            attr(name, core, name, _make_host_call_hook(name[3:], getattr(core, name)))
    cpu = _runtime().get_device("cpu")
    for method, name in (("memset", "memset_host"), ("memtile", "memtile_host")):
        if callable(vars(cpu).get(method)):
            attr(f"cpu.{method}", cpu, method, _make_host_call_hook(name, vars(cpu)[method]))
    # Structures made while recording: allocations of their ids (and a host texture's texels).
    for structure in structure_classes():
        if "__init__" in vars(structure):
            init = vars(structure)["__init__"]
            attr(f"{structure.__name__}.__init__", structure, "__init__", _make_structure_hook(init))
    # Objects that bake addresses, re-derived by the call: a command's array parameter set, a
    # struct's array field set, an indexed array made (the replay check trusts only those built
    # once). A number set (a step size each call) re-derives no address the object keeps.
    for owner, name, value_at in ((_context.Launch, "set_param_at_index", 1),
                                  (_context.Launch, "set_param_at_index_from_ctype", None),
                                  (_codegen.StructInstance, "__setattr__", 1),
                                  (_types.indexedarray, "__init__", None)):  # fmt: skip
        original = vars(owner).get(name)
        if original is not None:
            attr(f"{owner.__name__}.{name}", owner, name, _make_remade_hook(original, value_at))
    # CPU graphs replayed (wp.capture_launch): one replayed inside a CPU capture is not recorded.
    for name in _CPU_GRAPH_REPLAYS:
        original = getattr(core, name, None)
        if original is not None:
            attr(name, core, name, _make_cpu_graph_launch_hook(original))
    return patches


# -- Weaving: a Warp function's own source with a prologue and an epilogue ---------------------
#
# The woven function is Warp's function compiled again from Warp's own file, with its
# filename and line numbers: tracebacks, warnings and every stack walk Warp makes see
# the frames they see without graphcheck. Only the function's code object changes; its
# defaults, globals and identity stay.

_LAUNCH_PROLOGUE = """
_graphcheck_session = _graphcheck_active.get()
if _graphcheck_session is not None:
    if not _graphcheck_session.owner._is_owned():
        _graphcheck_session = _graphcheck_session.rebind()
    _graphcheck_caller = _graphcheck_getframe(1)
    _graphcheck_session.pending = (_graphcheck_launch, _graphcheck_caller, {intent})
""".format(intent=", ".join(_LAUNCH_INTENT))

# wp.launch's call of the CPU invoke, in every Warp graphcheck supports, and what takes its
# place: the recorder's test and record, then Warp's invoke as it is (the same code, the
# same globals), so that a launch recorded here costs no prologue in invoke. A Warp
# without this call records every CPU launch in invoke's prologue instead, as correctly
# and a little slower. Someone else's invoke in Warp's module is called as it is.
_LAUNCH_INVOKE_CALL = "invoke(kernel, hooks, params, adjoint)"
_LAUNCH_INVOKE_SITE = """
try:
    _graphcheck_fast = _graphcheck_session is not None and invoke is _graphcheck_invoke and ({test})
except TypeError:
    _graphcheck_fast = False
if _graphcheck_fast:
{record}
    _graphcheck_invoke_unwoven(kernel, hooks, params, adjoint)
else:
    invoke(kernel, hooks, params, adjoint)
"""


def _indent(text: str, by: int) -> str:
    return "\n".join(" " * by + line if line.strip() else line for line in text.strip("\n").splitlines())


def _copy_function(fn: Any) -> Any:
    """A second function object with ``fn``'s code, globals, defaults and names."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    copy.__module__ = fn.__module__
    copy.__doc__ = fn.__doc__
    return copy


_REPLAY_PROLOGUE = """
_graphcheck_session = _graphcheck_active.get()
if _graphcheck_session is not None:
    if not _graphcheck_session.owner._is_owned():
        _graphcheck_session = _graphcheck_session.rebind()
    _graphcheck_session.pending = (_graphcheck_replay, _graphcheck_getframe(1), self)
"""

_TILED_PROLOGUE = """
_graphcheck_session = _graphcheck_active.get()
if _graphcheck_session is not None:
    if not _graphcheck_session.owner._is_owned():
        _graphcheck_session = _graphcheck_session.rebind()
    _graphcheck_session.tiled = kwargs.get("block_dim")
"""

_TILED_EPILOGUE = """
if _graphcheck_session is not None:
    _graphcheck_session.tiled = None
"""

# A pending call never nests (a launch or a replay issues no other), so ending one clears it.
_PENDING_EPILOGUE = """
if _graphcheck_session is not None:
    _graphcheck_session.pending = None
"""


def _op_prologue(name: str, args: tuple[str, ...]) -> str:
    # `_graphcheck_op` is None or a callable told whether Warp's function returned (True)
    # or raised (False): a failed operation enqueued nothing.
    return f"""
_graphcheck_op = None
if _graphcheck_active.get() is not None:
    _graphcheck_op = _graphcheck_enter_{name}({", ".join(args)}, _graphcheck_getframe(1))
"""


_OP_ON_ERROR = """
if _graphcheck_op is not None:
    _graphcheck_op, _graphcheck_failed = None, _graphcheck_op
    _graphcheck_failed(False)
"""
_OP_EPILOGUE = """
if _graphcheck_op is not None:
    _graphcheck_op(True)
"""


def _weave(fn: Any, prologue: str, on_error: str, epilogue: str, site: Site = NO_SITE) -> types.CodeType:
    """``fn``'s code, recompiled from Warp's source as ``prologue; try: body except: on_error;
    raise finally: epilogue``; with a ``site`` ``(call, replacement)``, the body's one
    statement that is ``call`` is ``replacement`` instead, at the call's line (where the
    body has no such statement, or more than one, it stays as it is).

    Raises:
        UnsupportedWarpError: when the source is not available or the result would not be
            the same function.
    """
    import ast

    code = fn.__code__
    name = fn.__qualname__  # (a code object names itself so from Python 3.11 only)
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as exc:
        raise _fail(f"the source of warp {name} is not available ({exc})") from None
    qualname = name.split(".")
    # A method is compiled inside a class of its class's name, for private name mangling.
    head = f"class {qualname[-2]}:\n" if len(qualname) == 2 else ""
    if len(qualname) > 2 or (head and not lines[0].startswith("    ")) or (not head and lines[0][0].isspace()):
        raise _fail(f"warp {name} is not a module function or a method")
    tree = ast.parse(head + "".join(lines))
    ast.increment_lineno(tree, first - 1 - bool(head))
    node = tree.body[0].body[0] if head else tree.body[0]  # type: ignore[attr-defined]
    if not isinstance(node, ast.FunctionDef) or node.name != code.co_name:
        raise _fail(f"the source of warp {name} is not a plain function")
    node.decorator_list = []
    body = node.body
    doc = body[:1] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else []

    def statements(text: str, line: int = node.lineno) -> list[ast.stmt]:
        parsed = ast.parse(text).body
        for stmt in parsed:
            for sub in ast.walk(stmt):
                if hasattr(sub, "lineno"):
                    sub.lineno = sub.end_lineno = line  # type: ignore[attr-defined]
                    sub.col_offset = sub.end_col_offset = 0  # type: ignore[attr-defined]
        return parsed

    call, replacement = site
    if call:
        found = [
            (block, i)
            for parent in ast.walk(node)
            for field in ("body", "orelse", "finalbody")
            for block in [getattr(parent, field, None)]
            if isinstance(block, list)
            for i, stmt in enumerate(block)
            if isinstance(stmt, ast.Expr) and ast.unparse(stmt) == call
        ]
        if len(found) == 1:
            block, i = found[0]
            block[i : i + 1] = statements(replacement, block[i].lineno)

    handlers = []
    if on_error:
        handler = statements("try:\n    pass\nexcept BaseException:\n    pass\n")[0].handlers  # type: ignore[attr-defined]
        handler[0].body = [*statements(on_error), ast.Raise(lineno=node.lineno, col_offset=0)]
        handlers = handler
    guarded = ast.Try(body=body[len(doc):] or [ast.Pass()], handlers=handlers, orelse=[],
                      finalbody=statements(epilogue))  # fmt: skip
    guarded.lineno = guarded.end_lineno = node.lineno
    guarded.col_offset = guarded.end_col_offset = 0
    node.body = [*doc, *statements(prologue), guarded]
    ast.fix_missing_locations(tree)
    import __future__

    compiled = compile(tree, code.co_filename, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    namespace: dict[str, Any] = {}
    exec(compiled, fn.__globals__, namespace)
    made = namespace[qualname[0]]
    woven = (made.__dict__[code.co_name] if head else made).__code__
    same = (
        woven.co_argcount == code.co_argcount
        and woven.co_posonlyargcount == code.co_posonlyargcount
        and woven.co_kwonlyargcount == code.co_kwonlyargcount
        and woven.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        == code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        and (woven.co_flags ^ code.co_flags) & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) == 0
        and woven.co_freevars == code.co_freevars
        and set(code.co_names) <= set(woven.co_names)
        and qualified_name(woven) == qualified_name(code)
    )
    if not same:
        raise _fail(f"warp {name} compiled from its source is not the installed function")
    return woven


# --------------------------------------------------------------------------------------
# Hooks: what they do
# --------------------------------------------------------------------------------------
#
# The hook bodies stay small: while a trace is active every launch of the process passes
# through them, and those of other threads and tasks leave after one ContextVar lookup.
# A pending call is (LAUNCH, caller frame, *intent) or (REPLAY, caller frame, command),
# the intent being _LAUNCH_INTENT's arguments; the frame is held only while the call runs.
# Each hook holds Warp's original itself, so it forwards to Warp even after its removal.


def _make_cpu_capture_launch_hook(original: Any) -> Callable[..., Any]:
    def wp_cpu_launch_kernel(func: Any, bounds_ref: Any, args_ref: Any, adj_ref: Any, info_ref: Any) -> Any:
        session = current_session()
        if session is not None:
            session.on_cpu_capture_launch(bounds_ref, args_ref, adj_ref)
        return original(func, bounds_ref, args_ref, adj_ref, info_ref)

    return wp_cpu_launch_kernel


def _make_cuda_launch_hook(original: Any) -> Callable[..., Any]:
    def wp_cuda_launch_kernel(
        context: Any,
        func: Any,
        dim_size: int,
        max_blocks: int,
        block_dim: int,
        grid_stride: int,
        cluster_dim: int,
        smem_bytes: int,
        kernel_params: Any,
        stream: Any,
        apic_info: Any,
    ) -> Any:
        session = current_session()
        if session is None:
            return original(
                context, func, dim_size, max_blocks, block_dim, grid_stride, cluster_dim, smem_bytes,
                kernel_params, stream, apic_info,
            )  # fmt: skip
        try:
            record = session.on_cuda_launch(
                func, dim_size, max_blocks, block_dim, grid_stride, cluster_dim, smem_bytes, kernel_params, stream,
                context,
            )  # fmt: skip
        except Exception as error:  # graphcheck's own failure never stops the user's launch
            record, unrecorded = None, error
        failed = original(
            context, func, dim_size, max_blocks, block_dim, grid_stride, cluster_dim, smem_bytes,
            kernel_params, stream, apic_info,
        )  # fmt: skip
        if record is None:
            warnings.warn(
                f"graphcheck could not record a CUDA launch ({type(unrecorded).__name__}: {unrecorded}): the launch "
                "ran, but graphcheck's checks of this call do not cover it; please report this to graphcheck",
                GraphCheckWarning,
                stacklevel=user_stacklevel(),
            )
        elif failed:
            session.retract(record)  # Warp raises its own error; nothing was enqueued
        else:
            session.after_cuda_op(record, stream_handle(stream))
        return failed

    return wp_cuda_launch_kernel


def _enter_copy(
    dest: Any, src: Any, dest_offset: Any, src_offset: Any, count: Any, stream: Any, frame: Any
) -> Callable[[bool], None] | None:
    session = current_session()
    if session is None:
        return None
    record = session.on_copy((dest, src, dest_offset, src_offset, count, stream), frame)
    if record is None:
        return None
    return lambda returned: session.finish(record, returned)


def _make_memset_hook(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def hook(self: Any, *args: Any, **kwargs: Any) -> Any:
        session = current_session()
        if session is None:
            return original(self, *args, **kwargs)
        return session.on_memset(original, name, self, args, kwargs)

    hook.__name__ = hook.__qualname__ = name
    return hook


def _enter_init_new(arr: Any, frame: Any) -> Callable[[bool], None] | None:
    session = current_session()
    if session is None:
        return None

    def done(returned: bool) -> None:
        if returned:
            session.on_alloc(arr, "allocated")

    return done


def _enter_init_from_data(arr: Any, frame: Any) -> Callable[[bool], None] | None:
    session = current_session()
    if session is None:
        return None
    before = session.allocations_seen
    session.uploading += 1  # what Warp allocates in here is filled from host data

    def done(returned: bool) -> None:
        session.uploading -= 1
        if returned and session.allocations_seen == before:
            # Warp wrapped the caller's host memory instead of allocating: still a buffer
            # that exists only for this call.
            session.on_alloc(arr, "wrapped")

    return done


_SYNCHRONIZE = ("synchronize", "synchronize_device", "synchronize_stream", "synchronize_event")


def _host_sync_hook(what: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """A readback or synchronisation: noted, then done as Warp does it."""

    def hook(*args: Any, **kwargs: Any) -> Any:
        session = current_session()
        if session is not None:
            session.on_host_sync(what)
        return original(*args, **kwargs)

    hook.__name__ = hook.__qualname__ = getattr(original, "__name__", what)
    hook.__doc__ = original.__doc__
    return hook


def _make_conditional_hook(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def hook(condition: Any, *args: Any, **kwargs: Any) -> Any:
        session = current_session()
        if session is None:
            return original(condition, *args, **kwargs)
        return session.on_conditional(original, name, condition, args, kwargs)

    hook.__name__ = hook.__qualname__ = name
    hook.__doc__ = original.__doc__
    return hook


def _make_capture_resume_hook(original: Callable[..., Any]) -> Callable[..., Any]:
    def capture_resume(graph: Any, *args: Any, **kwargs: Any) -> Any:
        # capture_if / capture_while resume the capture into each body graph: the session
        # learns the bodies here, Graph branches and bodies without a recorded operation too.
        result = original(graph, *args, **kwargs)
        session = current_session()
        if session is not None:
            session.on_capture_resume(graph)
        return result

    capture_resume.__doc__ = original.__doc__
    return capture_resume


def _import_deterministic() -> Any:
    try:
        from warp._src import deterministic
    except ImportError:  # a Warp without deterministic mode
        return None
    return deterministic


def _make_deterministic_hook(original: Callable[..., Any]) -> Callable[..., Any]:
    def launch_deterministic(*args: Any, **kwargs: Any) -> Any:
        session = current_session()
        if session is None:
            return original(*args, **kwargs)
        return session.on_deterministic(original, args, kwargs)

    launch_deterministic.__doc__ = original.__doc__
    return launch_deterministic


def _make_native_hook(name: str, original: Any, on_device: bool) -> Callable[..., Any]:
    label = name[3:]

    def hook(*args: Any) -> Any:
        session = current_session()
        if session is None:
            return original(*args)
        return session.on_native(original, label, on_device, args)

    hook.__name__ = name
    return hook


def _make_remade_hook(original: Callable[..., Any], value_at: int | None) -> Callable[..., Any]:
    """A hook telling the session that ``self`` was re-derived; with ``value_at``, only when
    the value set (that positional argument) may hold an address (see :func:`_holds_addresses`)."""

    @functools.wraps(original)
    def hook(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        session = current_session()
        if session is not None and (value_at is None or len(args) <= value_at or _holds_addresses(args[value_at])):
            session.on_remade(self)
        return result

    return hook


def _holds_addresses(value: Any) -> bool:
    """Whether a value set on a command or a struct may hold an address: anything but a
    number or a vector, matrix or quaternion (ctypes arrays in Warp): an array, a struct,
    None in place of an array..."""
    return not isinstance(value, (bool, int, float, _types.scalar_base, ctypes.Array)) and not (
        type(value).__module__ == "numpy" and getattr(value, "shape", None) == ()
    )


def _make_structure_hook(original: Callable[..., Any]) -> Callable[..., Any]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        session = current_session()
        if session is None:
            return original(self, *args, **kwargs)
        place = session.structure_place()  # before the operations that fill it
        original(self, *args, **kwargs)
        session.on_structure(self, place)
        return None

    __init__.__qualname__ = original.__qualname__
    __init__.__doc__ = original.__doc__
    return __init__


#: Warp's host entry points: its CPU launch and copy, and every ``wp_*_host`` function.
_HOST_CALL = re.compile(r"^wp_(\w+_host|memcpy_h2h)$")


def _make_host_call_hook(name: str, original: Any) -> Callable[..., Any]:
    def hook(*args: Any) -> Any:
        session = current_session()
        if session is None:
            return original(*args)
        return session.on_host_call(original, name, args)

    hook.__name__ = f"wp_{name}"
    return hook


#: Warp's native CPU graph replays: a captured graph, and one loaded from a file (1.19+).
_CPU_GRAPH_REPLAYS = ("wp_apic_cpu_replay_state", "wp_apic_cpu_replay_graph")


def _make_cpu_graph_launch_hook(original: Any) -> Callable[..., Any]:
    def hook(*args: Any) -> Any:
        session = current_session()
        if session is None:
            return original(*args)
        return session.on_cpu_graph_launch(original, args)

    return hook


#: What woven functions find in their module's globals.
_WOVEN_GLOBALS: dict[str, Any] = {
    "_graphcheck_active": ACTIVE,
    "_graphcheck_getframe": sys._getframe,
    "_graphcheck_launch": LAUNCH,
    "_graphcheck_replay": REPLAY,
    "_graphcheck_enter_copy": _enter_copy,
    "_graphcheck_enter_init_new": _enter_init_new,
    "_graphcheck_enter_init_from_data": _enter_init_from_data,
}


# --------------------------------------------------------------------------------------
# Native helpers' arguments, by role
# --------------------------------------------------------------------------------------
