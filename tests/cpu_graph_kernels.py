"""Kernels of the CPU graph tests and of the CPU graph audit (tests_warp/cpu_graph_audit.py):
each changes what the next step reads, so a replay that leaves an operation out computes
something else."""

import warp as wp


@wp.kernel
def advance(a: wp.array(dtype=float), by: float):
    i = wp.tid()
    a[i] = a[i] + by * float(i % 5 + 1)


@wp.kernel
def scramble(keys: wp.array(dtype=int), step: wp.array(dtype=int)):
    i = wp.tid()
    keys[i] = (keys[i] * 7 + step[0] + i) % 23


@wp.kernel
def bump(step: wp.array(dtype=int)):
    step[0] = step[0] + 1


@wp.kernel
def square_sum(x: wp.array(dtype=float), y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]
    wp.atomic_add(loss, 0, y[i])


@wp.kernel
def move(points: wp.array(dtype=wp.vec3), by: wp.vec3):
    i = wp.tid()
    points[i] = points[i] + by


@wp.kernel
def count_near(grid: wp.uint64, points: wp.array(dtype=wp.vec3), out: wp.array(dtype=int)):
    i = wp.tid()
    p = points[i]
    query = wp.hash_grid_query(grid, p, 0.6)
    index = wp.int32(0)  # dynamic variables: the loop changes them
    near = wp.int32(0)
    while wp.hash_grid_query_next(query, index):
        if wp.length(points[index] - p) < 0.6:
            near += 1
    out[i] = near


@wp.kernel
def count_boxes(bvh: wp.uint64, out: wp.array(dtype=int)):
    query = wp.bvh_query_aabb(bvh, wp.vec3(0.5, -10.0, -10.0), wp.vec3(3.0, 10.0, 10.0))
    index = wp.int32(0)  # dynamic variables: the loop changes them
    found = wp.int32(0)
    while wp.bvh_query_next(query, index):
        found += 1
    out[0] = found


@wp.kernel
def count_down(remaining: wp.array(dtype=int), a: wp.array(dtype=float)):
    a[0] = a[0] + 1.0
    remaining[0] = remaining[0] - 1
