"""A batch of point-mass "reach the goal" environments stepped by one captured graph, with on-device auto-reset.

What it demonstrates:

* An RL-style ``step()`` that is replay-safe: the policy writes its actions into a preallocated device array
  *outside* the captured step (``env.actions.assign(...)``); the step integrates, computes rewards and dones,
  and resets finished environments on the device. Everything that changes between calls lives in device
  arrays: each environment's episode step counter, and the RNG seed, stored in a one-element array that a
  kernel advances after every reset (``wp.rand_init(seed[0], env)``), so replays draw new start states.
* ``with gc.GraphGuard(reference=env.step, owners=(env,)) as guard: env.step()``: the drop-in replacement for
  ``wp.ScopedCapture``; the replayed rollout equals an eager rollout step for step (observations, rewards,
  dones).
* ``--show-bug`` (or :func:`unsafe_variant`): the usual mistake, a ``step(actions)`` that turns the policy's
  numpy actions into a Warp array inside the step. The graph bakes in the address of that temporary array, so
  every replay reads the first call's actions from freed memory; graphcheck reports ``per-call-allocation``.

Run it (from the repository root)::

    PYTHONPATH=. python examples/rl_env.py --steps 200 --show-bug
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

import graphcheck as gc

OBS_DIM = 6  # position, velocity, goal - position


@wp.struct
class EnvParams:
    """Constants of every environment, fixed for the batch's life."""

    dt: float
    damping: float
    max_force: float
    arena: float
    goal_radius: float
    max_episode_steps: int


@wp.kernel
def integrate(
    actions: wp.array(dtype=wp.vec2), params: EnvParams, pos: wp.array(dtype=wp.vec2), vel: wp.array(dtype=wp.vec2)
):
    """Apply each environment's force (clipped to ``max_force``) and move its point mass, bouncing off walls."""
    i = wp.tid()
    force = actions[i]
    norm = wp.length(force)
    if norm > params.max_force:
        force = force * (params.max_force / norm)
    v = (vel[i] + force * params.dt) * params.damping
    p = pos[i] + v * params.dt
    px = wp.clamp(p[0], -params.arena, params.arena)
    py = wp.clamp(p[1], -params.arena, params.arena)
    if px != p[0]:
        v = wp.vec2(-0.5 * v[0], v[1])
    if py != p[1]:
        v = wp.vec2(v[0], -0.5 * v[1])
    pos[i] = wp.vec2(px, py)
    vel[i] = v


# Warp kernels take positional parameters: PLR0917 does not apply to them.
@wp.kernel
def evaluate(
    pos: wp.array(dtype=wp.vec2),
    goal: wp.array(dtype=wp.vec2),
    actions: wp.array(dtype=wp.vec2),
    params: EnvParams,
    episode_step: wp.array(dtype=wp.int32),
    rewards: wp.array(dtype=float),
    dones: wp.array(dtype=wp.int32),
    stats: wp.array(dtype=wp.int32),
):
    """Reward (distance and effort), success and time-limit termination, and episode statistics."""
    i = wp.tid()
    distance = wp.length(goal[i] - pos[i])
    reward = -distance - 0.01 * wp.length_sq(actions[i])
    reached = distance < params.goal_radius
    if reached:
        reward = reward + 10.0
    steps = episode_step[i] + 1
    episode_step[i] = steps
    finished = reached or steps >= params.max_episode_steps
    if finished:
        # Integer atomics: the totals do not depend on thread order.
        wp.atomic_add(stats, 0, 1)
        if reached:
            wp.atomic_add(stats, 1, 1)
    rewards[i] = reward
    dones[i] = wp.where(finished, 1, 0)


@wp.kernel
def reset_done(
    seed: wp.array(dtype=wp.int32),
    dones: wp.array(dtype=wp.int32),
    params: EnvParams,
    pos: wp.array(dtype=wp.vec2),
    vel: wp.array(dtype=wp.vec2),
    goal: wp.array(dtype=wp.vec2),
    episode_step: wp.array(dtype=wp.int32),
):
    """Draw a new start and goal for every finished environment, from the device-side seed."""
    i = wp.tid()
    if dones[i] == 0:
        return
    # One stream per (seed, environment): a new seed every step, so replays draw new episodes.
    rng = wp.rand_init(seed[0], i)
    a = params.arena * 0.9
    pos[i] = wp.vec2(wp.randf(rng, -a, a), wp.randf(rng, -a, a))
    goal[i] = wp.vec2(wp.randf(rng, -a, a), wp.randf(rng, -a, a))
    vel[i] = wp.vec2(0.0, 0.0)
    episode_step[i] = 0


