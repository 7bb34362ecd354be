"""Every report a findings page shows is what graphcheck prints today.

A page shows reports two ways. Its example's output is included from
``docs/findings/examples/output/`` (written by ``docs/examples/regenerate.py``): each CPU
example is run here and what it prints must be what is stored. Lines quoted in the page's
prose (and its ``text`` blocks) are checked against the report of a producer that does what
the quote describes: the quote must be on the page and in that report. Normalised on both
sides: runs of white space, addresses, ``file.py:line``, a kernel's code hash, the device
(the pages show ``cuda:0``, the tests run on the CPU), the Warp release a report names and
this module's name (the pages' kernels are declared in ``sim.py``); ``...`` and
``<kernel>`` in a quote stand for any text.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import warp as wp

import graphcheck as gc
from tests import kernels as K, producers as P, value_producers as VP
from tests.releases import CAPTURE_ERROR_ON_READBACK

DEVICE = "cpu"
N = 64
ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "findings"
EXAMPLES = PAGES / "examples"
#: The examples that run on the CPU (the others need CUDA: docs/examples/regenerate.py --gpu).
CPU_EXAMPLES = [
    "scalar_drift", "buffer_drift", "per_call_allocation", "launch_sequence_drift", "dim_drift", "copy_drift",
    "foreign_buffer", "stale_pointer", pytest.param("capture_error", marks=CAPTURE_ERROR_ON_READBACK),
    "replay_divergence", "shared_buffer",
]  # fmt: skip


def normalised(text: str) -> str:
    text = text.replace(f"{__name__}.", "sim.")  # the pages' kernels are declared in sim.py
    text = re.sub(r"0x[0-9a-f]+", "0x#", text)
    text = re.sub(r"[\w.<>-]+\.py:\d+", "FILE:N", text)
    text = re.sub(r"\(code [0-9a-f]+\)", "(code #)", text)
    text = re.sub(r"\bcuda:\d+|\bcpu\b", "DEVICE", text)
    text = re.sub(r"warp-lang \d+\.\d+\.\d+", "warp-lang X", text)  # the release the tests run on
    return " ".join(text.split())


def quoted(quote: str) -> re.Pattern[str]:
    """A pattern for a page's quote: ``...`` and ``<kernel>`` are any text."""
    parts = re.split(r"\.\.\.|<kernel>", normalised(quote))
    return re.compile(".*?".join(re.escape(part) for part in parts))


# -- the examples' stored output ------------------------------------------------------------


@pytest.mark.parametrize("name", CPU_EXAMPLES)
def test_an_example_prints_what_its_page_includes(name):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GRAPHCHECK_DISABLE", None)
    done = subprocess.run(
        [sys.executable, f"{name}.py"], cwd=EXAMPLES, env=env, capture_output=True, text=True, timeout=300, check=True
    )
    stored = (EXAMPLES / "output" / f"{name}.txt").read_text()
    assert normalised(done.stdout) == normalised(stored), (
        f"docs/findings/examples/output/{name}.txt is not what {name}.py prints: run docs/examples/regenerate.py\n"
        f"{done.stdout}"
    )
    parts = stored.strip().split("\n\n")
    for number, part in enumerate(parts, 1):
        assert (EXAMPLES / "output" / f"{name}-{number}.txt").read_text() == part.strip() + "\n"


# -- producers that do what a quote describes -----------------------------------------------


def said(report: gc.Report) -> str:
    """A report as printed, and each finding's one-line message (what a quote may show instead)."""
    return "\n".join([str(report), *(f.message for f in report.findings)])


