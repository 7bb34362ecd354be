"""Everything graphcheck knows about Warp's internals, in one place.

No other module of graphcheck imports ``warp._src`` or reaches into a Warp object's
private attributes. This module

- checks, once, that the installed Warp has every internal it relies on (a table of the
  internals and the first release that has each, for Warp 1.15 to 1.19), and fails with
  one clear error naming the tested versions when one is missing;
- installs and removes the hooks that report every operation Warp enqueues to the
  recording session of the current context (see :mod:`graphcheck._session`);
- describes a kernel's parameter block (launch bounds, then every argument as Warp
  packs it) as plain :class:`graphcheck.params.ParamSpec` trees;
- answers small questions about Warp objects: is this an array, where does it live,
  which device, which stream, is this code Warp's own.

Hooks are installed while at least one trace is active anywhere in the process and
removed when the last one ends: while nothing is recorded, Warp runs untouched.

The interposition points (Warp 1.15 to 1.19; what differs: see ``WARP_INTERNALS``):

============================  ====================================================
``context.launch``            woven: the function's code object is replaced by
                              Warp's own source compiled again with a prologue and
                              an epilogue, so ``wp.launch``, ``launch_tiled``,
                              adjoint copies and a ``launch`` bound early by
                              ``from warp import launch`` all pass, and no
                              graphcheck frame stands between the caller and Warp
``context.copy``              woven, the same way: ``wp.copy``, ``array.assign``,
                              ``clone`` and the second copy Warp makes for gradients
``Launch.launch``             woven: ``wp.Launch`` replays
``context.invoke``            module globals: the CPU launch, with the exact
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
============================  ====================================================
"""

from __future__ import annotations

import contextvars
import ctypes
import inspect
import os
import re
import sys
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import warp as wp
import warp._src.context as _context
import warp._src.types as _types
from warp._src import codegen as _codegen

from ._warnings import GraphCheckWarning
from .params import ArrayRef, ParamKind, ParamSpec

_WARP_DIR = os.path.dirname(os.path.abspath(wp.__file__)) + os.sep
_GRAPHCHECK_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# graphcheck's bundled demo producer plays the user's part.
_GRAPHCHECK_DEMO = _GRAPHCHECK_DIR + "demo.py"
# Code that ships inside the warp package but is user code: its examples and tests.
_WARP_USER_DIRS = (_WARP_DIR + "examples" + os.sep, _WARP_DIR + "tests" + os.sep)


def _runtime() -> Any:
    """Warp's runtime (Warp types it as optional: it exists once ``wp.init()`` ran)."""
    return _context.runtime


class UnsupportedWarpError(RuntimeError):
    """The installed Warp lacks an internal that graphcheck needs.

    The message names the missing piece, the installed version and the versions
    graphcheck was tested against.
    """


# --------------------------------------------------------------------------------------
# The Warp releases graphcheck supports, and the internals each has (checked once)
# --------------------------------------------------------------------------------------
# Everything that differs between the supported releases lives in this block: the table of
# internals, and what graphcheck does on a release that predates one of them.

#: Warp releases graphcheck's test suite has run against (``nox -s warp``), oldest first.
TESTED_WARP_VERSIONS = ("1.15.0", "1.16.0", "1.17.0", "1.18.0", "1.19.0")

WARP_VERSION: str = wp.__version__

_EVERY_RELEASE = (1, 15)

#: Every Warp internal graphcheck reaches by name, with the first release that has it.
#: Paths start at ``warp._src.context``, ``warp._src.types``, ``warp._src.codegen`` or
#: Warp's native library (``core``); the last name of a class path is the class's own
#: attribute (graphcheck replaces it there). :func:`check_warp` checks, once, that the
#: installed Warp has each one its release calls for.
WARP_INTERNALS: dict[str, tuple[int, int]] = {
    **dict.fromkeys(
        (
            "context.launch", "context.copy", "context.invoke", "context.Launch.launch", "context.pack_arg",
            "context.runtime", "context.init", "context.capture_if", "context.capture_while",
            "context._normalize_launch_dim", "context._build_launch_bounds_from_tuple", "context.Kernel.add_overload",
            "context.synchronize", "context.synchronize_device", "context.synchronize_stream",
            "context.synchronize_event", "context.get_device", "context.is_cuda_available",
            "types.array._init_new", "types.array._init_from_data", "types.array.zero_", "types.array.fill_",
            "types.array.numpy", "types.array.__ctype__", "types.noncontiguous_array_base.zero_",
            "types.noncontiguous_array_base.fill_", "types.noncontiguous_array_base.numpy",
            "types.Array", "types.indexedarray", "types.fabricarray", "types.indexedfabricarray", "types.is_array",
            "types.array_t", "types.indexedarray_t", "types.launch_bounds_t", "types.type_size_in_bytes",
            "codegen.Struct", "codegen.StructInstance",
            "core.wp_cpu_launch_kernel", "core.wp_cuda_launch_kernel", "core.wp_cuda_stream_is_capturing",
        ),
        _EVERY_RELEASE,
    ),
    # Cooperative CPU blocks. Before 1.18 every CPU launch runs one thread a block, through invoke.
    "context.invoke_cpu_blocks": (1, 18),
    # Before 1.18 wp.launch resolved block_dim itself: 1 on the CPU, 256 for block_dim <= 0.
    "context._resolve_launch_block_dim": (1, 18),
    # Before 1.19 wp.launch made a generic kernel's overload with Kernel.add_overload.
    "context.Kernel._add_normalized_overload": (1, 19),
}  # fmt: skip