@wp.kernel
def advance_seed(seed: wp.array(dtype=wp.int32)):
    """Move the device-side seed on, after the resets that used it."""
    seed[0] = seed[0] + 1


@wp.kernel
def observe(
    pos: wp.array(dtype=wp.vec2),
    vel: wp.array(dtype=wp.vec2),
    goal: wp.array(dtype=wp.vec2),
    obs: wp.array2d(dtype=float),
):
    """Observation of each environment: position, velocity and the offset to its goal."""
    i = wp.tid()
    p = pos[i]
    v = vel[i]
    g = goal[i] - p
    obs[i, 0] = p[0]
    obs[i, 1] = p[1]
    obs[i, 2] = v[0]
    obs[i, 3] = v[1]
    obs[i, 4] = g[0]
    obs[i, 5] = g[1]


class ReachEnv:
    """``num_envs`` point masses, each pushed towards its own goal; finished episodes restart on the device.

    Args:
        num_envs: environments stepped together.
        device: the Warp device (None: Warp's default device).
        seed: the first value of the device-side RNG seed.
        max_episode_steps: the time limit of an episode.
    """

    def __init__(self, num_envs: int = 4096, device: str | None = None, seed: int = 42, max_episode_steps: int = 25):
        self.device = str(wp.get_device(device))
        self.num_envs = num_envs
        self.seed = seed
        self.params = EnvParams()
        self.params.dt = 0.05
        self.params.damping = 0.98
        self.params.max_force = 4.0
        self.params.arena = 2.0
        self.params.goal_radius = 0.1
        self.params.max_episode_steps = max_episode_steps

        # Every buffer is allocated once, here. The policy writes `actions` in place between steps.
        def zeros(dtype: Any, shape: Any = num_envs) -> wp.array:
            return wp.zeros(shape, dtype=dtype, device=self.device)

        self.actions = zeros(wp.vec2)
        self.pos = zeros(wp.vec2)
        self.vel = zeros(wp.vec2)
        self.goal = zeros(wp.vec2)
        self.episode_step = zeros(wp.int32)
        self.rewards = zeros(float)
        self.dones = zeros(wp.int32)
        self.obs = zeros(float, (num_envs, OBS_DIM))
        self.rng_seed = zeros(wp.int32, 1)
        self.stats = zeros(wp.int32, 2)  # episodes finished, episodes that reached their goal
        self.reset()

    def _reset_and_observe(self) -> None:
        """Reset the finished environments, move the seed on, and observe every environment."""
        n, device = self.num_envs, self.device
        wp.launch(
            reset_done,
            dim=n,
            inputs=[self.rng_seed, self.dones, self.params],
            outputs=[self.pos, self.vel, self.goal, self.episode_step],
            device=device,
        )
        # Stream order puts this after reset_done: every environment drew from the same seed.
        wp.launch(advance_seed, dim=1, inputs=[self.rng_seed], device=device)
        wp.launch(observe, dim=n, inputs=[self.pos, self.vel, self.goal], outputs=[self.obs], device=device)

    def reset(self) -> None:
        """Start a new episode in every environment (in place: a captured graph stays valid)."""
        self.rng_seed.fill_(self.seed)
        self.dones.fill_(1)  # every environment counts as finished, so reset_done draws all of them
        self._reset_and_observe()
        self.dones.zero_()
        self.rewards.zero_()
        self.stats.zero_()
        self.actions.zero_()

    def step(self) -> None:
        """Advance every environment by one step with the actions in ``self.actions``.

        Afterwards ``rewards`` and ``dones`` describe the step, and ``obs`` the next state: a finished
        environment has already been reset, so its observation is the first of its next episode.
        """
        n, device = self.num_envs, self.device
        wp.launch(integrate, dim=n, inputs=[self.actions, self.params], outputs=[self.pos, self.vel], device=device)
        wp.launch(
            evaluate,
            dim=n,
            inputs=[self.pos, self.goal, self.actions, self.params],
            outputs=[self.episode_step, self.rewards, self.dones, self.stats],
            device=device,
        )
        self._reset_and_observe()


class HostActionsEnv(ReachEnv):
    """The unsafe variant: ``step(actions)`` converts the policy's numpy actions inside the step."""

    def step(self, actions: np.ndarray | None = None) -> None:
        """Advance every environment with ``actions`` (numpy, ``(num_envs, 2)``)."""
        if actions is None:
            actions = np.zeros((self.num_envs, 2), dtype=np.float32)
        # A new device array on every call: the graph bakes in this call's address, freed when it returns.
        forces = wp.array(actions, dtype=wp.vec2, device=self.device)
        n, device = self.num_envs, self.device
        wp.launch(integrate, dim=n, inputs=[forces, self.params], outputs=[self.pos, self.vel], device=device)
        wp.launch(
            evaluate,
            dim=n,
            inputs=[self.pos, self.goal, forces, self.params],
            outputs=[self.episode_step, self.rewards, self.dones, self.stats],
            device=device,
        )
        self._reset_and_observe()


