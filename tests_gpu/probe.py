"""One GPU run that settles what graphcheck's CUDA cross-check assumes about the driver.

Run from the project's root: ``python3 tests_gpu/probe.py`` (``nox -s gpu`` runs it, then
tests_gpu/ whatever it says). It captures real CUDA graphs with Warp, reads them with
graphcheck's reader, and prints what the driver answers, one section per question:

- versions: the driver, the bindings, Warp;
- a plain capture: a kernel, ``zero_``, ``wp.copy`` with offsets, a pinned copy,
  ``fill_``, a strided copy, each matched to its nodes, each span non-empty and starting
  where the one before it ended, the cross-check complete;
- argument bytes: node bytes and function against recorded ones for indexed, fabric,
  struct (half and bool fields), float16, vec3h, mat33d, bool and 3-D array arguments,
  an adjoint launch (its adjoint arguments' bytes recorded) and a tile launch;
- memcpy fields: offsets, pinned-to-device and device-to-pinned copies (addresses in the
  pointers or in ``XInBytes``; their memory types; the copy to the host on the source's
  device and stream);
- Warp's runtime-launched kernels (fill, strided copy, radix sort): ``func``, ``kern``,
  their layouts and names;
- the function queries from a thread in which Warp never made a context current;
- loading the bindings inside a live capture (a fresh process);
- memset fields for ``zero_`` and a uint8 ``fill_(7)`` (``elementSize * width`` is the
  array's bytes);
- attribution with a forked side stream and a conditional;
- a capture on a stream that is not the device's current one, with ``capture_if``, and a
  ``zero_`` and a copy to pinned memory Warp sends to the current stream (stream-drift);
- a module rebuilt during the capture (a new generic overload);
- mem-alloc and mem-free nodes, and ``HashGrid.build`` inside a capture;
- edge types and node order; ``cuGraphKernelNodeSetParams`` with the struct read back;
- conditionals: a ``capture_while`` body, a ``capture_if`` with a Graph branch, their
  bodies learnt through graphcheck's hook on Warp's ``capture_resume``, and the addresses
  only the branch bakes reaching the replay check;
- deterministic mode's native work, and a deterministic step through ``graphcheck.capture``
  (the host checks included: no stream-drift, no sequence difference).

Each assumption is a line ``ok`` or ``MISMATCH``; a check that could not run says
``UNCHECKED`` and why. Every section runs, whatever the others found, and every result is
printed; the exit status is 1 at the end when anything was a mismatch or went unchecked.
Without Warp, cuda-python or a CUDA device it prints why and exits 0.
"""

from __future__ import annotations

import gc as gc_module
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

_MEMCPY_FIELDS = (
    "srcXInBytes", "srcY", "srcZ", "srcLOD", "srcMemoryType", "srcHost", "srcDevice", "srcArray", "srcPitch",
    "srcHeight", "dstXInBytes", "dstY", "dstZ", "dstLOD", "dstMemoryType", "dstHost", "dstDevice", "dstArray",
    "dstPitch", "dstHeight", "WidthInBytes", "Height", "Depth",
)  # fmt: skip
_MEMSET_FIELDS = ("dst", "pitch", "value", "elementSize", "width", "height")
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CHILD = "--bindings-in-live-capture"


class Probe:
    """Prints observations and checks; counts mismatches and checks that could not run."""

    def __init__(self) -> None:
        self.checks = 0
        self.mismatches: list[str] = []
        self.unchecked: list[str] = []

    def say(self, text: str) -> None:
        print(text, flush=True)

    def expect(self, what: str, got: Any, want: Any) -> bool:
        self.checks += 1
        if got == want:
            self.say(f"  ok        {what}: {got!r}")
            return True
        self.mismatches.append(what)
        self.say(f"  MISMATCH  {what}: got {got!r}, expected {want!r}")
        return False

    def skip(self, what: str, why: str) -> None:
        self.unchecked.append(what)
        self.say(f"  UNCHECKED {what}: {why}")


SECTIONS: list[tuple[str, Callable[..., None]]] = []