def _release(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a Warp version string: ``"1.20.0.dev20260101"`` is ``(1, 20)``."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise UnsupportedWarpError(f"graphcheck cannot read the warp-lang version {version!r}: expected 'X.Y...'")
    return int(match[1]), int(match[2])


def _tested_range() -> str:
    oldest, newest = _release(TESTED_WARP_VERSIONS[0]), _release(TESTED_WARP_VERSIONS[-1])
    return f"{oldest[0]}.{oldest[1]} to {newest[0]}.{newest[1]}"


def required_internals(version: str) -> list[str]:
    """The paths in :data:`WARP_INTERNALS` that Warp release ``version`` has."""
    release = _release(version)
    return [path for path, since in WARP_INTERNALS.items() if release >= since]


def newer_release_warning(version: str) -> str | None:
    """The warning for a Warp release newer than the newest tested one, else None.

    Patch releases of a tested minor release count as tested.
    """
    if _release(version) <= _release(TESTED_WARP_VERSIONS[-1]):
        return None
    return f"warp-lang {version} is newer than the releases graphcheck was tested with ({_tested_range()})"


_INTERNAL_ROOTS = {"context": _context, "types": _types, "codegen": _codegen}


def _internal(path: str) -> Any:
    """The Warp object at ``path`` (see :data:`WARP_INTERNALS`), or None when it is missing."""
    root, *names, last = path.split(".")
    owner: Any = _runtime().core if root == "core" else _INTERNAL_ROOTS[root]
    for name in names:
        owner = getattr(owner, name, None)
    # A class's own attribute: graphcheck replaces it on that class.
    return vars(owner).get(last) if isinstance(owner, type) else getattr(owner, last, None)


def missing_internals(version: str = WARP_VERSION) -> list[str]:
    """The internals Warp release ``version`` calls for that the installed Warp lacks."""
    _context.init()  # loads Warp's native library (core)
    return [path for path in required_internals(version) if _internal(path) is None]


def _fail(what: str) -> UnsupportedWarpError:
    return UnsupportedWarpError(
        f"graphcheck cannot record on warp-lang {WARP_VERSION}: {what}. graphcheck was tested with "
        f"warp-lang {_tested_range()} ({', '.join(TESTED_WARP_VERSIONS)}); install one of those "
        f"(pip install 'warp-lang=={TESTED_WARP_VERSIONS[-1]}') or a graphcheck release that supports your Warp."
    )


_NATIVE_HELPER = re.compile(
    r"^wp_(?P<stem>radix_sort_pairs|segmented_sort_pairs|runlength_encode|array_scan|array_sum|array_inner"
    r"|hash_grid_(?:reserve|update)|bvh_(?:refit|rebuild)|mesh_(?:refit|set_points|set_velocities))"
    r"(?:_(?P<type>int|uint|int64|uint64|float|double))?_(?P<where>host|device)$"
)


_checked = False

# What the hooks take from a wp.launch / wp.copy call: the trampolines pass these first.
_LAUNCH_INTENT = ("kernel", "inputs", "outputs", "device", "stream", "max_blocks", "block_dim", "adjoint")
_COPY_INTENT = ("dest", "src", "dest_offset", "src_offset", "count", "stream")


def check_warp() -> None:
    """Check, once, that the installed Warp has every internal the hooks rely on.

    A release older than the oldest tested one fails; one newer than the newest tested
    one warns (:class:`GraphCheckWarning`, once) and runs while it has every internal.

    Raises:
        UnsupportedWarpError: naming the first missing or changed internal.
    """
    global _checked
    if _checked:
        return
    if _release(WARP_VERSION) < _release(TESTED_WARP_VERSIONS[0]):
        raise _fail("it is older than the releases graphcheck supports")
    missing = missing_internals(WARP_VERSION)
    if missing:
        raise _fail(f"warp._src.{missing[0]} is missing")
    for fn in (_context.launch, _context.copy):
        if not isinstance(fn, types.FunctionType) or fn.__closure__:
            raise _fail(f"warp._src.context.{fn.__name__} is no longer a plain function")
    launch_params = inspect.signature(_context.launch).parameters
    missing = [name for name in _LAUNCH_INTENT if name not in launch_params]
    if missing:
        raise _fail(f"wp.launch() has no parameter(s) {missing}")
    copy_params = tuple(inspect.signature(_context.copy).parameters)
    if copy_params != _COPY_INTENT:
        raise _fail(f"wp.copy() parameters changed to {copy_params}")
    if tuple(inspect.signature(_context.Launch.launch).parameters) != ("self", "stream"):
        raise _fail("wp.Launch.launch() parameters changed")
    for fn in (_context.launch, _context.copy):
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY)
               for p in inspect.signature(fn).parameters.values()):  # fmt: skip
            raise _fail(f"wp.{fn.__name__}() now takes variable or keyword-only arguments")
    if [f for f, _ in _types.array_t._fields_] != ["data", "grad", "shape", "strides", "ndim", "flags"]:
        raise _fail("the array_t parameter layout changed")
    newer = newer_release_warning(WARP_VERSION)
    if newer is not None:
        warnings.warn(newer, GraphCheckWarning, stacklevel=2)
    _checked = True


# What graphcheck does on a release that predates an internal (see WARP_INTERNALS).


def _block_dim_before_1_18(device: Any, block_dim: Any) -> int:
    """The block size ``wp.launch`` of Warp 1.15 to 1.17 runs with."""
    if device.is_cpu:
        return 1
    return 256 if block_dim is None or block_dim <= 0 else int(block_dim)


_resolve_launch_block_dim: Callable[[Any, Any], int] = getattr(
    _context, "_resolve_launch_block_dim", _block_dim_before_1_18
)

#: Warp's CPU launch functions, each with whether it runs cooperative blocks (Warp 1.18+).
_CPU_INVOKERS = tuple((name, name == "invoke_cpu_blocks") for name in ("invoke", "invoke_cpu_blocks")
                      if hasattr(_context, name))  # fmt: skip


def _add_overload(kernel: Any, arg_types: list[Any]) -> Any:
    """The overload ``wp.launch`` makes of a generic kernel for these inferred types."""
    add = getattr(kernel, "_add_normalized_overload", None) or kernel.add_overload
    return add(arg_types)


#: Native helpers Warp's CPU graphs record only from a release on (``apic_record_*`` in
#: ``warp/native/apic.cpp``), None for none of the supported ones. Before it, a call inside
#: a CPU capture runs once, at capture time, and is not in the graph: a replay keeps the
#: capture's result.
_CPU_GRAPH_RECORDS_SINCE: dict[str, tuple[int, int] | None] = {
    "array_sum": (1, 16), "array_inner": (1, 16), "hash_grid_update": (1, 16), "bvh_refit": (1, 16),
    "bvh_rebuild": (1, 16), "mesh_refit": None,
}  # fmt: skip


def cpu_graph_replays(label: str, version: str = WARP_VERSION) -> bool:
    """Whether a CPU graph captured on Warp ``version`` replays native helper ``label``
    (``"array_sum_float_host"``, as recorded)."""
    match = _NATIVE_HELPER.match(f"wp_{label}")
    if match is None or match["stem"] not in _CPU_GRAPH_RECORDS_SINCE:
        return True
    since = _CPU_GRAPH_RECORDS_SINCE[match["stem"]]
    return since is not None and _release(version) >= since


# --------------------------------------------------------------------------------------
# Sessions: who records in this context
# --------------------------------------------------------------------------------------

#: The recording session of the current context (thread or task), or None. A session is
#: used by one thread only: a thread that inherits another's context (``asyncio.to_thread``)
#: gets its own (:func:`current_session`), so a call in progress is never another thread's.
ACTIVE: contextvars.ContextVar[Any] = contextvars.ContextVar("graphcheck_session", default=None)

LAUNCH, REPLAY = "launch", "replay"

_get_ident = threading.get_ident