def policy(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A noisy PD controller towards the goal: stands in for a network's forward pass."""
    action = 3.0 * obs[:, 4:6] - 1.0 * obs[:, 2:4] + rng.normal(0.0, 0.3, (obs.shape[0], 2))
    return action.astype(np.float32)


@dataclass
class Rollout:
    """What one rollout produced, step by step."""

    rewards: np.ndarray
    dones: np.ndarray
    obs: np.ndarray
    stats: np.ndarray


def rollout(env: ReachEnv, steps: int, advance: Any, seed: int = 0) -> Rollout:
    """Run the policy for ``steps`` steps, stepping with ``advance()`` (the graph's launch, or ``env.step``)."""
    rng = np.random.default_rng(seed)
    rewards, dones = [], []
    for _ in range(steps):
        # Outside the graph: read the observation back, run the policy, write the actions in place.
        env.actions.assign(policy(env.obs.numpy(), rng))
        advance()
        rewards.append(env.rewards.numpy())
        dones.append(env.dones.numpy())
    return Rollout(np.stack(rewards), np.stack(dones), env.obs.numpy(), env.stats.numpy())


@dataclass
class Result:
    """What :func:`main` did: the verdicts and the two rollouts."""

    report: gc.Report
    replay_report: gc.Report
    replayed: Rollout
    eager: Rollout
    bug: gc.Report | None = None


def unsafe_variant(device: str | None = None, num_envs: int = 256) -> gc.Report:
    """Validate the numpy-actions variant with a GraphGuard, catch the error, and print its report.

    Returns:
        The report (``per-call-allocation``).
    """
    env = HostActionsEnv(num_envs, device=device)
    actions = policy(env.obs.numpy(), np.random.default_rng(0))
    print("\n--- unsafe variant: step(actions) makes a Warp array from numpy inside the step ---")
    try:
        guard = gc.GraphGuard(
            device=env.device, reference=lambda: env.step(actions), owners=(env,), name="HostActionsEnv.step"
        )
        with guard:
            env.step(actions)
    except gc.GraphCheckError as error:
        print(error.report)
        return error.report
    raise AssertionError("graphcheck accepted a step that allocates its actions in every call")


def main(argv: Sequence[str] | None = None) -> Result:
    """Validate and capture the environment step, replay a rollout with it, and compare with an eager rollout.

    Args:
        argv: command-line arguments (None: ``sys.argv``).

    Returns:
        The :class:`Result`.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="Warp device (default: Warp's default device)")
    parser.add_argument("--steps", type=int, default=200, help="environment steps to replay")
    parser.add_argument("--num-envs", type=int, default=4096, help="environments stepped together")
    parser.add_argument("--show-bug", action="store_true", help="also validate the unsafe numpy-actions variant")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    env = ReachEnv(args.num_envs, device=args.device)
    # The reference call steps the environments once eagerly; then the block is captured (not executed).
    with gc.GraphGuard(device=env.device, reference=env.step, owners=(env,)) as guard:
        env.step()
    print(guard.report)

    env.reset()
    replayed = rollout(env, args.steps, guard.launch)
    replay_report = guard.check_replay()
    eager_env = ReachEnv(args.num_envs, device=args.device)
    eager = rollout(eager_env, args.steps, eager_env.step)

    # Same kernels, same actions, same device-side seeds: the rollouts must agree step for step.
    np.testing.assert_array_equal(replayed.dones, eager.dones)
    np.testing.assert_array_equal(replayed.stats, eager.stats)
    np.testing.assert_allclose(replayed.rewards, eager.rewards, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(replayed.obs, eager.obs, rtol=1e-5, atol=1e-5)
    finished, reached = (int(n) for n in replayed.stats)
    print(
        f"{args.steps} replayed steps of {args.num_envs} environments match the eager rollout: "
        f"{finished} episodes finished, {reached} reached their goal, mean reward {replayed.rewards.mean():.3f}; "
        f"{time.perf_counter() - start:.2f} s"
    )
    bug = unsafe_variant(args.device, min(args.num_envs, 256)) if args.show_bug else None
    return Result(guard.report, replay_report, replayed, eager, bug)


if __name__ == "__main__":
    main()
