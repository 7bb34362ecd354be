"""The examples in examples/ run end to end on the CPU.

Each safe capture site passes graphcheck and its replay reproduces eager execution; each unsafe variant is
caught with the expected finding kind, and (where replaying it is harmless) its replay really does drift,
so the finding is not a false alarm.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import graphcheck as gc
from examples import cloth, particles, rl_env

DEVICE = "cpu"
ROOT = Path(__file__).resolve().parents[1]


def test_particles_capture_is_replay_safe_and_faithful():
    result = particles.main(["--device", DEVICE, "--steps", "8", "--count", "512"])
    assert result.report.ok, str(result.report)
    assert result.report.operations == 5  # 4 substeps and the device clock
    assert result.replay_report.ok, str(result.replay_report)
    assert result.max_error == 0.0  # same kernels in the same order: bit-identical on the CPU
    assert np.all(result.positions[:, 1] >= 0.0)  # the ground holds
    assert result.bug is None


def test_particles_host_time_is_scalar_drift():
    bug = particles.unsafe_variant(DEVICE, count=256, frames=8)
    assert set(bug.report.kinds()) == {"scalar-drift"}, str(bug.report)
    (finding,) = bug.report.findings
    assert finding.arg == "t"
    assert finding.kernel.endswith("integrate_at")
    assert finding.site is not None and finding.site.filename.endswith("particles.py")
    assert bug.divergence > 1e-3  # the frozen time really changes the replayed motion


@pytest.mark.parametrize("substeps", [4, 3], ids=["even-substeps", "odd-substeps-swapped-back"])
def test_cloth_capture_is_replay_safe_and_faithful(substeps):
    argv = ["--device", DEVICE, "--steps", "6", "--size", "12", "--substeps", str(substeps), "--iterations", "4"]
    result = cloth.main(argv)
    assert result.report.ok, str(result.report)
    assert result.replay_report.ok, str(result.replay_report)
    assert result.max_error == 0.0
    assert np.all(np.isfinite(result.positions))


def test_cloth_rejects_an_odd_iteration_count():
    with pytest.raises(ValueError, match="even"):
        cloth.Cloth(8, device=DEVICE, iterations=3)


def test_cloth_odd_substeps_without_swap_back_is_buffer_drift():
    bug = cloth.unsafe_variant(DEVICE, size=10, frames=6)
    assert set(bug.report.kinds()) == {"buffer-drift"}, str(bug.report)
    assert {f.kernel.rsplit(".", 1)[-1] for f in bug.report.findings} == {"predict", "update_state"}
    assert bug.divergence > 1e-3  # each replay reads stale state


def test_rl_env_capture_is_replay_safe_and_faithful():
    result = rl_env.main(["--device", DEVICE, "--steps", "40", "--num-envs", "256"])
    assert result.report.ok, str(result.report)
    assert result.report.operations == 5
    assert result.replay_report.ok, str(result.replay_report)
    finished, reached = result.replayed.stats
    # 40 steps with a 25-step limit: episodes ended and restarted on the device, by success and by time-out.
    assert 0 < reached < finished
    assert result.replayed.dones.any()


def test_rl_env_numpy_actions_in_step_is_per_call_allocation():
    report = rl_env.unsafe_variant(DEVICE, num_envs=64)
    assert set(report.kinds()) == {"per-call-allocation"}, str(report)
    (finding,) = report.findings
    assert finding.arg == "actions"
    assert finding.site is not None and finding.site.filename.endswith("rl_env.py")


def test_show_bug_flag_runs_the_unsafe_variant():
    result = particles.main(["--device", DEVICE, "--steps", "3", "--count", "64", "--show-bug"])
    assert result.report.ok
    assert result.bug is not None and set(result.bug.report.kinds()) == {"scalar-drift"}


@pytest.mark.parametrize(
    ("script", "args", "verdict"),
    [
        ("particles.py", ["--steps", "3", "--count", "64"], "graphcheck: 1 finding in HostTimeParticles.step"),
        ("cloth.py", ["--steps", "3", "--size", "8"], "graphcheck: 2 findings in NaiveOddSubstepCloth.step"),
    ],
)
def test_the_quickstart_command_prints_the_unsafe_variant_s_report_once(script, args, verdict):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GRAPHCHECK_DISABLE", None)
    result = subprocess.run([sys.executable, str(ROOT / "examples" / script), "--device", DEVICE, *args, "--show-bug"],
                            capture_output=True, text=True, env=env, timeout=600, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert (result.stdout + result.stderr).count(verdict) == 1, result.stdout + result.stderr


def test_rl_env_under_an_autoguard_with_reference_calls_counts_its_own_guard_once():
    # What `graphcheck run --reference-call` and the marker's reference_call=True do: the
    # program's own GraphGuard is guarded already, so its capture is not guarded again (no
    # second reference call inside it, no false launch-sequence-drift), and its report counts.
    with gc.AutoGuard(reference_call=True) as auto:
        result = rl_env.main(["--device", DEVICE, "--steps", "20", "--num-envs", "64"])
    assert result.report.ok and result.replay_report.ok, str(result.report)
    assert auto.reports == [result.report] and auto.ok, auto.summary()
    assert auto.verdict().splitlines()[0] == "graphcheck: 1 capture guarded, no findings"
    # The verdict is a claim: rl_env.main itself compares the replayed rollout with an eager one.
    assert result.replayed.dones.any()


def test_a_finding_of_the_programs_own_guard_is_counted_in_the_closing_lines():
    with gc.AutoGuard(reference_call=True) as auto:
        report = rl_env.unsafe_variant(DEVICE, num_envs=64)
    assert set(report.kinds()) == {"per-call-allocation"}
    assert auto.reports == [report] and auto.status == "failed"
    assert auto.verdict().splitlines()[0] == "graphcheck: 1 capture guarded, 1 finding"
