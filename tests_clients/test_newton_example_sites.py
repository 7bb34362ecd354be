"""Newton's examples that capture, found by searching them, built as their command line builds them.

Each example that captures a graph (``ScopedCapture``, ``capture_begin``, ``capture_launch`` in its
source) is built headless on the CPU by running its own main block with ``--device cpu --viewer
null`` (``newton_sites.build_example``), and its captured call is judged against a twin built
alike and stepped eagerly: graphcheck's verdict is right when it agrees with the values (no
finding and a replay equal to eager stepping, or a finding and a replay that differs).

An example that downloads its assets, imports a package (OpenUSD among them) or loads a USD asset
where it is not installed, or raises unless it runs on a CUDA device, is not run, with that reason
read from its source. The others not judged yet are listed (``NOT_JUDGED_YET``) with the reason, so
what is left stays in view; ``test_every_capturing_example_is_judged_or_says_why_not`` holds the
three lists to what the examples capture.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import warp as wp

import graphcheck as gc

from .twins import Twins, WrongVerdict, replay_against_twin

pytest.importorskip("newton", reason="needs newton: nox -s clients installs it")
import newton.examples

from .newton_sites import build_example

EXAMPLES = Path(newton.examples.__file__).parent
CAPTURES = re.compile(r"ScopedCapture|capture_begin|capture_launch")
# The call an example's own capture block makes: `with wp.ScopedCapture() as capture:` then `self.<method>()`.
CAPTURED_CALL = re.compile(r"with wp\.ScopedCapture\([^)]*\)(?: as \w+)?:\s*\n\s*self\.(\w+)\(\)")

# The examples judged here: module (under newton.examples) -> the command-line arguments that keep it small.
JUDGED: dict[str, tuple[str, ...]] = {
    "basic.example_basic_conveyor": (),
    "basic.example_basic_dzhanibekov": (),
    "basic.example_basic_heightfield": (),
    "basic.example_basic_joints": (),
    "basic.example_basic_plotting": ("--world-count", "2"),
    "basic.example_basic_urdf": ("--world-count", "2"),
    "basic.example_recording": ("--test", "--world-count", "2"),  # only --test makes its main block call run()
    "cable.example_cable_bundle_hysteresis": (),
    "cable.example_cable_cross_slide_table": (),
    "cable.example_cable_initial_rest_pose": (),
    "cable.example_cable_pile": (),
    "cable.example_cable_plectoneme": (),
    "cable.example_cable_twist": (),
    "cable.example_cable_y_junction": (),
    "cloth.example_cloth_poker_cards": (),  # findings, and a replay that differs
    "cloth.example_cloth_rollers": (),
    "contacts.example_adaptive_collision": (),
    "contacts.example_balance_bird": (),
    "contacts.example_domino_spiral": (),
    "contacts.example_newton_cradle": (),
    "contacts.example_pyramid": (),
    "controllers.example_controller_joint_impedance_heterogeneous": (),  # captures _gpu_step on CUDA only
    "diffsim.example_diffsim_ball": (),  # forward_backward: a new wp.Tape, forward and backward, per call
    "diffsim.example_diffsim_cloth": (),
    "diffsim.example_diffsim_drone": (),
    "diffsim.example_diffsim_soft_body": (),
    "diffsim.example_diffsim_spring_cage": (),
    "kamino.example_kamino_earworm_flowers": ("--stage-count", "2"),
    "multiphysics.example_admm_contact_solver": (),
    "multiphysics.example_kamino_mujoco_admm_solver": (),  # its step reads wp.empty memory: zeroed in both twins
    "multiphysics.example_mujoco_vbd_admm_solver": (),
    "multiphysics.example_mujoco_vbd_coupled_solver": (),
    "multiphysics.example_mujoco_xpbd_coupled_solver": (),
    "multiphysics.example_proxy_joint_gripper": (),
    "multiphysics.example_rigid_soft_contact": (),
    "multiphysics.example_softbody_dropping_to_cloth": (),
    "multiphysics.example_softbody_gift": (),
    "multiphysics.example_vbd_dat_rigid_soft": (),
    "multiphysics.example_xpbd_vbd_coupled_solver": (),
    "robot.example_robot_omniwheel": (),
    "selection.example_selection_articulations": ("--world-count", "2"),
    "selection.example_selection_materials": ("--world-count", "2"),
    "selection.example_selection_multiple": ("--world-count", "2"),
    "softbody.example_softbody_hanging": (),
    "tendon.example_tendon_3d_routing": (),
    "tendon.example_tendon_capstan_friction": (),
    "tendon.example_tendon_mujoco_switch": (),
    "tendon.example_tendon_pinhole": (),
    "tendon.example_tendon_pulley": (),
    "vbd.example_cable_bend_stiffness": (),  # _simulate_substeps (simulate takes the load)
    "vbd.example_cable_bend_twist_analytic": (),
    "vbd.example_cable_dahl_hysteresis": (),
    "vbd.example_cable_michell_threshold": (),
    "vbd.example_cable_torsion_material_mapping": (),
    "vbd.example_cable_twist_transfer": (),
    "vbd.example_cable_twist_buckling": (),
    "vbd.example_cloth_stiff_material_stretch": (),
    "vbd.example_vbd_gripper_soft_grid": (),
    "vbd.example_vbd_gripper_soft_triangle": (),
}

# Examples whose solver leaves its input and output states equal after each step, swapped an
# odd number of times per call (VBD with an odd substep count): a replay equals eager stepping
# while nothing writes the states between replays, and a reset of state_0 in place splits them
# (the replay reads the other state); graphcheck reports the swap, a buffer-drift.
MIRRORED_STATES = {"cable.example_cable_initial_rest_pose"}

# The examples judged by hand, with breaks of their sites: module -> the test file.
BY_HAND = {
    "basic.example_basic_pendulum": "test_newton_pendulum.py",
    "cloth.example_cloth_hanging": "test_newton_cloth.py",
    "robot.example_robot_cartpole": "test_newton_cartpole.py",
}


def capturing_examples() -> dict[str, str]:
    """Every example module that captures a graph, with its source."""
    found = {}
    for path in sorted(EXAMPLES.rglob("example_*.py")):
        source = path.read_text(encoding="utf-8")
        if CAPTURES.search(source):
            found[".".join(path.relative_to(EXAMPLES).with_suffix("").parts)] = source
    return found


def cannot_run_here(source: str) -> str | None:
    """Why an example cannot be built on this machine, read from its source (None: it can)."""
    if "download_asset" in source:
        return "downloads its assets (newton.utils.download_asset)"
    if re.search(r"^\s*(from|import) pxr\b", source, re.MULTILINE) and importlib.util.find_spec("pxr") is None:
        return "imports OpenUSD (pxr), which is not installed"
    for name in re.findall(r"^(?:from|import) (\w+)", source, re.MULTILINE):
        if importlib.util.find_spec(name) is None:
            return f"imports {name}, which is not installed"
    if "add_usd(" in source and importlib.util.find_spec("pxr") is None:
        return "loads a USD asset (add_usd), and OpenUSD (pxr) is not installed"
    if re.search(r'raise \w+\(\s*f?"[^"]*requires a CUDA device', source):
        return "raises unless it runs on a CUDA device"
    return None


def captured_method(source: str) -> str:
    """The method of the Example that its capture block calls, read from its source (``simulate``
    where the block is written otherwise): ``forward_backward`` in the diffsim examples."""
    found = CAPTURED_CALL.search(source)
    return found.group(1) if found else "simulate"


SITES = capturing_examples()


MPM = (
    "an MPM example, not judged yet: a CPU capture that fails on a wp.copy between non-contiguous arrays (no "
    "graph to replay), 600,000 particles, a failure in Newton on the CPU, or twins that cannot be matched array "
    "by array (Warp's sparse-matrix capture state holds another number of entries in each, or the step makes "
    "arrays the twin lacks)"
)
# The examples that can run here and capture, not judged yet: module -> why.
NOT_JUDGED_YET = {
    "basic.example_basic_multi_solver_overlay": "its capture is a solver layer's, not the example's",
    "mpm.example_mpm_beam_twist": MPM,
    "mpm.example_mpm_pinch_carry": MPM,
    "mpm.example_mpm_snow_ball": MPM,
    "mpm.example_mpm_twoway_coupling": MPM,
    "multiphysics.example_mujoco_mpm_coupled_solver": MPM,
    "multiphysics.example_vbd_mpm_coupled_solver": MPM,
    "multiphysics.example_xpbd_mpm_coupled_solver": MPM,
}


def test_every_capturing_example_is_judged_or_says_why_not():
    not_judged = set(SITES) - set(JUDGED) - set(BY_HAND)
    left = {module for module in not_judged if not cannot_run_here(SITES[module])}
    assert left == set(NOT_JUDGED_YET), (
        f"judge these or list them in NOT_JUDGED_YET with why: {sorted(left - set(NOT_JUDGED_YET))}; "
        f"no longer left: {sorted(set(NOT_JUDGED_YET) - left)}"
    )


def test_judged_sites_capture():
    assert set(JUDGED) | set(BY_HAND) <= set(SITES), sorted((set(JUDGED) | set(BY_HAND)) - set(SITES))
    for module, test_file in BY_HAND.items():
        assert module in (Path(__file__).parent / test_file).read_text(encoding="utf-8"), (module, test_file)


@pytest.mark.parametrize("module", sorted(JUDGED))
def test_site(module):
    """What the example's ``capture`` captures (its ``simulate``, or the method its capture block
    calls): graphcheck's verdict agrees with the values."""
    method = captured_method(SITES[module])
    twins = Twins(lambda: build_example(f"newton.examples.{module}", JUDGED[module]))
    example = twins.subject
    checked = gc.capture(getattr(example, method), owners=(example,), on_failure="ignore")
    wrong = replay_against_twin(checked, twins, lambda e: getattr(e, method)(), replays=2)
    if module in MIRRORED_STATES:
        assert set(checked.report.kinds()) == {"buffer-drift"} and not wrong, (wrong, str(checked.report))
        for built in (example, twins.twin):  # a reset between replays: the state the next step reads, in place
            built.state_0.body_q.assign(built.state_0.body_q.numpy() + 0.01)
        wp.capture_launch(checked.graph)
        getattr(twins.twin, method)()
        assert twins.differing(), "a reset of state_0 between replays left the replay equal to eager stepping"
        return
    if bool(checked.report.findings) != bool(wrong):
        raise WrongVerdict(f"the replay differs from eager stepping in {wrong or 'nothing'}, yet:\n{checked.report}")
