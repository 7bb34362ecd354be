"""One GPU run that settles what graphcheck's CUDA cross-check assumes about the driver.

Run from the project's root: ``python3 tests_gpu/probe.py`` (``nox -s gpu`` runs it before
tests_gpu/). It captures a few real CUDA graphs with Warp, reads them with graphcheck's
reader, and prints everything to stdout: the driver and bindings versions; a kernel
node's ``func``, ``kern``, ``extra``, parameter sizes and whether its bytes equal the
recorded ones; every field of the memcpy nodes of ``wp.copy(a, b, dest_offset=4,
count=100)`` and of a pinned host-to-device copy; the memset of ``zero_()``; the nodes of
``fill_(1.0)`` and of a strided copy (does ``cuFuncGetParamInfo`` accept their
functions?); and what capture-time attribution returns inside a ``capture_while`` body
and a ``capture_if`` with a Graph branch.

Each assumption is a line ``ok`` or ``MISMATCH``; the exit status is 1 when any is a
mismatch. Without Warp, cuda-python or a CUDA device it prints why and exits 0. It
finishes in well under two minutes on one GPU (most of it is compiling the test kernels).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any

_MEMCPY_FIELDS = (
    "srcXInBytes", "srcY", "srcZ", "srcLOD", "srcMemoryType", "srcHost", "srcDevice", "srcArray", "srcPitch",
    "srcHeight", "dstXInBytes", "dstY", "dstZ", "dstLOD", "dstMemoryType", "dstHost", "dstDevice", "dstArray",
    "dstPitch", "dstHeight", "WidthInBytes", "Height", "Depth",
)  # fmt: skip


class Probe:
    """Prints observations and checks; counts the mismatches."""

    def __init__(self) -> None:
        self.checks = 0
        self.mismatches: list[str] = []

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


def _field(struct: Any, name: str) -> str:
    try:
        value = getattr(struct, name)
    except Exception as error:  # an enum getter on a value the bindings do not know
        return f"<{type(error).__name__}: {error}>"
    try:
        return f"{value!r} ({int(value):#x})" if not isinstance(value, int) else f"{value} ({value:#x})"
    except (TypeError, ValueError):
        return repr(value)


def main() -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if root not in sys.path:
        sys.path.insert(0, root)  # graphcheck and tests.kernels from this checkout
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

    started = time.perf_counter()
    probe = Probe()
    device = str(wp.get_cuda_device(0))
    for section in (_versions, _plain_capture, _conditional_capture):
        try:
            section(probe, wp, driver, device)
        except Exception:  # say it and go on: one run should tell as much as it can
            probe.mismatches.append(f"{section.__name__} raised")
            probe.say(f"  MISMATCH  {section.__name__} raised:\n{traceback.format_exc()}")
    probe.say(f"\nprobe: {probe.checks} checks, {len(probe.mismatches)} mismatch(es) in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip
    for what in probe.mismatches:
        probe.say(f"  MISMATCH  {what}")
    return 1 if probe.mismatches else 0


def _versions(probe: Probe, wp: Any, driver: Any, device: str) -> None:
    import cuda.bindings

    from graphcheck import _cuda

    probe.say("== versions")
    probe.say(f"  cuda.bindings {cuda.bindings.__version__} (headers CUDA {driver.CUDA_VERSION})")
    probe.say(f"  driver CUDA {_cuda.driver_version()}; Warp {wp.__version__}; {device}: {wp.get_device(device).name}")
    err, version = driver.cuDriverGetVersion()
    probe.say(f"  cuDriverGetVersion -> {err!r}, {version}")
    try:
        out = driver.cuGraphNodeGetParams(driver.CUgraphNode(0))
        probe.say(f"  cuGraphNodeGetParams(NULL) answers {out[0]!r}: the entry point exists")
    except RuntimeError as error:
        probe.say(f"  cuGraphNodeGetParams raises {type(error).__name__}: {error}")


def _node_summary(node: Any) -> str:
    fields = {k: v for k, v in node.fields.items() if k != "params"}
    return f"node {node.index} {node.type} depth {node.depth} record {node.record} role {node.role} {fields}" + (
        f" ERROR {node.error}" if node.error else ""
    )


def _plain_capture(probe: Probe, wp: Any, driver: Any, device: str) -> None:
    import graphcheck as gc
    from graphcheck import _cuda, _warp
    from graphcheck.crosscheck import check
    from graphcheck.graph import read_match, span_nodes
    from graphcheck.params import expected_cuda_config
    from tests import kernels as K

    probe.say("\n== a kernel, zero_, wp.copy with offsets, a pinned host-to-device copy, fill_(1.0), a strided copy")
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

    work()  # load the modules before capturing
    wp.synchronize_device(device)
    _cuda.driver_version()  # load the bindings before the capture, as graphcheck.capture does
    with gc.trace_launches(include_warp=True) as trace, wp.ScopedCapture(device=device) as capture:
        work()
    records = trace.records
    top = _warp.graph_handle(capture.graph)
    for i, r in enumerate(records):
        probe.say(f"  record {i} {r.kind} {r.kernel} internal={r.internal}: capture span {r.capture}")
    probe.expect("every record learnt its capture span", [r.kernel for r in records if r.capture is None], [])
    user = [i for i, r in enumerate(records) if not r.internal]
    wanted = ["tests.kernels.scale", "array.zero_", "wp.copy", "wp.copy", "array.fill_", "wp.copy"]
    if not probe.expect("the user's operations", [records[i].kernel for i in user], wanted):
        return
    launch_at, zero_at, copy_at, pinned_at, fill_at, strided_at = user
    match = read_match(capture.graph, trace)
    for node in match.nodes:
        probe.say("  " + _node_summary(node))
    by_record = {i: [n for n in match.nodes if n.record == i] for i in range(len(records))}
    probe.expect(
        "each record's span holds the nodes it made (one kernel, memset, memcpy, memcpy)",
        [[n.type for n in by_record[i]] for i in (launch_at, zero_at, copy_at, pinned_at)],
        [["KERNEL"], ["MEMSET"], ["MEMCPY"], ["MEMCPY"]],
    )
    _, _, count = driver.cuGraphGetNodes(driver.CUgraph(top))
    _, listed, count = driver.cuGraphGetNodes(driver.CUgraph(top), count)
    topological = [n.handle for n in match.nodes if n.graph == top]
    probe.say(
        f"  cuGraphGetNodes lists the top graph in topological order: {[int(n) for n in listed[:count]] == topological}"
    )

    probe.say("\n-- the kernel node")
    launch = records[launch_at]
    (kernel,) = by_record[launch_at]
    raw = _cuda.kernel_params(kernel.handle)
    for name in ("func", "kern", "extra", "kernelParams", "gridDimX", "gridDimY", "gridDimZ", "blockDimX",
                 "sharedMemBytes", "ctx"):  # fmt: skip
        probe.say(f"  {name} = {_field(raw, name)}")
    layout, why = _cuda.Reader().layout(kernel.fields["func"])
    probe.say(f"  cuFuncGetParamInfo layout: {layout} {why}")
    probe.expect("parameter sizes equal the recorded sizes", [s for _, s in layout or ()],
                 [len(p) for p in launch.param_bytes])  # fmt: skip
    probe.expect("the node's parameter bytes equal the recorded bytes", kernel.fields["params"], launch.param_bytes)
    probe.expect("func is Warp's CUfunction", kernel.fields["func"],
                 _warp.kernel_function(launch.kernel_object, device, launch.block_dim))  # fmt: skip
    probe.expect("extra is 0 (Warp passes kernelParams)", int(raw.extra), 0)
    probe.expect("grid and block follow Warp's formula", (kernel.fields["grid"], kernel.fields["block"]),
                 expected_cuda_config(1000, launch.block_dim))  # fmt: skip
    asked = launch.cuda.smem_bytes if launch.cuda else None
    probe.expect("sharedMemBytes is what Warp asked", kernel.fields["smem"], asked)

    reader = _cuda.Reader()
    for label, index in (("memset of zero_()", zero_at), ("memcpy of wp.copy(a, b, dest_offset=4, count=100)", copy_at),
                         ("memcpy of the pinned host-to-device copy", pinned_at)):  # fmt: skip
        probe.say(f"\n-- the {label}")
        for node in by_record[index]:
            getter = "cuGraphMemsetNodeGetParams" if node.type == "MEMSET" else "cuGraphMemcpyNodeGetParams"
            struct = reader.call(getter, driver.CUgraphNode(node.handle))
            names = _MEMCPY_FIELDS if node.type == "MEMCPY" else ("dst", "pitch", "value", "elementSize", "width",
                                                                 "height")  # fmt: skip
            for name in names:
                probe.say(f"  {name} = {_field(struct, name)}")
            probe.say(f"  read as {node.fields}")
    memset = by_record[zero_at][0].fields
    probe.expect("zero_'s memset", (memset["dst"], memset["value"], memset["nbytes"]), (a.ptr, 0, 4000))
    probe.say(f"  element size {memset['element_size']}")
    copy = by_record[copy_at][0].fields
    probe.expect("wp.copy's memcpy addresses", (copy["dst"], copy["src"], copy["nbytes"]), (a.ptr + 16, b.ptr, 400))
    pinned = by_record[pinned_at][0].fields
    probe.expect("the pinned copy's memcpy addresses", (pinned["dst"], pinned["src"], pinned["nbytes"]),
                 (target.ptr, host.ptr, 256))  # fmt: skip
    probe.say(f"  pinned copy memory kinds: src {pinned['src_kind']}, dst {pinned['dst_kind']}")

    for label, index in (("fill_(1.0)", fill_at), ("strided copy", strided_at)):
        probe.say(f"\n-- the nodes of {label}")
        nodes = by_record[index]
        for node in nodes:
            probe.say("  " + _node_summary(node))
            if node.type == "KERNEL":
                probe.say(f"  cuFuncGetParamInfo on its function: {reader.layout(node.fields['func'])}")
        probe.expect(f"{label}'s nodes are Warp's own and read", [(n.role, n.error) for n in nodes],
                     [("warp-native", "")] * len(nodes))  # fmt: skip
        probe.expect(f"{label} made at least one node", bool(nodes), True)

    probe.say("\n-- spans against the graph")
    for i, r in enumerate(records):
        if r.capture is not None:
            made = [n.handle for n in span_nodes([n for n in match.nodes if n.graph == top], r.capture)]
            probe.say(f"  record {i} {r.kernel}: {len(made)} node(s) {[hex(h) for h in made]}")
    result = check(match)
    probe.expect("the cross-check finds nothing", [f.message for f in result.findings], [])
    probe.expect("the cross-check is complete", result.notes, [])
    wp.capture_launch(capture.graph)
    wp.synchronize_device(device)


def _conditional_capture(probe: Probe, wp: Any, driver: Any, device: str) -> None:
    import graphcheck as gc
    from graphcheck import _cuda, _warp
    from graphcheck.crosscheck import check
    from graphcheck.graph import read_match
    from tests import kernels as K

    probe.say("\n== capture_while with a body, capture_if with a Graph branch")
    if not wp.is_conditional_graph_supported():
        probe.say("  skipped: Warp says conditional graph nodes are not supported here")
        return
    counter = wp.array([3], dtype=int, device=device)
    flag = wp.array([1], dtype=int, device=device)
    x = wp.zeros(16, dtype=float, device=device)
    wp.launch(K.add_one, dim=16, inputs=[x], device=device)
    wp.launch(K.decrement_int, dim=1, inputs=[counter], device=device)
    with wp.ScopedCapture(device=device) as branch:
        wp.launch(K.add_one, dim=16, inputs=[x], device=device)

    def body() -> None:
        wp.launch(K.add_one, dim=16, inputs=[x], device=device)
        wp.launch(K.decrement_int, dim=1, inputs=[counter], device=device)

    with gc.trace_launches(include_warp=True) as trace, wp.ScopedCapture(device=device) as capture:
        wp.capture_while(counter, body)
        wp.capture_if(flag, on_true=branch.graph)
    top = _warp.graph_handle(capture.graph)
    probe.say(f"  top graph {top:#x}")
    for i, r in enumerate(trace.records):
        probe.say(f"  record {i} {r.kind} {r.kernel} nested={r.nested}: capture span {r.capture}")
    kinds = [(r.kind, r.nested) for r in trace.records]
    if not probe.expect(
        "the records", kinds, [("conditional", False), ("launch", True), ("launch", True), ("conditional", False)]
    ):
        return
    while_record, body_add, _, if_record = trace.records
    while_bodies = while_record.capture.bodies if while_record.capture else ()
    if_bodies = if_record.capture.bodies if if_record.capture else ()
    probe.expect("capture_while learnt one body", len(while_bodies), 1)
    body_graph = body_add.capture.graph if body_add.capture else None
    probe.expect("inside the while body, capture info names the body graph", (body_graph,), while_bodies[:1])
    probe.expect("capture_if with a Graph branch learnt its body", len(if_bodies), 1)
    match = read_match(capture.graph, trace)
    for node in match.nodes:
        probe.say("  " + _node_summary(node))
    reader = _cuda.Reader()
    if reader.version >= _cuda.CONDITIONAL_BODIES:
        for node in match.nodes:
            if node.type == "CONDITIONAL":
                probe.say(f"  the driver names node {node.index}'s bodies: {reader.conditional_bodies(node.handle)}")
    probe.expect("every node is accounted for", [(n.index, n.role) for n in match.nodes
                 if n.role in ("unrecorded", "foreign", "unread")], [])  # fmt: skip
    probe.expect("the Graph branch's child graph was walked", any(n.type == "GRAPH" for n in match.nodes), True)
    result = check(match)
    probe.expect("the cross-check finds nothing", [f.message for f in result.findings], [])
    probe.expect("the cross-check is complete", result.notes, [])
    wp.capture_launch(capture.graph)
    probe.expect("the replay counted down", int(counter.numpy()[0]), 0)


if __name__ == "__main__":
    sys.exit(main())
