"""The Warp releases graphcheck supports: the table of the internals each one has, checked
at the first trace. ``nox -s warp`` runs this file (and the whole suite) on each release."""

import subprocess
import sys
import warnings
from importlib.metadata import version as installed_version
from typing import Any

import pytest
import warp as wp

import graphcheck as gc
from tests import kernels as K
from tests.internals import _warp
from tests.releases import WARP_RELEASE

INSTALLED = _warp.release(wp.__version__)
NEWER = "warp-lang {} is newer than the releases graphcheck was tested with (1.15 to 1.19)"


def test_the_tested_releases_are_1_15_to_1_19():
    assert gc.TESTED_WARP_VERSIONS == ("1.15.0", "1.16.0", "1.17.0", "1.18.0", "1.19.0")
    assert min(_warp.WARP_INTERNALS.values()) == _warp.release(gc.TESTED_WARP_VERSIONS[0])


def test_each_release_calls_for_the_internals_it_introduced():
    def calls_for(version):
        return set(_warp.required_internals(version))

    assert {"context.invoke", "context.launch", "types.array._init_new"} <= calls_for("1.15.0")
    assert calls_for("1.15.0") == calls_for("1.16.0") == calls_for("1.17.0")
    cpu_blocks = {"context.invoke_cpu_blocks", "context._resolve_launch_block_dim"}
    assert calls_for("1.18.0") - calls_for("1.17.0") == cpu_blocks
    assert calls_for("1.19.0") - calls_for("1.18.0") == {"context.Kernel._add_normalized_overload"}
    assert calls_for("1.19.2") == calls_for("1.20.0.dev20260301") == calls_for("1.19.0")


def test_the_installed_warp_has_exactly_what_the_table_says():
    """Every internal dated at or before the installed release is there; of those dated after
    it, a claim to be a newer release finds exactly those missing (so the table's dates are
    right for this release)."""
    assert _warp.missing_internals() == []
    for version in gc.TESTED_WARP_VERSIONS:
        later = [path for path in _warp.required_internals(version) if _warp.WARP_INTERNALS[path] > INSTALLED]
        assert _warp.missing_internals(version) == later, version


@pytest.mark.parametrize("version", ["1.20.0", "1.20.0.dev20260301", "2.0.0"])
def test_a_newer_release_is_named_in_the_warning(version):
    assert _warp.newer_release_warning(version) == NEWER.format(version)


@pytest.mark.parametrize("version", ["1.15.0", "1.17.0", "1.19.0", "1.19.2", "1.19.0rc1"])
def test_a_tested_release_or_its_patch_does_not_warn(version):
    assert _warp.newer_release_warning(version) is None


def record_one_launch():
    a, b = wp.zeros(16, dtype=float, device="cpu"), wp.ones(16, dtype=float, device="cpu")
    with gc.trace_launches() as trace:
        wp.launch(K.scale, dim=16, inputs=[a, b, 2.5, 3], device="cpu")
    return trace


@wp.kernel
def accumulate(src: wp.array(dtype=Any), dst: wp.array(dtype=Any)):
    i = wp.tid()
    dst[i] = dst[i] + src[i]


def test_a_generic_kernel_is_recorded_as_the_overload_warp_launched(cpu):
    """Each release makes the overload its own way (1.19: ``_add_normalized_overload``)."""
    src, dst = wp.ones(4, dtype=wp.vec3, device=cpu), wp.zeros(4, dtype=wp.vec3, device=cpu)
    with gc.trace_launches() as trace:
        wp.launch(accumulate, dim=4, inputs=[src, dst], device=cpu)
    (record,) = trace
    assert not record.kernel_object.is_generic
    assert record.args["src"].dtype == "vec3f"
    assert (record.args["dst"].ptr, record.args["dst"].nbytes) == (dst.ptr, 4 * 12)