def current_session() -> Any:
    """The recording session of the current context and thread, or None."""
    session = ACTIVE.get()
    if session is not None and session.thread != _get_ident():
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
# A hook stays callable after it is removed: a thread still inside one forwards to Warp,
# whose original it holds for good; a woven function's globals (the few `_graphcheck_*`
# names in Warp's module) stay too, inert, for a thread still running its old code.

#: Test hook: called with each patch's label before each step of an install or removal,
#: to inject an interrupt there. None in normal use.
checkpoint: Callable[[str], None] | None = None


class _Patch:
    """One attribute of Warp set to a hook; ``original`` is Warp's own value."""

    __slots__ = ("label", "name", "original", "owner", "replacement")

    def __init__(self, label: str, owner: Any, name: str, replacement: Any) -> None:
        self.label = label
        self.owner = owner
        self.name = name
        self.original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        self.replacement = replacement

    def apply(self) -> None:
        setattr(self.owner, self.name, self.replacement)

    def undo(self) -> None:
        setattr(self.owner, self.name, self.original)

    def in_place(self) -> bool:
        owner, name = self.owner, self.name
        current = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        return current is self.replacement


class Hooks:
    """Every hook graphcheck puts into Warp, installed and removed as one."""

    def __init__(self) -> None:
        self._patches: list[_Patch] | None = None
        # "out", "in", or "partial" while (or after an interrupted) install or removal.
        self.state = "out"

    def install(self) -> None:
        """Put every hook in place (nothing happens when they already are)."""
        if self.state == "in":
            return
        check_warp()
        patches = self._plan()
        self.state = "partial"
        for patch in patches:
            if checkpoint is not None:
                checkpoint(f"install {patch.label}")
            patch.apply()
        self.state = "in"

    def remove(self) -> None:
        """Put Warp's own back everywhere (nothing happens when nothing is installed)."""
        if self.state == "out":
            return
        self.state = "partial"
        for patch in reversed(self._patches or ()):
            if checkpoint is not None:
                checkpoint(f"remove {patch.label}")
            patch.undo()
        self.state = "out"

    def left_behind(self) -> list[str]:
        """Labels of the hooks in place right now."""
        return [p.label for p in self._patches or () if p.in_place()]

    def _plan(self) -> list[_Patch]:
        if self._patches is None:
            self._patches = _plan_patches()
        return self._patches


HOOKS = Hooks()


def hooks_installed() -> bool:
    """Whether any graphcheck hook is in place right now."""
    return HOOKS.state != "out" or bool(HOOKS.left_behind())


def _plan_patches() -> list[_Patch]:
    core = _runtime().core
    patches: list[_Patch] = []

    def attr(label: str, owner: Any, name: str, hook: Any) -> None:
        patches.append(_Patch(label, owner, name, hook))

    def weave(label: str, fn: Any, prologue: str, on_error: str, finally_: str) -> None:
        patches.append(_Patch(label, fn, "__code__", _weave(fn, prologue, on_error, finally_)))

    for name, value in _WOVEN_GLOBALS.items():  # stay in place for good (see above)
        _context.__dict__[name] = value
        _types.__dict__[name] = value

    # Kernel launches: the Python entry points, for what the user asked. Woven, so that
    # Warp sees the caller it sees without graphcheck (the Tape's caller metadata, the
    # stack level of its warnings) and `from warp import launch` is reached too.
    weave("wp.launch", _context.launch, _LAUNCH_PROLOGUE, "", _PENDING_EPILOGUE)
    # wp.launch_tiled resolves its block size (1 on the CPU) before it calls launch: the
    # size the user asked for is known only here, and a CUDA graph bakes it.
    weave("wp.launch_tiled", _context.launch_tiled, _TILED_PROLOGUE, "", _TILED_EPILOGUE)
    weave("wp.Launch.launch", _context.Launch.launch, _REPLAY_PROLOGUE, "", _PENDING_EPILOGUE)

    # Kernel launches: where the parameter block leaves Python.
    # Woven, so that recording costs no second Python frame per launch.
    cpu_invoke = cpu_invoke_hook_factory
    assert cpu_invoke is not None and cpu_invoke_prologues is not None, "graphcheck._session supplies them"
    for name, blocks in _CPU_INVOKERS:
        invoker = getattr(_context, name)
        if invoker.__code__.co_varnames[:4] == ("kernel", "hooks", "params", "adjoint"):
            weave(name, invoker, cpu_invoke_prologues[blocks], "", "pass")
        else:
            attr(name, _context, name, cpu_invoke(invoker, blocks))
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

    # Warp's native helpers (sort, scan, reductions, spatial structures).
    for name in dir(core):
        match = _NATIVE_HELPER.match(name)
        if match:
            original = getattr(core, name)
            attr(name, core, name, _make_native_hook(name, original, match["where"] == "device"))
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
    if _graphcheck_session.thread != _graphcheck_ident():
        _graphcheck_session = _graphcheck_session.rebind()
    _graphcheck_session.pending = (_graphcheck_launch, _graphcheck_getframe(1), {intent})
""".format(intent=", ".join(_LAUNCH_INTENT))

_REPLAY_PROLOGUE = """
_graphcheck_session = _graphcheck_active.get()
if _graphcheck_session is not None:
    if _graphcheck_session.thread != _graphcheck_ident():
        _graphcheck_session = _graphcheck_session.rebind()
    _graphcheck_session.pending = (_graphcheck_replay, _graphcheck_getframe(1), self)
"""

_TILED_PROLOGUE = """
_graphcheck_session = _graphcheck_active.get()
if _graphcheck_session is not None:
    if _graphcheck_session.thread != _graphcheck_ident():
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


def _weave(fn: Any, prologue: str, on_error: str, epilogue: str) -> types.CodeType:
    """``fn``'s code, recompiled from Warp's source as ``prologue; try: body except: on_error;
    raise finally: epilogue``.

    Raises:
        UnsupportedWarpError: when the source is not available or the result would not be
            the same function.
    """
    import ast

    code = fn.__code__
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as exc:
        raise _fail(f"the source of warp {code.co_qualname} is not available ({exc})") from None
    qualname = code.co_qualname.split(".")
    # A method is compiled inside a class of its class's name, for private name mangling.
    head = f"class {qualname[-2]}:\n" if len(qualname) == 2 else ""
    if len(qualname) > 2 or (head and not lines[0].startswith("    ")) or (not head and lines[0][0].isspace()):
        raise _fail(f"warp {code.co_qualname} is not a module function or a method")
    tree = ast.parse(head + "".join(lines))
    ast.increment_lineno(tree, first - 1 - bool(head))
    node = tree.body[0].body[0] if head else tree.body[0]  # type: ignore[attr-defined]
    if not isinstance(node, ast.FunctionDef) or node.name != code.co_name:
        raise _fail(f"the source of warp {code.co_qualname} is not a plain function")
    node.decorator_list = []
    body = node.body
    doc = body[:1] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else []

    def statements(text: str) -> list[ast.stmt]:
        parsed = ast.parse(text).body
        for stmt in parsed:
            for sub in ast.walk(stmt):
                if hasattr(sub, "lineno"):
                    sub.lineno = sub.end_lineno = node.lineno  # type: ignore[attr-defined]
                    sub.col_offset = sub.end_col_offset = 0  # type: ignore[attr-defined]
        return parsed

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
        and woven.co_qualname == code.co_qualname
    )
    if not same:
        raise _fail(f"warp {code.co_qualname} compiled from its source is not the installed function")
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


