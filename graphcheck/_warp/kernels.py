"""What graphcheck asks of a kernel: its name, which compiled code a launch of it runs, and
the array parameters its source writes whole before it reads them (:func:`first_writes`).

:func:`first_writes` reads the ``@wp.kernel`` function's Python source, which Warp keeps
(``kernel.adj.source``), by simple rules: a buffer swap carries no state when each call
overwrites both buffers before it reads them (:mod:`graphcheck.checks.swaps`), and this is
how a launch is known to overwrite one.
"""

from __future__ import annotations

import ast
import textwrap
import weakref
from collections.abc import Iterator
from typing import Any

__all__ = [
    "AT_COUNTED_SLOTS", "AT_THREAD", "IN_STRIDE_LOOP", "compiled_kernel", "first_writes", "kernel_code", "kernel_name",
    "overwritten_params", "same_kernel_key",
]  # fmt: skip


def kernel_name(kernel: Any) -> str:
    """``"<module>.<key>"`` of a kernel."""
    module = getattr(getattr(kernel, "module", None), "name", None)
    key = getattr(kernel, "key", None) or getattr(kernel, "__name__", repr(kernel))
    return f"{module}.{key}" if module else str(key)


def compiled_kernel(kernel: Any) -> Any:
    """What identifies the compiled code a launch of ``kernel`` runs: ``(module name, key,
    content hash)``, or the kernel itself before its module was hashed.

    Warp looks a launched kernel's entry point up by its mangled name (key and content
    hash, ``Kernel.get_mangled_name``) in its module's executable; the content hash covers
    the kernel's code, options and the values it captures (closure constants). A kernel
    declared inside a step is a new ``wp.Kernel`` each call with the same compiled code.
    """
    content = getattr(kernel, "hash", None)
    if not isinstance(content, bytes):
        return kernel
    return (getattr(getattr(kernel, "module", None), "name", None), getattr(kernel, "key", None), content)


def same_kernel_key(a: Any, b: Any) -> bool:
    """Whether two kernels are declared by the same code (the same key: the function's
    qualified name), whatever module or compiled code each has."""
    key = getattr(a, "key", None)
    return key is not None and key == getattr(b, "key", None)


def kernel_code(kernel: Any) -> str | None:
    """The first hex digits of a kernel's content hash (as in its mangled name), or None."""
    content = getattr(kernel, "hash", None)
    return content.hex()[:8] if isinstance(content, bytes) else None


#: How a kernel writes a parameter it never reads, when it writes every element it covers:
#: at its thread index (every element of a launch over the array's shape), in a grid-stride
#: loop from its thread index to a bound (every element below the bound, when launched over
#: as many threads as the stride), or at slots a counter hands out (``wp.atomic_add``: the
#: elements below the count, packed).
AT_THREAD, IN_STRIDE_LOOP, AT_COUNTED_SLOTS = "thread", "stride", "counted"


_first_writes: weakref.WeakKeyDictionary[Any, dict[str, tuple[str, str | None]]] = weakref.WeakKeyDictionary()


def first_writes(kernel: Any) -> dict[str, tuple[str, str | None]]:
    """The array parameters ``kernel`` writes and never reads, with how it writes them:
    ``(AT_THREAD, None)``, ``(IN_STRIDE_LOOP, <the stride parameter>)`` or
    ``(AT_COUNTED_SLOTS, None)``.

    Read from the kernel's Python source, by simple rules: a parameter qualifies when its
    only uses are as the target of assignments ``a[i] = ...``, in a kernel with no
    ``return``, and

    - every path through the kernel's body stores ``a[i]`` (``a[i, j]``), indexed by
      exactly the names ``wp.tid()`` gives (a store under an ``if`` counts where its
      ``else`` stores too); or
    - the body is a loop ``while i < bound: ...; i += stride`` (``i = wp.tid()``,
      ``stride`` a parameter) every path through which stores ``a[i]``; or
    - every store is at a slot that ``wp.atomic_add`` returned (``slot = wp.atomic_add(
      count, 0, 1)``, perhaps offset: ``a[slot + base] = ...``), the packed output of a
      compaction, whatever paths store it.

    Any other use (a load, an augmented assignment, an atomic, a call, ``a.shape``) reads
    it. Empty when the source is unavailable or not understood.
    """
    try:
        return _first_writes[kernel]
    except (KeyError, TypeError):
        pass
    try:
        found = _first_writes_in(textwrap.dedent(kernel.adj.source))
    except Exception:  # no source, or source this reading does not understand: nothing is overwritten
        found = {}
    try:
        _first_writes[kernel] = found
    except TypeError:
        pass
    return found


def overwritten_params(kernel: Any) -> frozenset[str]:
    """The array parameters ``kernel`` writes at its thread index, on every path through it,
    and never reads (see :func:`first_writes`): launched over the array's shape, such a
    kernel overwrites every element of it."""
    return frozenset(name for name, (how, _) in first_writes(kernel).items() if how == AT_THREAD)


