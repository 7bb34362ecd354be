"""The public corpus on CUDA: every unsafe pattern caught, safe producers pass and replay,
with the graph cross-check on."""

import pytest
import warp as wp

import graphcheck as gc
from tests import kernels as K, producers as P
from tests.replay_mutations import fails_when_replays_do_nothing


class StreamToggle(P.Producer):
    """Work issued on one of two streams by a host flag."""

    expected = "stream-drift"

    def __init__(self, device):
        super().__init__(device)
        self.streams = [wp.get_device(device).stream, wp.Stream(device)]
        self.calls = 0

    def step(self):
        self.calls += 1
        with wp.ScopedStream(self.streams[self.calls % 2]):
            self.launch(K.add_one, [self.x])


# A copy from pageable host memory may break a CUDA capture instead of being baked.
_CUDA_ALSO = {P.AssignFreshNumpy: {"capture-error"}, P.ArrayFromNumpyPerCall: {"capture-error"},
              P.NumpyArgument: {"capture-error"}, P.OwnedNumpyWrittenInCall: {"capture-error"},
              # A structure made in the capture: without the memory pool Warp cannot allocate it.
              P.HashGridMadeInCall: {"capture-error"}, P.HashGridDropped: {"capture-error"},
              P.TextureRemadePerCall: {"capture-error"}, P.BvhMadeInCall: {"capture-error"}}  # fmt: skip
#: Unsafe on the CPU only (what Warp's CPU graphs leave out): safe on CUDA.
_CPU_ONLY = [p for p in P.UNSAFE if p.cpu_only]
#: Safe on the CPU, unsafe on CUDA (a structure made inside a CUDA capture).
_CUDA_ONLY = [p for p in P.SAFE if p.expected_cuda]


@pytest.mark.parametrize("producer", [*(p for p in P.UNSAFE if not p.cpu_only), *_CUDA_ONLY, StreamToggle],
                         ids=lambda p: p.__name__)  # fmt: skip
def test_unsafe_producer_is_caught_on_cuda(producer, device):
    p = producer(device)
    checked = gc.capture(p.step, device=device, owners=(p,), on_failure="ignore")
    kinds = set(checked.report.kinds())
    allowed = {producer.expected_on(device)} | _CUDA_ALSO.get(producer, set())
    assert kinds and kinds <= allowed, str(checked.report)


@pytest.mark.parametrize("producer", _CPU_ONLY, ids=lambda p: p.__name__)
def test_what_a_cpu_graph_drops_is_fine_on_cuda(producer, device):
    p = producer(device)
    checked = gc.capture(p.step, device=device, owners=(p,))
    assert checked.ok, str(checked.report)
    assert gc.verify_replay(producer, steps=3, device=device).ok


@pytest.mark.parametrize("producer", [p for p in P.SAFE if not p.expected_cuda] + P.STALE, ids=lambda p: p.__name__)
def test_safe_producer_passes_the_graph_cross_check_and_replays(producer, device):
    p = producer(device)
    checked = gc.capture(p.step, device=device, owners=(p,))
    assert checked.ok, str(checked.report)
    assert "graph" in checked.report.checks, checked.report.notes
    assert not [n for n in checked.report.notes if "cross-check" in n], checked.report.notes  # nor partial
    unaccounted = [
        (n.index, n.type, n.name, n.role)
        for n in checked.graph_match.nodes
        if n.role in ("unrecorded", "foreign", "unread") or (n.record is None and n.role == "structure")
    ]
    assert not unaccounted, unaccounted  # every node of a safe producer is attributed
    checked.launch()
    checked.launch()
    wp.synchronize_device(device)


@pytest.mark.parametrize("producer", [p for p in P.SAFE if not p.expected_cuda], ids=lambda p: p.__name__)
def test_safe_producer_replays_like_an_eager_twin_on_cuda(producer, device):
    report = gc.verify_replay(producer, steps=4, device=device, on_failure="ignore")
    assert report.ok and "values" in report.checks, str(report)


@pytest.mark.parametrize("producer", [p for p in P.SAFE if not p.expected_cuda], ids=lambda p: p.__name__)
def test_a_replay_that_does_nothing_fails_the_value_check_on_cuda(producer, device):
    fails_when_replays_do_nothing(test_safe_producer_replays_like_an_eager_twin_on_cuda, producer, device)


@pytest.mark.parametrize("producer", P.STALE, ids=lambda p: p.__name__)
def test_stale_pointers_are_read_from_the_graph(producer, device):
    p = producer(device)
    checked = gc.capture(p.step, device=device, owners=(p,))
    p.after_capture()
    assert set(checked.check_replay(on_failure="ignore").kinds()) == {"stale-pointer"}