def section(title: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(fn: Callable[..., None]) -> Callable[..., None]:
        SECTIONS.append((title, fn))
        return fn

    return register


def main() -> int:
    if _ROOT not in sys.path:
        sys.path.insert(0, _ROOT)  # graphcheck and the test kernels from this checkout
    try:
        import warp as wp
    except ImportError as error:
        print(f"probe: skipped, Warp is not installed ({error})")
        return 0
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    if not wp.is_cuda_available():
        print("probe: skipped, Warp sees no CUDA device (run it on a CUDA machine: nox -s gpu)")
        return 0
    try:
        from cuda.bindings import driver
    except ImportError as error:
        print(f"probe: skipped, cuda-python's bindings are not installed ({error})")
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == _CHILD:
        return _bindings_in_live_capture_child(wp)

    started = time.perf_counter()
    probe = Probe()
    ctx = SimpleNamespace(wp=wp, driver=driver, device=str(wp.get_cuda_device(0)))
    for title, fn in SECTIONS:
        probe.say(f"\n== {title}")
        try:
            fn(probe, ctx)
        except Exception:  # say it and go on: one run should tell as much as it can
            probe.mismatches.append(f"{title}: raised")
            probe.say(f"  MISMATCH  the section raised:\n{traceback.format_exc()}")
        try:
            wp.synchronize_device(ctx.device)
        except Exception as error:  # a sticky CUDA error: the sections after it cannot run
            probe.say(f"  the device is unusable after this section: {error}")
            probe.unchecked.append("every later section")
            break
    probe.say(f"\nprobe: {probe.checks} checks, {len(probe.mismatches)} mismatch(es), {len(probe.unchecked)} "
              f"unchecked, in {time.perf_counter() - started:.1f} s")  # fmt: skip
    for what in probe.mismatches:
        probe.say(f"  MISMATCH  {what}")
    for what in probe.unchecked:
        probe.say(f"  UNCHECKED {what}")
    return 1 if probe.mismatches or probe.unchecked else 0


# -- helpers -------------------------------------------------------------------------------------


def _field(struct: Any, name: str) -> str:
    try:
        value = getattr(struct, name)
    except Exception as error:  # an enum getter on a value the bindings do not know
        return f"<{type(error).__name__}: {error}>"
    try:
        return f"{value!r} ({int(value):#x})" if not isinstance(value, int) else f"{value} ({value:#x})"
    except (TypeError, ValueError):
        return repr(value)


def _node_summary(node: Any) -> str:
    fields = {k: v for k, v in node.fields.items() if k != "params"}
    return f"node {node.index} {node.type} depth {node.depth} record {node.record} role {node.role} {fields}" + (
        f" ERROR {node.error}" if node.error else ""
    )


def _capture(ctx: Any, work: Callable[[], None], stream: Any = None, warm: bool = True) -> tuple[Any, Any]:
    """``(trace, capture)`` of ``work`` captured on ``ctx.device`` (or ``stream``), Warp's
    internal operations included; ``work`` runs once eagerly first to load its modules."""
    import graphcheck as gc
    from graphcheck import _cuda

    wp = ctx.wp
    if warm:
        work()
        wp.synchronize_device(ctx.device)
    _cuda.driver_version()  # load the bindings before the capture, as graphcheck.capture does
    with gc.trace_launches(include_warp=True) as trace, wp.ScopedCapture(device=ctx.device, stream=stream) as cap:
        work()
    return trace, cap


def _records(probe: Probe, trace: Any) -> None:
    for i, r in enumerate(trace.records):
        probe.say(f"  record {i} {r.kind} {r.kernel} internal={r.internal} nested={r.nested} stream={r.stream}: "
                  f"capture {r.capture}")  # fmt: skip


def _find(trace: Any, kernel: str, nth: int = 0) -> int | None:
    """Index of the ``nth`` record (Warp's internal ones left out) of ``kernel``."""
    found = [i for i, r in enumerate(trace.records) if r.kernel == kernel and not r.internal]
    return found[nth] if nth < len(found) else None


def _match(probe: Probe, cap: Any, trace: Any) -> Any:
    from graphcheck.graph import read_match

    match = read_match(cap.graph, trace)
    for node in match.nodes:
        probe.say("  " + _node_summary(node))
    for gap in match.gaps:
        probe.say(f"  gap: {gap}")
    return match


def _owned(match: Any, index: int | None) -> list[Any]:
    return [n for n in match.nodes if index is not None and n.record == index]


def _checked_clean(probe: Probe, match: Any, what: str = "the cross-check") -> None:
    from graphcheck.crosscheck import check

    result = check(match)
    probe.expect(f"{what} finds nothing", [f.message for f in result.findings], [])
    probe.expect(f"{what} is complete", result.notes, [])


def _kernel_bytes(probe: Probe, trace: Any, match: Any, label: str, index: int | None) -> None:
    """A launch's kernel node: its parameter sizes and bytes against the record's."""
    from graphcheck import _cuda

    nodes = [n for n in _owned(match, index) if n.type == "KERNEL" and n.role == "recorded"]
    if index is None or len(nodes) != 1:
        probe.skip(f"{label}: node bytes", f"record {index} has kernel node(s) {[n.index for n in nodes]}")
        return
    (node,), record = nodes, trace.records[index]
    layout, why = _cuda.Reader().layout(node.fields["func"])
    probe.say(f"  {label}: layout {layout} {why}; recorded sizes {[len(p) for p in record.param_bytes]}")
    probe.expect(f"{label}: parameter sizes", [s for _, s in layout or ()], [len(p) for p in record.param_bytes])
    probe.expect(f"{label}: parameter bytes", node.fields.get("params"), record.param_bytes)
    probe.expect(f"{label}: the node runs what Warp launched", node.fields.get("func"),
                 record.cuda.function if record.cuda else None)  # fmt: skip
    probe.expect(f"{label}: every parameter Warp laid out was recorded", [i for i, (spec, got) in
                 enumerate(zip(record.layout, record.param_bytes)) if len(got) != spec.size], [])  # fmt: skip


def _spans_chain(probe: Probe, trace: Any, what: str) -> None:
    """Operations in a row on one stream: each span holds nodes ("before" asked before Warp
    enqueued, "after" after it), and starts where the one before it ended."""
    spans = [r.capture for r in trace.records if not r.nested]
    probe.expect(f"{what}: every span learnt", [i for i, s in enumerate(spans) if s is None], [])
    spans = [s for s in spans if s is not None]
    empty = [i for i, s in enumerate(spans) if not s.after or s.after == s.before]
    probe.expect(f"{what}: every span holds nodes", empty, [])
    probe.expect(f"{what}: each span starts where the one before it ended",
                 [i for i in range(1, len(spans)) if spans[i].before != spans[i - 1].after], [])  # fmt: skip


# -- the sections ----------------------------------------------------------------------------------


@section("versions")
def _versions(probe: Probe, ctx: Any) -> None:
    import cuda.bindings

    from graphcheck import _cuda

    wp, driver = ctx.wp, ctx.driver
    probe.say(f"  cuda.bindings {cuda.bindings.__version__} (headers CUDA {driver.CUDA_VERSION})")
    probe.say(
        f"  driver CUDA {_cuda.driver_version()}; Warp {wp.__version__}; {ctx.device}: {wp.get_device(ctx.device).name}"
    )
    err, version = driver.cuDriverGetVersion()
    probe.say(f"  cuDriverGetVersion -> {err!r}, {version}")
    try:
        out = driver.cuGraphNodeGetParams(driver.CUgraphNode(0))
        probe.say(f"  cuGraphNodeGetParams(NULL) answers {out[0]!r}: the entry point exists")
    except RuntimeError as error:
        probe.say(f"  cuGraphNodeGetParams raises {type(error).__name__}: {error}")


@section("a kernel, zero_, wp.copy with offsets, a pinned host-to-device copy, fill_(1.0), a strided copy")
def _plain_capture(probe: Probe, ctx: Any) -> None:
    from graphcheck import _cuda, _warp
    from graphcheck.params import expected_cuda_config
    from tests import kernels as K

    wp, driver, device = ctx.wp, ctx.driver, ctx.device
    a, b = wp.zeros(1000, dtype=float, device=device), wp.ones(1000, dtype=float, device=device)
    host = wp.array([float(i) for i in range(64)], dtype=float, device="cpu", pinned=True)
    target = wp.zeros(64, dtype=float, device=device)
    wide, other = wp.zeros((32, 2), dtype=float, device=device), wp.ones((32, 2), dtype=float, device=device)
    strided_dst, strided_src = wide[:, 0], other[:, 1]
    probe.say(f"  strided views contiguous? {strided_dst.is_contiguous}, {strided_src.is_contiguous}")

    def work() -> None:
        wp.launch(K.scale, dim=1000, inputs=[a, b, 2.5, 3], device=device)
        a.zero_()
        wp.copy(a, b, dest_offset=4, count=100)
        wp.copy(target, host)
        a.fill_(1.0)
        wp.copy(strided_dst, strided_src)

    trace, cap = _capture(ctx, work)
    _records(probe, trace)
    probe.expect("every record learnt its capture span", [r.kernel for r in trace.records if r.capture is None], [])
    _spans_chain(probe, trace, "a kernel, zero_, two copies, fill_, a strided copy")
    launch_at, zero_at = _find(trace, "tests.kernels.scale"), _find(trace, "array.zero_")
    copy_at, pinned_at, strided_at = (_find(trace, "wp.copy", n) for n in range(3))
    fill_at = _find(trace, "array.fill_")
    match = _match(probe, cap, trace)
    probe.expect(
        "each record's span holds the nodes it made (one kernel, memset, memcpy, memcpy)",
        [[n.type for n in _owned(match, i)] for i in (launch_at, zero_at, copy_at, pinned_at)],
        [["KERNEL"], ["MEMSET"], ["MEMCPY"], ["MEMCPY"]],
    )
    _kernel_bytes(probe, trace, match, "K.scale", launch_at)
    kernels = [n for n in _owned(match, launch_at) if n.type == "KERNEL"]
    if kernels and launch_at is not None:
        node, launch = kernels[0], trace.records[launch_at]
        raw = _cuda.kernel_params(node.handle)
        for name in ("func", "kern", "extra", "kernelParams", "gridDimX", "gridDimY", "gridDimZ", "blockDimX",
                     "sharedMemBytes", "ctx"):  # fmt: skip
            probe.say(f"  {name} = {_field(raw, name)}")
        probe.expect("func is what Warp launched", node.fields["func"], launch.cuda.function if launch.cuda else None)
        probe.expect("func is the kernel's CUfunction", node.fields["func"],
                     _warp.kernel_function(launch.kernel_object, device, launch.block_dim))  # fmt: skip
        probe.expect("extra is 0 (Warp passes kernelParams)", int(raw.extra), 0)
        probe.expect("grid and block follow Warp's formula", (node.fields["grid"], node.fields["block"]),
                     expected_cuda_config(1000, launch.block_dim))  # fmt: skip
        probe.expect(
            "sharedMemBytes is what Warp asked", node.fields["smem"], launch.cuda.smem_bytes if launch.cuda else None
        )
    else:
        probe.skip("the kernel node's fields", "no kernel node for the launch")
    memset = [n.fields for n in _owned(match, zero_at) if n.type == "MEMSET"]
    probe.expect("zero_'s memset", [(m["dst"], m["value"], m["nbytes"]) for m in memset], [(a.ptr, 0, 4000)])
    copy = [n.fields for n in _owned(match, copy_at) if n.type == "MEMCPY"]
    probe.expect("wp.copy's memcpy", [(c["dst"], c["src"], c["nbytes"]) for c in copy], [(a.ptr + 16, b.ptr, 400)])
    pinned = [n.fields for n in _owned(match, pinned_at) if n.type == "MEMCPY"]
    probe.expect("the pinned copy's memcpy", [(c["dst"], c["src"], c["nbytes"]) for c in pinned],
                 [(target.ptr, host.ptr, 256)])  # fmt: skip
    for label, index in (("fill_(1.0)", fill_at), ("the strided copy", strided_at)):
        nodes = _owned(match, index)
        probe.expect(f"{label} made nodes, Warp's own and read", bool(nodes) and all(
            (n.role, n.error) in (("warp-native", ""), ("recorded", "")) for n in nodes), True)  # fmt: skip
    top = _warp.graph_handle(cap.graph)
    _, _, count = driver.cuGraphGetNodes(driver.CUgraph(top))
    _, listed, count = driver.cuGraphGetNodes(driver.CUgraph(top), count)
    in_walk = [n.handle for n in match.nodes if n.graph == top]
    probe.say(f"  cuGraphGetNodes lists the top graph in walk order: {[int(n) for n in listed[:count]] == in_walk}")
    _checked_clean(probe, match)
    wp.capture_launch(cap.graph)


@section("argument bytes: indexed, fabric, struct, float16, vec3h, mat33d, bool, 3-D, adjoint, tiles")
def _argument_bytes(probe: Probe, ctx: Any) -> None:
    from tests import kernels as K
    from tests_gpu import gpu_kernels as G

    wp, device = ctx.wp, ctx.device
    inputs = G.exotic_inputs(device)
    data, out = wp.array([1.0, 2.0, 3.0], dtype=float, device=device), wp.zeros(3, dtype=float, device=device)
    fabric = G.fabric_of(data)
    a, b = wp.zeros(64, dtype=float, device=device), wp.ones(64, dtype=float, device=device)
    ga, gb = wp.ones(64, dtype=float, device=device), wp.zeros(64, dtype=float, device=device)
    tiles, sums = wp.ones((4, G.TILE), dtype=float, device=device), wp.zeros(4, dtype=float, device=device)

    def work() -> None:
        wp.launch(G.exotic, dim=(4, 4, 4), inputs=inputs, device=device)
        wp.launch(G.through_fabric, dim=3, inputs=[fabric, out], device=device)
        wp.launch(K.scale, dim=64, inputs=[a, b, 2.5, 3], adjoint=True, adj_inputs=[ga, gb, 0.0, 0], device=device)
        wp.launch_tiled(G.tile_sum, dim=[4], inputs=[tiles, sums], block_dim=64, device=device)

    trace, cap = _capture(ctx, work)
    _records(probe, trace)
    match = _match(probe, cap, trace)
    launched = (("exotic", "tests_gpu.gpu_kernels.exotic"), ("fabric", "tests_gpu.gpu_kernels.through_fabric"),
                ("adjoint", "tests.kernels.scale"), ("tiles", "tests_gpu.gpu_kernels.tile_sum"))  # fmt: skip
    for label, kernel in launched:
        _kernel_bytes(probe, trace, match, label, _find(trace, kernel))
    _checked_clean(probe, match)
    wp.capture_launch(cap.graph)


@section("memcpy fields: offsets, pinned-to-device, device-to-pinned")
def _memcpy_fields(probe: Probe, ctx: Any) -> None:
    from graphcheck import _cuda, _warp

    wp, driver, device = ctx.wp, ctx.driver, ctx.device
    a, b = wp.zeros(1000, dtype=float, device=device), wp.ones(1000, dtype=float, device=device)
    up = wp.array([float(i) for i in range(64)], dtype=float, device="cpu", pinned=True)
    down = wp.zeros(64, dtype=float, device="cpu", pinned=True)
    on_device = wp.ones(64, dtype=float, device=device)

    def work() -> None:
        wp.copy(a, b, dest_offset=4, src_offset=2, count=100)
        wp.copy(on_device, up)
        wp.copy(down, on_device)

    trace, cap = _capture(ctx, work)
    _records(probe, trace)
    match = _match(probe, cap, trace)
    reader = _cuda.Reader()
    wanted = [(a.ptr + 16, b.ptr + 8, 400), (on_device.ptr, up.ptr, 256), (down.ptr, on_device.ptr, 256)]
    # The host side of a pinned copy is host memory (unified where the driver says so), never device memory.
    kinds = [({"device"}, {"device"}), ({"device", "unified"}, {"host", "unified"}),
             ({"host", "unified"}, {"device", "unified"})]  # fmt: skip
    labels = ("offsets", "pinned to device", "device to pinned")
    for nth, (label, want, (dst_kinds, src_kinds)) in enumerate(zip(labels, wanted, kinds)):
        nodes = [n for n in _owned(match, _find(trace, "wp.copy", nth)) if n.type == "MEMCPY"]
        for node in nodes:
            struct = reader.call("cuGraphMemcpyNodeGetParams", driver.CUgraphNode(node.handle))
            probe.say(f"  -- {label}: " + ", ".join(f"{name}={_field(struct, name)}" for name in _MEMCPY_FIELDS))
        probe.expect(f"{label}: (dst, src, nbytes)", [(n.fields["dst"], n.fields["src"], n.fields["nbytes"])
                     for n in nodes], [want])  # fmt: skip
        probe.expect(f"{label}: memory types (dst, src) are {sorted(dst_kinds)}, {sorted(src_kinds)}",
                     [n.fields["dst_kind"] in dst_kinds and n.fields["src_kind"] in src_kinds for n in nodes],
                     [True])  # fmt: skip
    to_host = _find(trace, "wp.copy", 2)
    record = trace.records[to_host] if to_host is not None else None
    probe.expect("the copy to the host is on the source's device and current stream",
                 (record.device, record.stream) if record else None,
                 (device, _warp.stream_handle(wp.get_stream(device))))  # fmt: skip
    _checked_clean(probe, match)


@section("Warp's runtime-launched kernels: fill_, a strided copy, radix sort")
def _runtime_kernels(probe: Probe, ctx: Any) -> None:
    from graphcheck import _cuda

    wp, device = ctx.wp, ctx.device
    a = wp.zeros(1000, dtype=float, device=device)
    wide, other = wp.zeros((32, 2), dtype=float, device=device), wp.ones((32, 2), dtype=float, device=device)
    keys = wp.array(list(range(64, 0, -1)) * 2, dtype=int, device=device)
    values = wp.zeros(128, dtype=int, device=device)

    def work() -> None:
        a.fill_(1.0)
        wp.copy(wide[:, 0], other[:, 1])
        wp.utils.radix_sort_pairs(keys, values, 64)

    trace, cap = _capture(ctx, work)
    _records(probe, trace)
    match = _match(probe, cap, trace)
    reader = _cuda.Reader()
    for node in match.nodes:
        if node.type == "KERNEL":
            raw = _cuda.kernel_params(node.handle)
            func, kern = int(raw.func), int(raw.kern)
            target, is_kernel = (func, False) if func else (kern, True)
            probe.say(f"  node {node.index}: func {func:#x} kern {kern:#x} name {reader.name(target, is_kernel)!r} "
                      f"layout {reader.layout(target, is_kernel)}")  # fmt: skip
    for label, kernel in (("fill_", "array.fill_"), ("strided copy", "wp.copy")):
        nodes = _owned(match, _find(trace, kernel))
        probe.expect(f"{label}: nodes read and Warp's own", bool(nodes) and all(
            n.role in ("warp-native", "recorded") and not n.error for n in nodes), True)  # fmt: skip
    sort = [i for i, r in enumerate(trace.records) if r.kind == "native"]
    nodes = [n for i in sort for n in _owned(match, i)]
    probe.expect("radix sort: nodes read and Warp's own", bool(nodes) and all(
        n.role == "warp-native" and not n.error for n in nodes), True)  # fmt: skip
    _checked_clean(probe, match)


@section("the function queries from a thread in which Warp never made a context current")
def _fresh_thread(probe: Probe, ctx: Any) -> None:
    from graphcheck import _cuda
    from tests import kernels as K

    wp, device = ctx.wp, ctx.device
    x = wp.zeros(16, dtype=float, device=device)
    trace, cap = _capture(ctx, lambda: wp.launch(K.add_one, dim=16, inputs=[x], device=device))
    match = _match(probe, cap, trace)
    kernels = [n for n in match.nodes if n.type == "KERNEL"]
    if not kernels:
        probe.skip("queries from a fresh thread", "no kernel node")
        return
    node = kernels[0]
    here = (_cuda.Reader().layout(node.fields["func"]), _cuda.Reader().name(node.fields["func"]))
    there: list[Any] = []

    def ask() -> None:
        try:
            there.append((_cuda.Reader().layout(node.fields["func"]), _cuda.Reader().name(node.fields["func"])))
            there.append(int(_cuda.kernel_params(node.handle).func))
        except Exception as error:
            there.append(f"{type(error).__name__}: {error}")

    thread = threading.Thread(target=ask)
    thread.start()
    thread.join()
    probe.say(f"  in this thread {here}; in a fresh one {there}")
    probe.expect("a fresh thread gets the same layout and name", there[:1], [here])
    probe.expect("a fresh thread reads the node", there[1:], [node.fields["func"]])


@section("loading the bindings inside a live capture (a fresh process)")
def _bindings_in_live_capture(probe: Probe, ctx: Any) -> None:
    command = [sys.executable, os.path.abspath(__file__), _CHILD]
    done = subprocess.run(command, capture_output=True, text=True, cwd=_ROOT, timeout=300, check=False)
    for line in (done.stdout + done.stderr).splitlines():
        probe.say(f"  child: {line}")
    probe.expect("the child's capture learnt its span and replayed", done.returncode, 0)


def _bindings_in_live_capture_child(wp: Any) -> int:
    import graphcheck as gc
    from tests import kernels as K

    device = str(wp.get_cuda_device(0))
    x = wp.zeros(16, dtype=float, device=device)
    wp.launch(K.add_one, dim=16, inputs=[x], device=device)
    wp.synchronize_device(device)
    print(f"cuda.bindings loaded before the capture: {'cuda.bindings.driver' in sys.modules}")
    with gc.trace_launches() as trace, wp.ScopedCapture(device=device) as cap:
        wp.launch(K.add_one, dim=16, inputs=[x], device=device)
    print(f"span {trace[0].capture}")
    wp.capture_launch(cap.graph)
    wp.synchronize_device(device)
    print(f"x after one eager launch and one replay: {x.numpy()[:2]}")
    return 0 if trace[0].capture is not None and float(x.numpy()[0]) == 2.0 else 1


@section("memset fields: zero_ and a uint8 fill_")
def _memsets(probe: Probe, ctx: Any) -> None:
    from graphcheck import _cuda

    wp, driver, device = ctx.wp, ctx.driver, ctx.device
    a = wp.ones(1000, dtype=float, device=device)
    u8 = wp.zeros(1000, dtype=wp.uint8, device=device)

    def work() -> None:
        a.zero_()
        u8.fill_(7)

    trace, cap = _capture(ctx, work)
    _records(probe, trace)
    match = _match(probe, cap, trace)
    reader = _cuda.Reader()
    for label, kernel, want in (
        ("zero_", "array.zero_", (a.ptr, 0, 4000)),
        ("uint8 fill_(7)", "array.fill_", (u8.ptr, 7, 1000)),
    ):
        nodes = [n for n in _owned(match, _find(trace, kernel)) if n.type == "MEMSET"]
        raw = []
        for node in nodes:
            struct = reader.call("cuGraphMemsetNodeGetParams", driver.CUgraphNode(node.handle))
            probe.say(f"  -- {label}: " + ", ".join(f"{name}={_field(struct, name)}" for name in _MEMSET_FIELDS))
            element = int(struct.elementSize)
            raw.append((element, element * int(struct.width) * max(int(struct.height), 1)))
        probe.expect(f"{label}: (dst, value, nbytes)", [(n.fields["dst"], n.fields["value"], n.fields["nbytes"])
                     for n in nodes], [want])  # fmt: skip
        probe.expect(f"{label}: elementSize * width * height is the array's bytes, as graphcheck reads it",
                     [(n.fields["element_size"], n.fields["nbytes"]) for n in nodes], raw)  # fmt: skip
        probe.expect(f"{label}: ... and that is {want[2]} bytes", [b for _, b in raw], [want[2]])
    _checked_clean(probe, match)


@section("attribution with a forked side stream and a conditional")
def _side_stream(probe: Probe, ctx: Any) -> None:
    from tests import kernels as K

    wp, device = ctx.wp, ctx.device
    if not wp.is_conditional_graph_supported():
        probe.skip("a side stream and a conditional", "Warp says conditional graph nodes are not supported here")
        return
    side = wp.Stream(device)
    x, y, z = (wp.zeros(16, dtype=float, device=device) for _ in range(3))
    flag = wp.array([1], dtype=int, device=device)

    def work() -> None:
        main = wp.get_stream(device)
        side.wait_stream(main)  # fork
        wp.launch(K.add_one, dim=16, inputs=[y], device=device, stream=side)  # not joined until the end
        wp.capture_if(flag, on_true=lambda: wp.launch(K.add_one, dim=16, inputs=[x], device=device))
        wp.launch(K.add_one, dim=16, inputs=[z], device=device)
        main.wait_stream(side)  # join, or the capture cannot end

    trace, cap = _capture(ctx, work)
    _records(probe, trace)
    match = _match(probe, cap, trace)
    launches = [i for i, r in enumerate(trace.records) if r.kind == "launch"]
    probe.expect("each launch has exactly its kernel node", [[n.type for n in _owned(match, i)] for i in launches],
                 [["KERNEL"]] * 3)  # fmt: skip
    conditional = _find(trace, "wp.capture_if")
    probe.expect("the conditional holds its setter kernel and its node, not the side stream's launch",
                 sorted(n.role for n in _owned(match, conditional)), ["recorded", "warp-conditional"])  # fmt: skip
    _checked_clean(probe, match)


@section("a capture on a stream that is not the device's current one")
def _non_current_stream(probe: Probe, ctx: Any) -> None:
    import graphcheck as gc
    from tests import kernels as K

    wp, device = ctx.wp, ctx.device
    if not wp.is_conditional_graph_supported():
        probe.skip("capture_if on a non-current stream", "Warp says conditional graph nodes are not supported here")
        return
    s = wp.Stream(device)
    x = wp.zeros(16, dtype=float, device=device)
    flag = wp.array([1], dtype=int, device=device)

    def work() -> None:
        wp.launch(K.add_one, dim=16, inputs=[x], device=device, stream=s)
        wp.capture_if(flag, on_true=lambda: wp.launch(K.add_one, dim=16, inputs=[x], device=device, stream=s), stream=s)

    trace, cap = _capture(ctx, work, stream=s)
    _records(probe, trace)
    probe.expect("every record learnt its span", [r.kernel for r in trace.records if r.capture is None], [])
    match = _match(probe, cap, trace)
    _checked_clean(probe, match)
    probe.say("  -- and a zero_() and a copy to pinned memory Warp sends to the device's current stream while the "
              "capture is on s:")  # fmt: skip
    y = wp.ones(16, dtype=float, device=device)
    pinned = wp.zeros(16, dtype=float, device="cpu", pinned=True)
    with gc.trace_launches() as escaped, wp.ScopedCapture(device=device, stream=s) as cap2:
        wp.launch(K.add_one, dim=16, inputs=[x], device=device, stream=s)
        y.zero_()
        wp.copy(pinned, y)
    _records(probe, escaped)
    from graphcheck.checks.escaped_work import uncaptured

    probe.expect("the zero_ and the copy are stream-drift findings",
                 [(f.kind, f.kernel) for f in uncaptured(escaped)],
                 [("stream-drift", "array.zero_"), ("stream-drift", "wp.copy")])  # fmt: skip
    del cap2


@section("a module rebuilt during the capture (a generic kernel's new overload)")
def _module_rebuild(probe: Probe, ctx: Any) -> None:
    import graphcheck as gc
    from tests_gpu import gpu_kernels as G

    wp, device = ctx.wp, ctx.device
    x, y = wp.ones(16, dtype=float, device=device), wp.zeros(16, dtype=float, device=device)
    n = wp.zeros(16, dtype=wp.int64, device=device)
    wp.launch(G.doubled, dim=16, inputs=[x, y], device=device)
    wp.synchronize_device(device)
    with gc.GraphGuard(device=device, reference=None, on_failure="ignore") as guard:
        wp.launch(G.doubled, dim=16, inputs=[x, y], device=device)
        wp.launch(G.generic_fill, dim=16, inputs=[n, wp.int64(3)], device=device)  # a new overload: rebuilds
    probe.say(f"  report: {guard.report}")
    probe.expect("no node-mismatch", [f.message for f in guard.report.findings if f.kind == "node-mismatch"], [])


@section("mem-alloc and mem-free nodes; HashGrid.build inside a capture")
def _allocation_nodes(probe: Probe, ctx: Any) -> None:
    from tests import kernels as K

    wp, device = ctx.wp, ctx.device
    if not wp.is_mempool_enabled(device):
        probe.skip("allocation nodes", "the device's memory pool is off")
        return
    made: list[int] = []

    def work() -> None:
        t = wp.zeros(64, dtype=float, device=device)
        made.append(t.ptr)
        wp.launch(K.add_one, dim=64, inputs=[t], device=device)
        del t
        gc_module.collect()

    trace, cap = _capture(ctx, work)
    match = _match(probe, cap, trace)
    allocs = [(n.type, n.fields.get("dst"), n.role) for n in match.nodes if n.type in ("MEM_ALLOC", "MEM_FREE")]
    probe.expect("the allocation's nodes are Warp's", allocs, [("MEM_ALLOC", made[-1], "allocation"),
                                                               ("MEM_FREE", made[-1], "allocation")])  # fmt: skip
    _checked_clean(probe, match)
    points = wp.array([wp.vec3(i * 0.1, 0.0, 0.0) for i in range(64)], dtype=wp.vec3, device=device)
    grid = wp.HashGrid(8, 8, 8, device=device)
    try:
        trace, cap = _capture(ctx, lambda: grid.build(points, 0.25))
    except Exception as error:
        probe.say(f"  HashGrid.build inside a capture failed: {type(error).__name__}: {error}")
        probe.expect("HashGrid.build can be captured", False, True)
        return
    _records(probe, trace)
    match = _match(probe, cap, trace)
    probe.expect("HashGrid.build's nodes are Warp's own", [(n.index, n.type, n.role) for n in match.nodes
                 if n.role in ("foreign", "unrecorded", "unread")], [])  # fmt: skip


@section("edge types and node order; cuGraphKernelNodeSetParams with the struct read back")
def _edges_and_set_params(probe: Probe, ctx: Any) -> None:
    from graphcheck import _cuda, _warp
    from tests import kernels as K

    wp, driver, device = ctx.wp, ctx.driver, ctx.device
    x = wp.zeros(16, dtype=float, device=device)

    def work() -> None:
        for _ in range(3):
            wp.launch(K.add_one, dim=16, inputs=[x], device=device)
        x.zero_()

    trace, cap = _capture(ctx, work)
    match = _match(probe, cap, trace)
    top = driver.CUgraph(_warp.graph_handle(cap.graph))
    _, _, _, _, count = driver.cuGraphGetEdges(top)
    err, sources, targets, data, count = driver.cuGraphGetEdges(top, count)
    probe.say(f"  {count} edge(s): {[(int(s), int(t), int(d.type)) for s, t, d in zip(sources, targets, data)]}")
    probe.expect("every edge is a default edge (type 0)", {int(d.type) for d in list(data)[:count]} <= {0}, True)
    _, _, n = driver.cuGraphGetNodes(top)
    _, listed, n = driver.cuGraphGetNodes(top, n)
    spans = [r.capture.after[-1] for r in trace.records if r.capture is not None and r.capture.after]
    probe.say(f"  cuGraphGetNodes order {[int(h) for h in listed[:n]]}; capture order {spans}")
    kernels = [nd for nd in match.nodes if nd.type == "KERNEL"]
    if not kernels:
        probe.skip("cuGraphKernelNodeSetParams", "no kernel node")
        return
    params = _cuda.kernel_params(kernels[0].handle)
    try:
        _cuda.set_kernel_params(kernels[0].handle, params)
        again = _cuda.kernel_params(kernels[0].handle)
        probe.expect("set back unchanged, the node reads the same", (int(again.func), again.gridDimX),
                     (int(params.func), params.gridDimX))  # fmt: skip
    except Exception as error:
        probe.expect(f"cuGraphKernelNodeSetParams accepts the struct read back ({error})", False, True)


@section("conditionals: a capture_while body, a capture_if with a Graph branch")
def _conditional_capture(probe: Probe, ctx: Any) -> None:
    from graphcheck import _cuda
    from tests import kernels as K

    wp, device = ctx.wp, ctx.device
    if not wp.is_conditional_graph_supported():
        probe.skip("conditionals", "Warp says conditional graph nodes are not supported here")
        return
    counter = wp.array([3], dtype=int, device=device)
    flag = wp.array([1], dtype=int, device=device)
    x = wp.zeros(16, dtype=float, device=device)
    y = wp.zeros(16, dtype=float, device=device)  # launched only in the Graph branch
    wp.launch(K.add_one, dim=16, inputs=[x], device=device)
    wp.launch(K.decrement_int, dim=1, inputs=[counter], device=device)
    with wp.ScopedCapture(device=device) as branch:
        wp.launch(K.add_one, dim=16, inputs=[y], device=device)

    def body() -> None:
        wp.launch(K.add_one, dim=16, inputs=[x], device=device)
        wp.launch(K.decrement_int, dim=1, inputs=[counter], device=device)

    def work() -> None:
        wp.capture_while(counter, body)
        wp.capture_if(flag, on_true=branch.graph)

    from graphcheck import _warp

    hooked: list[bool] = []
    trace, cap = _capture(ctx, lambda: (hooked.append("capture_resume" in _warp.HOOKS.left_behind()), work()),
                          warm=False)  # fmt: skip
    _records(probe, trace)
    probe.expect("graphcheck's hook stands where Warp's conditionals call capture_resume", hooked, [True])
    # A body's operations carry (conditional's seq, branch, iteration); the conditionals False.
    probe.expect("the records", [(r.kind, isinstance(r.nested, tuple)) for r in trace.records],
                 [("conditional", False), ("launch", True), ("launch", True), ("conditional", False)])  # fmt: skip
    spans = [r.capture for r in trace.records]
    while_span, body_span, _, if_span = (spans + [None] * 4)[:4]
    while_bodies = while_span.bodies if while_span else ()
    probe.expect("capture_while learnt one body", len(while_bodies), 1)
    probe.expect("inside the while body, capture info names the body graph",
                 (body_span.graph if body_span else None,), tuple(while_bodies[:1]))  # fmt: skip
    probe.expect("capture_if with a Graph branch learnt its body", len(if_span.bodies) if if_span else 0, 1)
    match = _match(probe, cap, trace)
    reader = _cuda.Reader()
    learnt = [b for span in (while_span, if_span) if span for b in span.bodies]
    if reader.version >= _cuda.CONDITIONAL_BODIES:
        conditionals = [n for n in match.nodes if n.type == "CONDITIONAL"]
        named = [b for node in conditionals for b in reader.conditional_bodies(node.handle)]
        probe.expect("the bodies learnt at capture time are the ones the driver names", named, learnt)
    probe.expect("every conditional body was walked", [n.index for n in match.nodes
                 if n.type == "CONDITIONAL" and n.fields.get("bodies_unknown")], [])  # fmt: skip
    probe.expect("every node is accounted for", [(n.index, n.role) for n in match.nodes
                 if n.role in ("unrecorded", "foreign", "unread")], [])  # fmt: skip
    probe.expect("the Graph branch's child graph was walked", any(n.type == "GRAPH" for n in match.nodes), True)
    baked = {a.start for addresses in match.addresses().values() for a in addresses}
    probe.expect("the address only the Graph branch bakes reaches the replay check", y.ptr in baked, True)
    _checked_clean(probe, match)
    wp.capture_launch(cap.graph)
    probe.expect("the replay counted down", int(counter.numpy()[0]), 0)


@section("deterministic mode: Warp's native deterministic work, and a step through graphcheck.capture")
def _deterministic(probe: Probe, ctx: Any) -> None:
    wp, device = ctx.wp, ctx.device
    mode = getattr(getattr(wp.config, "DeterministicMode", None), "RUN_TO_RUN", None)
    if mode is None:
        probe.skip("deterministic mode", f"Warp {wp.__version__} has no wp.config.DeterministicMode")
        return
    saved = wp.config.deterministic
    wp.config.deterministic = mode
    try:
        from tests_gpu import deterministic_kernels as D

        x = wp.ones(256, dtype=float, device=device)
        total = wp.zeros(1, dtype=float, device=device)
        trace, cap = _capture(ctx, lambda: wp.launch(D.atomic_total, dim=256, inputs=[x, total], device=device))
        _records(probe, trace)
        match = _match(probe, cap, trace)
        probe.expect("every node is accounted for", [(n.index, n.type, n.role) for n in match.nodes
                     if n.role in ("unrecorded", "foreign", "unread")], [])  # fmt: skip
        _checked_clean(probe, match)
        probe.expect("only the launch is the user's", [r.kernel for r in trace.records if not r.internal],
                     ["tests_gpu.deterministic_kernels.atomic_total"])  # fmt: skip
        _deterministic_step(probe, ctx, D)
    finally:
        wp.config.deterministic = saved


def _deterministic_step(probe: Probe, ctx: Any, D: Any) -> None:
    """A deterministic step through graphcheck.capture: the reference call, the capture, the
    host checks (stream-drift, the comparison), the graph and the replay."""
    import graphcheck as gc

    wp, device = ctx.wp, ctx.device

    class Totals:
        def __init__(self) -> None:
            self.x = wp.ones(256, dtype=float, device=device)
            self.total = wp.zeros(1, dtype=float, device=device)

        def step(self) -> None:
            wp.launch(D.atomic_total, dim=256, inputs=[self.x, self.total], device=device)

    totals = Totals()
    checked = gc.capture(totals.step, device=device, owners=(totals,), on_failure="ignore")
    report = checked.report
    probe.say(f"  report: {report}")
    probe.expect("gc.capture of a deterministic step finds nothing", [(f.kind, f.message) for f in report.findings], [])
    probe.expect("... with every check run (the host checks and the comparison included)",
                 (report.status, "compare" in report.checks), ("passed", True))  # fmt: skip
    before = float(totals.total.numpy()[0])
    checked.launch()
    wp.synchronize_device(device)
    probe.expect("a replay adds the step's 256 once", float(totals.total.numpy()[0]) - before, 256.0)


if __name__ == "__main__":
    sys.exit(main())