def _first_writes_in(source: str) -> dict[str, tuple[str, str | None]]:
    fn = next(node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef))
    params = {a.arg for a in fn.args.args}
    if any(isinstance(node, ast.Return) for node in ast.walk(fn)):
        return {}
    tid: tuple[str, ...] = ()
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and _is_tid(stmt.value) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            if all(isinstance(n, ast.Name) for n in names):
                tid = tuple(n.id for n in names)  # type: ignore[attr-defined]
            break
    stores = [
        (node, node.targets[0])
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Subscript)
        and isinstance(node.targets[0].value, ast.Name)
        and node.targets[0].value.id in params
    ]
    targets = {id(target.value) for _, target in stores}
    read = {
        node.id for node in ast.walk(fn) if isinstance(node, ast.Name) and node.id in params and id(node) not in targets
    }
    written = {target.value.id for _, target in stores} - read  # type: ignore[attr-defined]
    if not written:
        return {}
    assigned = [n.id for node in ast.walk(fn) for n in _stored_names(node)]
    found: dict[str, tuple[str, str | None]] = {}
    if tid and all(assigned.count(name) == 1 for name in tid):  # a thread index reassigned is no thread index
        for name in written:
            if _always_stores(fn.body, name, list(tid)):
                found[name] = (AT_THREAD, None)
    loop = _stride_loop(fn.body, tid, params, assigned)
    if loop is not None:
        body, stride = loop
        for name in written - found.keys():
            if _always_stores(body, name, list(tid)):
                found[name] = (IN_STRIDE_LOOP, stride)
    counted = _counted_slots(fn)
    slots: dict[str, set[Any]] = {}  # each written parameter -> the index of each of its stores
    for _, target in stores:
        slots.setdefault(target.value.id, set()).add(getattr(target.slice, "id", None))  # type: ignore[attr-defined]
    for name in written - found.keys():
        if slots[name] <= counted:
            found[name] = (AT_COUNTED_SLOTS, None)
    return found


def _always_stores(body: list[ast.stmt], name: str, index: list[str]) -> bool:
    """Whether every path through ``body`` stores ``name[index]`` (loops may run no iteration)."""
    for stmt in body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _stores_at(stmt.targets[0], name, index):
            return True
        if (
            isinstance(stmt, ast.If)
            and stmt.orelse
            and _always_stores(stmt.body, name, index)
            and _always_stores(stmt.orelse, name, index)
        ):
            return True
    return False


def _stores_at(target: ast.expr, name: str, index: list[str]) -> bool:
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == name):
        return False
    keys = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
    return [getattr(k, "id", None) for k in keys] == index


def _stride_loop(
    body: list[ast.stmt], tid: tuple[str, ...], params: set[str], assigned: list[str]
) -> tuple[list[ast.stmt], str] | None:
    """``(loop body, stride parameter)`` of a kernel body that is a grid-stride loop over its
    one thread index: ``while i < bound: ...; i += stride`` at its top level, ``i`` assigned
    only there and by ``wp.tid()``; else None."""
    if len(tid) != 1:
        return None
    (index,) = tid
    loops = [s for s in body if isinstance(s, ast.While)]
    if len(loops) != 1 or assigned.count(index) != 2:
        return None
    (loop,) = loops
    test = loop.test
    if not (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == index
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Lt)
    ):
        return None
    step = loop.body[-1] if loop.body else None
    if not (
        isinstance(step, ast.AugAssign)
        and isinstance(step.op, ast.Add)
        and isinstance(step.target, ast.Name)
        and step.target.id == index
        and isinstance(step.value, ast.Name)
        and step.value.id in params
    ):
        return None
    return loop.body[:-1], step.value.id


def _counted_slots(fn: ast.FunctionDef) -> set[str]:
    """The names that hold a slot ``wp.atomic_add`` returned, or such a slot plus an offset."""
    counted: set[str] = set()
    changed = True
    while changed:
        changed = False
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            name, value = node.targets[0].id, node.value
            if name in counted:
                continue
            if _is_atomic_add(value) or (
                isinstance(value, ast.BinOp)
                and isinstance(value.op, ast.Add)
                and any(
                    _is_atomic_add(v) or (isinstance(v, ast.Name) and v.id in counted)
                    for v in (value.left, value.right)
                )
            ):
                counted.add(name)
                changed = True
    # A name assigned more than once may hold something else where it is used.
    assigned = [n.id for node in ast.walk(fn) for n in _stored_names(node)]
    return {name for name in counted if assigned.count(name) == 1}


def _is_atomic_add(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "atomic_add"


def _is_tid(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "tid"


def _stored_names(node: ast.AST) -> Iterator[ast.Name]:
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        yield node