def test_a_newer_release_warns_once_and_still_records(monkeypatch):
    # The installed Warp is real; only graphcheck's reading of its version number changes.
    lacks = _warp.missing_internals(gc.TESTED_WARP_VERSIONS[-1])
    if lacks:
        pytest.skip(f"warp-lang {wp.__version__} lacks {lacks}, which a release newer than 1.19 would have")
    monkeypatch.setattr(_warp.version, "_checked", False)
    monkeypatch.setattr(_warp.version, "WARP_VERSION", "1.20.0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traces = [record_one_launch() for _ in range(2)]
    assert [str(w.message) for w in caught if w.category is gc.GraphCheckWarning] == [NEWER.format("1.20.0")]
    assert [len(trace) for trace in traces] == [1, 1]
    assert traces[0][0].args["s"] == 2.5


def test_a_missing_internal_fails_clearly_at_the_first_trace(monkeypatch):
    monkeypatch.setattr(_warp.version, "_checked", False)
    monkeypatch.setitem(_warp.WARP_INTERNALS, "context.invoke_on_the_moon", (1, 15))
    expected = (
        rf"graphcheck cannot record on warp-lang {wp.__version__}: warp\._src\.context\.invoke_on_the_moon is "
        r"missing\. graphcheck was tested with warp-lang 1\.15 to 1\.19 \(1\.15\.0, .*, 1\.19\.0\); "
        r"install one of those \(pip install 'warp-lang==1\.19\.0'\)"
    )
    with pytest.raises(gc.UnsupportedWarpError, match=expected):
        record_one_launch()
    assert not _warp.hooks_installed()
    with pytest.raises(gc.UnsupportedWarpError):  # checked again, not remembered as passed
        record_one_launch()


def test_a_release_older_than_the_oldest_tested_fails_clearly(monkeypatch):
    monkeypatch.setattr(_warp.version, "_checked", False)
    monkeypatch.setattr(_warp.version, "WARP_VERSION", "1.14.0")
    with pytest.raises(gc.UnsupportedWarpError, match=r"warp-lang 1\.14\.0: it is older than the releases"):
        record_one_launch()
    assert not _warp.hooks_installed()


def test_version_names_graphcheck_warp_and_cuda_python():
    result = subprocess.run(
        [sys.executable, "-m", "graphcheck", "--version"], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == (
        f"graphcheck {gc.__version__} (warp-lang {installed_version('warp-lang')}, "
        f"cuda-python {installed_version('cuda-python')})"
    )


@pytest.mark.parametrize("helper", ["array_sum", "array_inner"])
def test_the_cross_check_finds_which_reductions_a_cpu_graph_replays(helper, cpu):
    """Warp 1.15's CPU graphs leave reductions out (they run once, at capture); 1.16 on
    replay them. The graph cross-check finds which from the graph itself, on every release."""
    x = wp.full(8, 1.0, dtype=float, device=cpu)
    out = wp.zeros(1, dtype=float, device=cpu)
    reduce = getattr(wp.utils, helper)
    args = (x,) if helper == "array_sum" else (x, x)
    checked = gc.capture(lambda: reduce(*args, out=out), device=cpu, owners=(x, out), on_failure="ignore")
    x.fill_(2.0)
    out.zero_()
    wp.capture_launch(checked.graph)
    replayed = out.numpy()[0] != 0.0
    dropped = [f for f in checked.report.findings if f.kind == "capture-error"]
    assert replayed == (not dropped), str(checked.report)
    assert replayed == (WARP_RELEASE >= (1, 16))
    assert "graph" in checked.report.checks
    if dropped:
        assert dropped[0].kernel == f"{helper}_float_host"
        assert "the graph holds no reduction for it" in dropped[0].message


@wp.kernel
def finds_a_face(mesh: wp.uint64, p: wp.vec3, found: wp.array(dtype=int)):
    found[0] = wp.where(wp.mesh_query_point(mesh, p, 0.5).result, 1, 0)


def test_the_cross_check_finds_that_a_cpu_graph_replays_no_mesh_refit(cpu):
    """No supported release records Mesh.refit() in a CPU graph: the replay leaves the BVH
    where the capture put it, and the cross-check finds no operation for it."""
    points = wp.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], dtype=wp.vec3, device=cpu)
    mesh = wp.Mesh(points=points, indices=wp.array([0, 1, 2], dtype=int, device=cpu))
    found = wp.zeros(1, dtype=int, device=cpu)
    checked = gc.capture(mesh.refit, device=cpu, owners=(points, found), on_failure="ignore")
    (finding,) = checked.report.findings
    assert (finding.kind, finding.kernel) == ("capture-error", "mesh_refit_host")
    assert "Warp's CPU graphs have no operation for it" in finding.message
    points.assign([[10, 10, 10], [11, 10, 10], [10, 11, 10]])
    wp.capture_launch(checked.graph)
    wp.launch(finds_a_face, dim=1, inputs=[mesh.id, wp.vec3(10.2, 10.2, 10.0), found], device=cpu)
    assert not found.numpy()[0]
    mesh.refit()  # eager: the BVH follows the points
    wp.launch(finds_a_face, dim=1, inputs=[mesh.id, wp.vec3(10.2, 10.2, 10.0), found], device=cpu)
    assert found.numpy()[0] == 1