#: Makes the hook for Warp's CPU ``invoke`` from the original and whether it is
#: ``invoke_cpu_blocks``. The session module supplies it (it holds the recording fast
#: path, since every eager CPU launch passes there).
cpu_invoke_hook_factory: Callable[[Callable[..., Any], bool], Callable[..., Any]] | None = None
#: The prologues woven into Warp's CPU ``invoke`` and ``invoke_cpu_blocks`` (by their
#: argument names ``kernel, hooks, params, adjoint``), from the session module too.
cpu_invoke_prologues: tuple[str, str] | None = None


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
        record = session.on_cuda_launch(
            func, dim_size, max_blocks, block_dim, grid_stride, cluster_dim, smem_bytes, kernel_params, stream
        )
        failed = original(
            context, func, dim_size, max_blocks, block_dim, grid_stride, cluster_dim, smem_bytes,
            kernel_params, stream, apic_info,
        )  # fmt: skip
        if failed:
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


def _make_native_hook(name: str, original: Any, on_device: bool) -> Callable[..., Any]:
    label = name[3:]

    def hook(*args: Any) -> Any:
        session = current_session()
        if session is None:
            return original(*args)
        return session.on_native(original, label, on_device, args)

    hook.__name__ = name
    return hook


#: What woven functions find in their module's globals.
_WOVEN_GLOBALS: dict[str, Any] = {
    "_graphcheck_active": ACTIVE,
    "_graphcheck_ident": _get_ident,
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

_TYPE_SIZES = {"int": 4, "uint": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8, None: 4}


def _extent(index: int, scale: int = 1, width: int | None = None) -> Callable[[tuple[Any, ...], int], int]:
    """Bytes a pointer argument covers: argument ``index`` (a count) times ``scale`` elements
    of the helper's element size (or of argument ``width``, a size in bytes)."""
    return lambda args, size: max(int(args[index]), 0) * scale * (int(args[width]) if width is not None else size)


# helper -> the name of each argument, and for pointers how many bytes they cover. The
# signatures are Warp's own calls in warp/_src/utils.py and types.py (HashGrid, Mesh, Bvh).
_POINTER, _DESCRIPTOR, _VALUE = "pointer", "descriptor", "value"
_NATIVE_ROLES: dict[str, tuple[tuple[str, str, Any], ...]] = {
    # Radix sort needs keys and values of twice the count: it sorts through the upper half.
    "radix_sort_pairs": (("keys", _POINTER, _extent(2, 2)), ("values", _POINTER, _extent(2, 2, 5)),
                         ("count", _VALUE, None), ("begin_bit", _VALUE, None), ("end_bit", _VALUE, None),
                         ("value_size", _VALUE, None)),
    "segmented_sort_pairs": (("keys", _POINTER, _extent(2, 2)), ("values", _POINTER, _extent(2, 2)),
                             ("count", _VALUE, None), ("segment_starts", _POINTER, _extent(5)),
                             ("segment_ends", _POINTER, _extent(5)), ("segments", _VALUE, None)),
    "runlength_encode": (("values", _POINTER, _extent(4)), ("run_values", _POINTER, _extent(4)),
                         ("run_lengths", _POINTER, _extent(4)), ("run_count", _POINTER, lambda a, s: 4),
                         ("count", _VALUE, None)),
    "array_scan": (("src", _POINTER, _extent(2, 1, 3)), ("dest", _POINTER, _extent(2, 1, 4)), ("count", _VALUE, None),
                   ("src_stride", _VALUE, None), ("dest_stride", _VALUE, None), ("type_length", _VALUE, None),
                   ("inclusive", _VALUE, None)),
    "array_sum": (("values", _POINTER, _extent(2, 1, 3)), ("out", _POINTER, lambda a, s: int(a[4]) * s),
                  ("count", _VALUE, None), ("stride", _VALUE, None), ("type_length", _VALUE, None)),
    "array_inner": (("a", _POINTER, _extent(3, 1, 4)), ("b", _POINTER, _extent(3, 1, 5)),
                    ("out", _POINTER, lambda a, s: s), ("count", _VALUE, None), ("stride_a", _VALUE, None),
                    ("stride_b", _VALUE, None), ("type_length", _VALUE, None)),
    "hash_grid_update": (("grid", _VALUE, None), ("type_id", _VALUE, None), ("radius", _VALUE, None),
                         ("points", _DESCRIPTOR, None), ("groups", _DESCRIPTOR, None)),
    "hash_grid_reserve": (("grid", _VALUE, None), ("type_id", _VALUE, None), ("count", _VALUE, None),
                          ("with_groups", _VALUE, None)),
    "mesh_refit": (("mesh", _VALUE, None),),
    "mesh_set_points": (("mesh", _VALUE, None), ("points", _DESCRIPTOR, None)),
    "mesh_set_velocities": (("mesh", _VALUE, None), ("velocities", _DESCRIPTOR, None)),
    "bvh_refit": (("bvh", _VALUE, None),),
    "bvh_rebuild": (("bvh", _VALUE, None), ("constructor", _VALUE, None)),
}  # fmt: skip


def native_args(label: str, args: tuple[Any, ...]) -> dict[str, Any]:
    """A native helper's arguments by role: buffers as :class:`~graphcheck.params.ArrayRef`
    (with the bytes the helper may touch), the rest as plain values.

    Args:
        label: the helper without its ``wp_`` prefix (``"radix_sort_pairs_int_host"``).
        args: what Warp passed it.
    """
    match = _NATIVE_HELPER.match(f"wp_{label}")
    roles = _NATIVE_ROLES.get(match["stem"]) if match else None
    if roles is None or len(args) > len(roles):
        return {f"arg{i}": plain_value(a) for i, a in enumerate(args)}
    size = _TYPE_SIZES[match["type"]] if match else 4
    out: dict[str, Any] = {}
    for (name, role, extent), value in zip(roles, args):
        if role == _POINTER:
            ptr = as_address(value)
            out[name] = ArrayRef(ptr, extent(args, size) if ptr else 0)
        elif role == _DESCRIPTOR:
            raw = _descriptor_bytes(value)
            out[name] = descriptor_ref(raw) if raw is not None else None
        else:
            out[name] = plain_value(value)
    return out


def _descriptor_bytes(value: Any) -> bytes | None:
    obj = getattr(value, "_obj", value)  # ctypes.byref(array_t) or the array_t itself
    return bytes(obj) if isinstance(obj, _types.array_t) else None


def descriptor_ref(raw: bytes) -> ArrayRef:
    """An ``array_t`` a native helper was handed, as an :class:`~graphcheck.params.ArrayRef`."""
    value = _types.array_t.from_buffer_copy(raw)
    ndim = int(value.ndim)
    shape = tuple(int(s) for s in value.shape[:ndim])
    strides = tuple(int(s) for s in value.strides[:ndim])
    elem = abs(strides[-1]) if strides else 1
    return ArrayRef(int(value.data or 0), span_bytes(shape, strides, elem), shape, strides, int(value.grad or 0))


def plain_value(value: Any) -> Any:
    """A fill value or native argument as a plain, comparable Python value."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, ctypes._SimpleCData):
        return plain_value(value.value)
    if isinstance(value, ctypes.Array):
        return tuple(plain_value(v) for v in value)
    if isinstance(value, ctypes._Pointer):
        return bytes(value.contents).hex()
    obj = getattr(value, "_obj", None)  # ctypes.byref(...)
    if isinstance(obj, (ctypes.Structure, ctypes.Array, ctypes._SimpleCData)):
        return bytes(obj).hex()
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and getattr(value, "shape", None) == ():
        return plain_value(item())
    inner = getattr(value, "value", None)  # wp.float32(1.0)...
    if isinstance(inner, (bool, int, float)):
        return inner
    if is_struct_instance(value):
        return struct_bytes(value).hex()
    try:
        return tuple(plain_value(v) for v in value)
    except TypeError:
        return repr(value)


# --------------------------------------------------------------------------------------
# Questions about Warp objects
# --------------------------------------------------------------------------------------


def code_kind(code: types.CodeType) -> int:
    """0 for user code, 1 for Warp's own code, 2 for graphcheck's (and its trampolines)."""
    filename = code.co_filename
    if filename.startswith(_WARP_DIR):
        return 0 if filename.startswith(_WARP_USER_DIRS) else 1
    if filename.startswith(_GRAPHCHECK_DIR) or filename.startswith("<graphcheck"):
        return 0 if filename == _GRAPHCHECK_DEMO else 2
    return 0


#: Warp functions whose device work is fully decided by the memory they allocate (the
#: zeros of wp.zeros, the ones of wp.ones), or that read back to the host: work they issue
#: is "internal" (left out of traces by default). Work that carries the user's values is
#: not: the fill of ``wp.full(value)``, the copy of ``wp.clone(src)``, ``contiguous()`` and
#: ``to()`` are compared like the user's own. ``wp.array(data)``'s upload is internal: the
#: ``per-call-allocation`` of the buffer it fills is its finding.
ALLOCATING_FUNCTIONS = frozenset(
    {
        "zeros", "zeros_like", "ones", "ones_like", "empty", "empty_like", "_alloc_grad", "_init_from_data",
        "numpy", "list",
    }
)  # fmt: skip


#: The Warp functions a user calls to make an array: an allocation made under any other
#: Warp function (``wp.fem.integrate``, ``HashGrid.build``) is Warp's own, for its caches
#: and scratch.
USER_ALLOCATORS = frozenset(
    {
        "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "empty", "empty_like", "clone",
        "array", "from_numpy", "contiguous", "to", "assign", "copy", "_alloc_grad", "grad", "requires_grad",
        "indexedarray", "reshape", "view", "flatten", "transpose",
    }
)  # fmt: skip


def is_array(value: Any) -> bool:
    """Whether ``value`` is any kind of Warp array (dense, indexed, fabric)."""
    return isinstance(value, _types.Array)


def is_dense_array(value: Any) -> bool:
    return isinstance(value, _types.array)


def is_struct_instance(value: Any) -> bool:
    """Whether ``value`` is an instance of a ``@wp.struct`` class."""
    return isinstance(value, _codegen.StructInstance)


def struct_fields(value: Any) -> list[str] | None:
    """Field names of a ``@wp.struct`` instance, else None."""
    if not isinstance(value, _codegen.StructInstance):
        return None
    return list(type(value)._cls.vars)  # type: ignore[attr-defined]


def is_warp_handle(value: Any) -> bool:
    """Whether ``value`` is a Warp handle that holds no producer's buffers (a device,
    stream, event, kernel, function, module or graph): :func:`graphcheck.buffers_of`
    never enters one. Warp's containers (optimizers, fem fields, sparse matrices, meshes,
    hash grids, BVHs, volumes) are entered like any other object."""
    return isinstance(value, _HANDLE_TYPES)


_HANDLE_TYPES = tuple(
    cls
    for cls in (getattr(_context, name, None) for name in (
        "Device", "Stream", "Event", "Kernel", "Function", "Module", "ModuleExec", "ModuleBuilder", "Graph",
        "Runtime", "KernelHooks",
    ))
    if isinstance(cls, type)
)  # fmt: skip


_STRUCTURES = tuple(cls for cls in (getattr(_types, n, None) for n in ("Mesh", "HashGrid", "Bvh", "Volume")) if cls)


def structure_handle(value: Any) -> int | None:
    """The ``id`` a kernel is handed for a Warp mesh, hash grid, BVH or volume, else None."""
    if isinstance(value, _STRUCTURES):
        handle = getattr(value, "id", None)
        return int(handle) if handle else None
    return None


def array_range(arr: Any) -> tuple[int, int] | None:
    """``(start, end)`` of the memory an array may address, or None for a null array.

    A contiguous array spans its capacity; a strided or transposed view the span its
    strides reach (Warp's ``capacity`` of a transposed view counts only its first row).
    An indexed array is its data array's range.
    """
    if isinstance(arr, _types.array):
        ptr = arr.ptr
        if not ptr:
            return None
        ptr = int(ptr)
        if arr.is_contiguous:
            return ptr, ptr + max(int(arr.capacity or arr.size * _types.type_size_in_bytes(arr.dtype)), 1)
        shape, strides = tuple(arr.shape), tuple(arr.strides)
        if not shape or 0 in shape:
            return ptr, ptr + 1
        low = sum((n - 1) * st for n, st in zip(shape, strides) if st < 0)
        high = sum((n - 1) * st for n, st in zip(shape, strides) if st > 0)
        return ptr + low, ptr + high + _types.type_size_in_bytes(arr.dtype)
    data = getattr(arr, "data", None)
    if isinstance(data, _types.array):
        return array_range(data)
    return None


def array_span(arr: Any) -> tuple[int, int] | None:
    """``(start, end)`` of a dense array's memory (the fast path of :func:`array_range`)."""
    if type(arr) is _types.array and arr.is_contiguous:
        ptr = arr.ptr
        if not ptr:
            return None
        return ptr, ptr + max(arr.capacity, 1)
    return array_range(arr)


def array_parts(arr: Any) -> list[tuple[str, Any]]:
    """The arrays an array holds on to: its gradient, an indexed array's base and indices."""
    parts = []
    grad = getattr(arr, "_grad", None)
    if grad is not None:
        parts.append(("grad", grad))
    data = getattr(arr, "data", None)
    if isinstance(data, _types.Array):
        parts.append(("data", data))
    indices = getattr(arr, "indices", None)
    if isinstance(indices, (list, tuple)):
        parts.extend((f"indices[{i}]", idx) for i, idx in enumerate(indices) if isinstance(idx, _types.Array))
    return parts


def array_grad(arr: Any) -> Any:
    """The gradient array of a dense array, or None."""
    return getattr(arr, "_grad", None) if isinstance(arr, _types.array) else None


def array_label(arr: Any) -> str:
    """A short description: ``float32[64, 3] on cpu``."""
    dtype = getattr(arr, "dtype", None)
    name = getattr(dtype, "__name__", str(dtype))
    shape = ", ".join(str(s) for s in getattr(arr, "shape", ()))
    return f"{name}[{shape}] on {getattr(arr, 'device', '?')}"


def array_extent(arr: Any) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    """``(ptr, nbytes spanned, shape, strides)`` of a dense array (views included)."""
    ptr = int(arr.ptr or 0)
    shape = tuple(int(s) for s in arr.shape)
    strides = tuple(int(s) for s in arr.strides)
    return ptr, span_bytes(shape, strides, _types.type_size_in_bytes(arr.dtype)), shape, strides


def span_bytes(shape: tuple[int, ...], strides: tuple[int, ...], elem_size: int) -> int:
    """Bytes between the first and one past the last element a strided view touches."""
    if not shape or any(s == 0 for s in shape):
        return 0
    return sum((s - 1) * abs(st) for s, st in zip(shape, strides)) + elem_size


def get_device(device: Any = None) -> Any:
    """Warp's Device for a device-like value (None: the default device)."""
    return _context.get_device(device)


def cuda_available() -> bool:
    return bool(_context.is_cuda_available())


def as_address(value: Any) -> int:
    """An address Warp passes as an int or a ``ctypes.c_void_p``, as an int (0 for null)."""
    if isinstance(value, ctypes.c_void_p):
        return int(value.value or 0)
    return int(value or 0)


def stream_handle(stream: Any) -> int | None:
    """The integer CUDA stream handle of a Warp Stream or raw handle; None when there is none."""
    if stream is None:
        return None
    handle = getattr(stream, "cuda_stream", stream)
    if isinstance(handle, ctypes.c_void_p):
        handle = handle.value
    try:
        return int(handle or 0)
    except (TypeError, ValueError):
        return None


def device_stream_handle(device: Any) -> int | None:
    """The handle of a device's current stream (None on the CPU)."""
    device = _runtime().get_device(device)
    return stream_handle(device.stream) if device.is_cuda else None


def stream_is_capturing(handle: int | None) -> bool:
    """Whether a CUDA stream is capturing right now."""
    if not handle:
        return False
    return bool(_runtime().core.wp_cuda_stream_is_capturing(ctypes.c_void_p(handle)))


def resolve_block_dim(device: Any, block_dim: Any) -> int:
    """The block size Warp launches with for a requested ``block_dim`` on ``device``."""
    return int(_resolve_launch_block_dim(_runtime().get_device(device), block_dim))


def struct_bytes(value: Any) -> bytes:
    """The bytes a ``@wp.struct`` instance is passed to kernels as."""
    return bytes(value.__ctype__())


def dtype_name(arr: Any) -> str:
    """The element type's name of an array (``"float32"``, ``"vec3f"``)."""
    return _type_name(getattr(arr, "dtype", None))


def kernel_name(kernel: Any) -> str:
    """``"<module>.<key>"`` of a kernel."""
    module = getattr(getattr(kernel, "module", None), "name", None)
    key = getattr(kernel, "key", None) or getattr(kernel, "__name__", repr(kernel))
    return f"{module}.{key}" if module else str(key)


# --------------------------------------------------------------------------------------
# Parameter layouts
# --------------------------------------------------------------------------------------

_layout_cache: dict[tuple[int, bool], tuple[ParamSpec, ...]] = {}

_HALF_TYPES: dict[Any, ParamKind] = {_types.float16: ParamKind.HALF}
if hasattr(_types, "bfloat16"):
    _HALF_TYPES[_types.bfloat16] = ParamKind.BFLOAT16


def kernel_dim(kernel: Any) -> int:
    dim = getattr(kernel.adj, "kernel_dim", None)
    if dim is None:
        return 1
    return int(dim)


def bounds_spec(kernel: Any) -> ParamSpec:
    """The launch-bounds parameter (always first) of a kernel."""
    ctype = type(_types.launch_bounds_t((1,) * max(kernel_dim(kernel), 1)))
    return ParamSpec("dim", ParamKind.BOUNDS, ctype, ctypes.sizeof(ctype))


def kernel_layout(kernel: Any, adjoint: bool = False) -> tuple[ParamSpec, ...]:
    """The parameter block of a kernel launch as Warp packs it.

    Launch bounds first, then every forward argument, then (adjoint launches) every
    adjoint argument named ``adj_<name>``. Cached per kernel.
    """
    layout = _layout_cache.get((id(kernel), adjoint))
    if layout is None:
        layout = _build_layout(kernel, adjoint)
    return layout


def _build_layout(kernel: Any, adjoint: bool) -> tuple[ParamSpec, ...]:
    specs = [bounds_spec(kernel)]
    for arg in kernel.adj.args:
        specs.append(_spec(arg.label, arg.type))
    if adjoint:
        for arg in kernel.adj.args:
            arg_type = arg.type
            if array_family(arg_type) is _types.indexedarray:
                # Warp passes the gradient of an indexed array as a plain array.
                arg_type = _types.array(dtype=arg_type.dtype, ndim=arg_type.ndim)
            specs.append(_spec(f"adj_{arg.label}", arg_type))
    layout = tuple(specs)
    if getattr(kernel.adj, "kernel_dim", None) is not None:
        # Only cache once Warp has built the kernel: the bounds type depends on its dim.
        _layout_cache[(id(kernel), adjoint)] = layout
        _layout_owners[(id(kernel), adjoint)] = kernel  # keeps id() from being reused
    return layout


_layout_owners: dict[tuple[int, bool], Any] = {}


def _np_dtype(scalar_type: Any) -> np.dtype | None:
    table = getattr(_types, "warp_type_to_np_dtype", {})
    dtype = table.get(scalar_type)
    return np.dtype(dtype) if dtype is not None else None


def array_family(arg_type: Any) -> Any:
    """The array class an argument type stands for, or None when it is no array type.

    Warp resolves ``wp.array[float]`` and ``wp.array2d[wp.vec3]`` annotations to light
    annotation objects and ``wp.array(dtype=float)`` to array instances; both are the
    same parameter to a kernel. The family decides the layout: ``array``,
    ``indexedarray``, ``fabricarray`` or ``indexedfabricarray``.
    """
    if not _types.is_array(arg_type):
        return None
    family = _concrete_array_type(arg_type)
    for cls in _ARRAY_FAMILIES:
        if isinstance(family, type) and issubclass(family, cls):
            return cls
    return None


def _dense_spec(name: str, arg_type: Any, offset: int) -> ParamSpec:
    dtype = arg_type.dtype
    return ParamSpec(
        name, ParamKind.ARRAY, _types.array_t, ctypes.sizeof(_types.array_t), offset,
        elem_size=_types.type_size_in_bytes(dtype), dtype=_type_name(dtype),
    )  # fmt: skip


def _spec(name: str, arg_type: Any, offset: int = 0) -> ParamSpec:
    """How Warp packs one argument (or struct field) of type ``arg_type``: decided by the
    type Warp resolved, never by how the annotation was spelt."""
    ctype: Any
    family = array_family(arg_type)
    if family is _types.array:
        return _dense_spec(name, arg_type, offset)
    if family is _types.indexedarray:
        ctype = _types.indexedarray_t
        data = _dense_spec("data", arg_type, 0)
        return ParamSpec(name, ParamKind.INDEXED_ARRAY, ctype, ctypes.sizeof(ctype), offset, children=(data,))
    if family is _types.fabricarray or family is _types.indexedfabricarray:
        ctype = type(arg_type.__ctype__())
        kind = ParamKind.FABRIC_ARRAY if family is _types.fabricarray else ParamKind.INDEXED_FABRIC_ARRAY
        return ParamSpec(name, kind, ctype, ctypes.sizeof(ctype), offset, dtype=_type_name(arg_type.dtype))
    if family is not None:  # an array family this Warp added after graphcheck was written
        ctype = type(arg_type.__ctype__())
        return ParamSpec(name, ParamKind.OPAQUE, ctype, ctypes.sizeof(ctype), offset, dtype=repr(arg_type))
    if isinstance(arg_type, _codegen.Struct):
        ctype = arg_type.ctype
        children = tuple(_spec(field, var.type, getattr(ctype, field).offset) for field, var in arg_type.vars.items())
        return ParamSpec(name, ParamKind.STRUCT, ctype, ctypes.sizeof(ctype), offset, children=children)
    if arg_type in _HALF_TYPES:
        return ParamSpec(name, _HALF_TYPES[arg_type], ctypes.c_uint16, 2, offset)
    if isinstance(arg_type, type) and issubclass(arg_type, ctypes.Array):
        # Vectors, matrices, quaternions, transforms, spatial vectors: flat scalars.
        scalar = getattr(arg_type, "_wp_scalar_type_", None)
        shape = tuple(getattr(arg_type, "_shape_", (arg_type._length_,)))
        kind = ParamKind.VECTOR
        if scalar in _HALF_TYPES:
            kind = ParamKind.HALF_VECTOR if _HALF_TYPES[scalar] is ParamKind.HALF else ParamKind.BFLOAT16_VECTOR
        return ParamSpec(name, kind, arg_type, ctypes.sizeof(arg_type), offset, dtype=_np_dtype(scalar), shape=shape)
    ctype = getattr(arg_type, "_type_", None)
    if isinstance(ctype, type) and issubclass(ctype, ctypes._SimpleCData):
        kind = ParamKind.BOOL if ctype is ctypes.c_bool else ParamKind.SCALAR
        return ParamSpec(name, kind, ctype, ctypes.sizeof(ctype), offset, dtype=_np_dtype(arg_type))
    ctype = (
        getattr(arg_type, "_wp_ctype_", None) or getattr(arg_type, "ctype", None) or getattr(arg_type, "_ctype_", None)
    )
    if isinstance(ctype, type) and issubclass(ctype, ctypes.Structure) and _plain_fields(ctype):
        # A handle struct (a texture: its object handle and extents), field by field.
        children = tuple(
            ParamSpec(field[0], ParamKind.SCALAR, field[1], ctypes.sizeof(field[1]), getattr(ctype, field[0]).offset)
            for field in ctype._fields_
        )
        return ParamSpec(name, ParamKind.STRUCT, ctype, ctypes.sizeof(ctype), offset, children=children)
    size = ctypes.sizeof(ctype) if isinstance(ctype, type) and hasattr(ctype, "_fields_") else 0
    return ParamSpec(name, ParamKind.OPAQUE, ctype if size else None, size, offset, dtype=_type_repr(arg_type))


def _plain_fields(ctype: Any) -> bool:
    return all(isinstance(f, type) and issubclass(f, ctypes._SimpleCData) for _, f in ctype._fields_)


def _type_repr(arg_type: Any) -> str:
    return getattr(arg_type, "__name__", None) or repr(arg_type)


_concrete_array_type = getattr(_types, "concrete_array_type", type)
_ARRAY_FAMILIES = (_types.indexedarray, _types.fabricarray, _types.indexedfabricarray, _types.array)


def _type_name(dtype: Any) -> str:
    return getattr(dtype, "__name__", str(dtype))


def replay_config(cmd: Any) -> tuple[Any, str, int, int, bool]:
    """``(kernel, device, block_dim, max_blocks, adjoint)`` of a ``wp.Launch`` command."""
    return cmd.kernel, str(cmd.device), int(cmd.block_dim), int(cmd.max_blocks), bool(cmd.adjoint)


_struct_field_cache: dict[type, tuple[tuple[int, int], ...]] = {}


def struct_param_slices(struct_type: type) -> tuple[tuple[int, int], ...]:
    """``(offset, size)`` of each field of a ctypes Structure (an ArgsStruct of a CPU launch)."""
    slices = _struct_field_cache.get(struct_type)
    if slices is None:
        slices = tuple(
            (getattr(struct_type, name).offset, getattr(struct_type, name).size)
            for name, _ in struct_type._fields_  # type: ignore[attr-defined]
        )
        _struct_field_cache[struct_type] = slices
    return slices


# --------------------------------------------------------------------------------------
# Captures and graphs
# --------------------------------------------------------------------------------------


#: Warp's own ScopedCapture and capture_launch, whatever :func:`patch_capture_api` has put
#: in their place.
ORIGINAL_SCOPED_CAPTURE = wp.ScopedCapture
_ORIGINAL_CAPTURE_LAUNCH = wp.capture_launch


def scoped_capture(device: Any, **options: Any) -> Any:
    """A real ``wp.ScopedCapture`` on ``device`` with the caller's options."""
    return ORIGINAL_SCOPED_CAPTURE(device=device, **options)


def capture_launch(graph: Any, stream: Any = None) -> None:
    """Replay a graph with Warp's own ``wp.capture_launch``, even while the capture API is
    patched (:func:`patch_capture_api`)."""
    _ORIGINAL_CAPTURE_LAUNCH(graph, stream=stream)


def capture_in_progress(device: Any) -> bool:
    """Whether a Warp capture is open on ``device`` (its current stream for CUDA)."""
    device = _runtime().get_device(device)
    if device.is_cpu:
        return _runtime()._apic_capture is not None
    return bool(device.captures)


def abort_capture(device: Any) -> None:
    """End a capture a failed block left open, discarding its graph."""
    device = _runtime().get_device(device)
    if capture_in_progress(device):
        try:
            wp.capture_end(device=device)
        except Exception:  # the capture was already invalid: ending it is all we want
            pass


def graph_handle(graph: Any) -> int | None:
    """The raw ``cudaGraph_t`` of a Warp Graph, or None (CPU graphs, external captures)."""
    handle = getattr(graph, "graph", None)
    if isinstance(handle, ctypes.c_void_p):
        return handle.value
    return None


def graph_device(graph: Any) -> Any:
    return getattr(graph, "device", None)


def graph_module_execs(graph: Any) -> list[Any]:
    return list(getattr(graph, "module_execs", ()) or ())


def cuda_function_map(graph: Any) -> dict[int, tuple[str, bool]]:
    """CUfunction handle -> (kernel name, adjoint) for every kernel a graph retains."""
    out: dict[int, tuple[str, bool]] = {}
    for module_exec in graph_module_execs(graph):
        for name, hooks in getattr(module_exec, "kernel_hooks", {}).items():
            if isinstance(hooks.forward, int):
                out[hooks.forward] = (str(name), False)
            if isinstance(hooks.backward, int):
                out[hooks.backward] = (str(name), True)
    return out


def kernel_function(kernel: Any, device: Any, block_dim: int, adjoint: bool = False) -> int | None:
    """The CUfunction a launch of ``kernel`` at ``block_dim`` uses on a CUDA device."""
    device = _runtime().get_device(device)
    if not device.is_cuda:
        return None
    module_exec = kernel.module.load(device, block_dim)
    hooks = module_exec.get_kernel_hooks(kernel)
    handle = hooks.backward if adjoint else hooks.forward
    return int(handle) if handle else None


def resolve_overload(kernel: Any, inputs: Any, outputs: Any) -> Any:
    """The concrete overload a launch of a generic kernel ran (the kernel itself otherwise)."""
    if not getattr(kernel, "is_generic", False):
        return kernel
    try:
        return _add_overload(kernel, kernel.infer_argument_types([*(inputs or ()), *(outputs or ())]))
    except Exception:  # Warp's own launch raised already or will raise; keep the generic one
        return kernel


def device_of_stream(handle: int | None) -> str | None:
    """The device a CUDA stream handle belongs to, or None when it is unknown."""
    if not handle:
        return None
    for device in _runtime().cuda_devices:
        for stream in (device.null_stream, device.stream):
            if stream_handle(stream) == handle:
                return str(device)
    return None  # a stream the user made: the launch's own device argument says


# --------------------------------------------------------------------------------------
# Guarding every capture of a program (graphcheck run, the pytest marker)
# --------------------------------------------------------------------------------------


#: Warp's own capture_begin and capture_end, whatever :func:`patch_capture_api` has put in their place.
ORIGINAL_CAPTURE_BEGIN = wp.capture_begin
ORIGINAL_CAPTURE_END = wp.capture_end


def patch_capture_api(
    scoped_capture: type,
    capture_launch: Callable[..., Any],
    capture_begin: Callable[..., Any] | None = None,
    capture_end: Callable[..., Any] | None = None,
) -> Callable[[], None]:
    """Put ``scoped_capture``, ``capture_launch`` (and ``capture_begin`` / ``capture_end``)
    where programs look them up.

    Replaces ``wp.ScopedCapture`` (also ``warp.utils.ScopedCapture``), ``wp.capture_launch``,
    ``wp.capture_begin`` and ``wp.capture_end``; code that bound them before the patch is
    not reached.

    Returns:
        A function that puts Warp's own back.
    """
    import warp.utils as public_utils
    from warp._src import utils as private_utils

    targets = [(wp, "ScopedCapture", scoped_capture), (wp, "capture_launch", capture_launch)]
    if capture_begin is not None and capture_end is not None:
        targets += [(wp, "capture_begin", capture_begin), (wp, "capture_end", capture_end)]
    for module in (public_utils, private_utils):
        if getattr(module, "ScopedCapture", None) is ORIGINAL_SCOPED_CAPTURE:
            targets.append((module, "ScopedCapture", scoped_capture))
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]
    for owner, name, value in targets:
        setattr(owner, name, value)

    def restore() -> None:
        for owner, name, value in saved:
            setattr(owner, name, value)

    return restore


def pack_params(
    kernel: Any,
    dim: Any,
    inputs: Any = (),
    outputs: Any = (),
    device: Any = None,
    adjoint: bool = False,
    adj_inputs: Any = (),
    adj_outputs: Any = (),
) -> tuple[bytes, ...]:
    """The parameter block a launch with these arguments passes, packed by Warp's own
    ``pack_arg`` (no launch happens): launch bounds, then each argument's bytes."""
    device = _runtime().get_device(device)
    fwd = [*inputs, *outputs]
    kernel = resolve_overload(kernel, inputs, outputs)
    if getattr(kernel.adj, "kernel_dim", None) is None:
        kernel.module.load(device)  # Warp learns a kernel's dimensionality when it builds it
    dims, _ = _context._normalize_launch_dim(dim)
    params = [_context._build_launch_bounds_from_tuple(dims, kernel.adj.kernel_dim)]
    params += [_context.pack_arg(kernel, a.type, a.label, v, device, False) for a, v in zip(kernel.adj.args, fwd)]
    if adjoint:
        adj = [*adj_inputs, *adj_outputs]
        params += [_context.pack_arg(kernel, a.type, a.label, v, device, True) for a, v in zip(kernel.adj.args, adj)]
    return tuple(bytes(p) for p in params)