def captured(producer, **options) -> str:
    return said(gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore", **options).report)


class Ring:
    """A window that advances through a ring of two windows each call."""

    def __init__(self):
        self.ring = wp.zeros(2 * N, dtype=float, device=DEVICE)
        self.at = 0

    def step(self):
        window = self.ring[self.at : self.at + N]
        self.at = (self.at + N) % (2 * N)
        wp.launch(K.add_one, dim=N, inputs=[window], device=DEVICE)


class CountingFill:
    """A fill whose value counts the calls."""

    def __init__(self):
        self.x = wp.zeros(N, dtype=float, device=DEVICE)
        self.calls = 0

    def step(self):
        self.calls += 1
        self.x.fill_(float(self.calls))
        wp.launch(K.add_one, dim=N, inputs=[self.x], device=DEVICE)


class StagingWrittenInTheCall:
    """Host staging the call writes (0.25 more each call), then uploads."""

    def __init__(self):
        self.v = wp.zeros(N, dtype=float, device=DEVICE)
        self.staging = wp.zeros(N, dtype=float, device="cpu")
        self.host = self.staging.numpy()  # a view of the staging array's memory
        self.calls = 0

    def step(self):
        self.calls += 1
        self.host[:] = 0.25 * self.calls
        wp.copy(self.v, self.staging)
        wp.launch(K.add_one, dim=N, inputs=[self.v], device=DEVICE)


_PAST_THE_END: dict[int, wp.array] = {}


class PastTheEnd:
    """An array made over the owner's buffer, twice as long, that the owner does not hold."""

    def __init__(self):
        self.x = wp.zeros(N, dtype=float, device=DEVICE)
        _PAST_THE_END[id(self)] = wp.array(ptr=self.x.ptr, shape=(2 * N,), dtype=float, device=DEVICE)

    def step(self):
        wp.launch(K.add_one, dim=N, inputs=[_PAST_THE_END[id(self)]], device=DEVICE)


class ExtraEveryOtherCall:
    """Three more operations on every other call, from the first."""

    def __init__(self):
        self.x = wp.zeros(N, dtype=float, device=DEVICE)
        self.calls = 0

    def step(self):
        self.calls += 1
        wp.launch(K.add_one, dim=N, inputs=[self.x], device=DEVICE)
        if self.calls % 2:
            for _ in range(3):
                wp.launch(K.damp, dim=N, inputs=[self.x, 0.5], device=DEVICE)


class OtherKernelEveryOtherCall(ExtraEveryOtherCall):
    def step(self):
        self.calls += 1
        kernel = K.add_one if self.calls % 2 else K.square
        inputs = [self.x] if kernel is K.add_one else [self.x, self.x]
        wp.launch(kernel, dim=N, inputs=inputs, device=DEVICE)


def _declared(offset):
    @wp.kernel
    def add_offset(x: wp.array(dtype=float)):
        i = wp.tid()
        x[i] = x[i] + float(offset)

    return add_offset


class DeclaredWithAChangingClosure(ExtraEveryOtherCall):
    def step(self):
        self.calls += 1
        wp.launch(_declared(self.calls % 2), dim=N, inputs=[self.x], device=DEVICE)


def pooled_scratch_strict() -> str:
    from tests.test_warp_helpers import PooledEnergy

    return captured(PooledEnergy(), strict_ownership=True)


def struct_field_set_after_capture() -> str:
    producer = P.StructFieldSetAfterCapture(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    producer.after_capture()
    return said(checked.check_replay(on_failure="ignore"))


def no_owners() -> str:
    x = wp.zeros(N, dtype=float, device=DEVICE)
    with gc.GraphGuard(DEVICE) as guard:
        wp.launch(K.add_one, dim=N, inputs=[x], device=DEVICE)
    return said(guard.checked.check_replay(on_failure="ignore"))


class TwoBuffers:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float, device=DEVICE)
        self.v = wp.zeros(N, dtype=float, device=DEVICE)
        self.w = wp.zeros(N, dtype=float, device=DEVICE)

    def step(self):
        wp.launch(K.axpy, dim=N, inputs=[self.v, self.x, 1.0], device=DEVICE)


def stale_after(change) -> str:
    producer = TwoBuffers()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    change(producer)
    return said(checked.check_replay(on_failure="ignore"))


def swapped_after_capture(producer) -> None:
    producer.v, producer.w = producer.w, producer.v


def resized_in_place(producer) -> None:
    producer.x = producer.x[: N // 2]
    producer.spare = None


class FixedSim(TwoBuffers):
    """The stream-drift page's fixed step (one stream), here on the CPU."""

    def step(self):
        wp.launch(K.axpy, dim=N, inputs=[self.v, self.x, 1.0], device=DEVICE)


class Sim:
    """Its buffer in a class attribute: one buffer for every Sim."""

    total: wp.array | None = None

    def __init__(self, device=DEVICE):
        self.x = wp.ones(N, dtype=float, device=device)

    def step(self):
        wp.launch(K.axpy, dim=N, inputs=[self.x, self.total, 1.0], device=DEVICE)


def class_attribute_shared() -> str:
    if Sim.total is None:
        Sim.total = wp.zeros(N, dtype=float, device=DEVICE)
    return said(gc.check_producer(Sim, device=DEVICE, on_failure="ignore"))


def an_array_only_eager_stepping_makes() -> str:
    return said(gc.verify_replay(VP.GrowsOnThirdCall, device=DEVICE, on_failure="ignore"))


def example(name: str) -> str:
    return (EXAMPLES / "output" / f"{name}.txt").read_text()


#: (page, quote, what prints it): every report text a page quotes in its prose.
QUOTES = [
    ("buffer-drift.md", "owner.ring+0 in the reference call, owner.ring+256 captured", lambda: captured(Ring())),
    ("copy-drift.md", "array.fill_ argument 'value' (...): 3.0 in the reference call, 4.0 captured (Δ +1)",
     lambda: captured(CountingFill())),
    ("copy-drift.md",
     "wp.copy from host memory argument 'src' (operation #0, sim.py:18): owner.staging held other contents "
     "when the captured call copied it than in the reference call (element [0]: 0.75 in the reference call, "
     "1.0 captured): the call writes the host memory it uploads, and every replay uploads what the capture "
     "call left there; fix: write the host staging buffer outside the captured call, before each replay ...",
     lambda: captured(StagingWrittenInTheCall())),
    ("foreign-buffer.md", "starts in owner.x but runs past its end", lambda: captured(PastTheEnd())),
    ("launch-sequence-drift.md", "3 operations issued only by the reference call, starting with ...",
     lambda: captured(ExtraEveryOtherCall())),
    ("launch-sequence-drift.md", "<kernel> where the reference call issued <kernel>",
     lambda: captured(OtherKernelEveryOtherCall())),
    ("launch-sequence-drift.md",
     "sim._declared__locals__add_offset (code 99055ed7) where the reference call issued "
     "sim._declared__locals__add_offset (code ea8edb8d) (operation #0, sim.py:14): the same kernel compiled to other "
     "code: ...; a kernel declared inside the call whose code changed between calls (a closure constant it "
     "captures changed): every replay runs the captured code",
     lambda: captured(DeclaredWithAChangingClosure())),
    ("per-call-allocation.md", "note: 1 graph-owned allocation made during the call (256 bytes)",
     lambda: example("per_call_allocation")),
    ("per-call-allocation.md",
     "... Warp made for its own scratch during the call ...: Warp's, as its pools are (strict_ownership=True leaves "
     "them to Warp)", pooled_scratch_strict),
    ("replay-divergence.md", "float32[4] on cpu stepping eagerly, no array replayed",
     an_array_only_eager_stepping_makes),
    ("scalar-drift.md", "0.01 baked at capture, 0.02 in owner.params now", struct_field_set_after_capture),
    ("shared-buffer.md", "held by class attribute Sim.total", class_attribute_shared),
    ("stale-pointer.md", "no owners to check the graph's addresses against", no_owners),
    ("stale-pointer.md", "was owner.v at capture and is owner.w now", lambda: stale_after(swapped_after_capture)),
    ("stale-pointer.md", "no longer fits in owner.x", lambda: stale_after(resized_in_place)),
    ("stream-drift.md", "FixedSim.step is replay-safe on cuda:0", lambda: captured(FixedSim())),
]  # fmt: skip


@pytest.mark.parametrize(
    ("page", "quote", "prints"), QUOTES, ids=[f"{page}-{n}" for n, (page, _, _) in enumerate(QUOTES)]
)
def test_a_quote_on_a_findings_page_is_what_graphcheck_prints(page, quote, prints):
    text = (PAGES / page).read_text()
    assert normalised(quote) in normalised(text.replace("`", "")), f"{page} no longer quotes {quote!r}"
    real = prints()
    assert quoted(quote).search(normalised(real)), f"{page} quotes {quote!r}; graphcheck prints:\n{real}"


def test_every_text_block_on_a_findings_page_is_checked():
    quotes = {normalised(quote) for _, quote, _ in QUOTES}
    for page in sorted(PAGES.glob("*.md")):
        for block in re.findall(r"^```text\n(.*?)^```", page.read_text(), flags=re.S | re.M):
            assert normalised(block) in quotes, f"{page.name}: a text block no test checks:\n{block}"
