#!/usr/bin/env python3
"""bench_python.py: the broadphase module against the tools Python users
reach for, in one run, with a table as bpbench prints it.

  rays      cast_rays (closest)   vs Open3D RaycastingScene (Embree), boxes as 12 triangles
  nearest   nearest(points, k)    vs scipy.spatial.cKDTree.query (box centres as points)
  boxes     query_boxes           vs rtree.index.Index.intersection, one box a call
  pairs     move + update         vs a vectorised numpy brute force

The boxes are the `uniform` scene of docs/scenes.md (frame 0), drawn here in
numpy float32 with the scene's splitmix64 and formulas; the rays are the
scene's rays (seed 2). Each row is the median of --repeat timed runs after
one warm-up; each task lists the peer first (1x) and then one row per
structure of ours (--structures), whose `ratio` is the peer's median over
ours (above 1: ours is faster). A peer that is not installed is listed as
skipped. `check`
compares the answers.

  PYTHONPATH=build/release/python /usr/bin/python3 python/bench/bench_python.py
"""
import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

import broadphase as bp

GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix(seed, count, start=0):
    """Draws start+1 .. start+count of splitmix64 seeded with `seed`, at once."""
    with np.errstate(over="ignore"):
        k = np.arange(start + 1, start + count + 1, dtype=np.uint64)
        z = np.uint64(seed) + k * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def uniform_draws(seed, count):
    return ((splitmix(seed, count) >> np.uint64(40)).astype(np.float32) *
            np.float32(2.0**-24))


def world_side(n):
    return np.float32(4.0) * np.cbrt(np.float32(n))


def uniform_scene(n, seed=1):
    """(lo, hi) of scene `uniform`: per box c = 3 u() * L, e = 1 + 2 u() (3 each)."""
    u = uniform_draws(seed, 6 * n).reshape(n, 6)
    side = world_side(n)
    c = u[:, :3] * side
    e = np.float32(1) + np.float32(2) * u[:, 3:]
    half = np.float32(0.5) * e
    return c - half, c + half


def scene_rays(n, count, seed=2):
    """The scene's rays: origin 3 u() * L, direction three Box-Muller normals, length L/4."""
    u = uniform_draws(seed, 9 * count).reshape(count, 9)
    side = world_side(n)
    origins = u[:, :3] * side
    u1 = np.maximum(u[:, 3::2], np.float32(2.0**-24))
    u2 = u[:, 4::2]
    g = np.sqrt(np.float32(-2) * np.log(u1)) * np.cos(np.float32(6.28318530718) * u2)
    norm = np.sqrt(g[:, 0] * g[:, 0] + g[:, 1] * g[:, 1] + g[:, 2] * g[:, 2])
    directions = g / norm[:, None]
    return origins, directions.astype(np.float32), np.full(count, side / 4, np.float32)


def median_ms(fn, repeat):
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def box_mesh(lo, hi):
    """Vertices (8N, 3) and triangles (12N, 3) of N boxes."""
    n = len(lo)
    corners = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], bool)
    v = np.where(corners[None, :, :], hi[:, None, :], lo[:, None, :]).reshape(-1, 3)
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                      [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]],
                     np.uint32)
    t = (faces[None, :, :] + (8 * np.arange(n, dtype=np.uint32))[:, None, None]).reshape(-1, 3)
    return v.astype(np.float32), t


class Table:
    def __init__(self):
        self.rows = []

    def add(self, task, backend, n, items, ms, ratio, check):
        rate = items / (ms / 1e3) if ms else float("nan")
        self.rows.append([task, backend, str(n), str(items), f"{ms:.3g}", f"{rate:.3g}",
                          ratio, check])

    def skip(self, task, backend, why):
        self.rows.append([task, backend, "-", "-", "-", "-", "-", f"skipped: {why}"])

    def print(self):
        head = ["task", "backend", "n", "items", "median ms", "items/s", "ratio", "check"]
        rows = [head] + self.rows
        width = [max(len(r[c]) for r in rows) for c in range(len(head))]
        for k, r in enumerate(rows):
            print("| " + " | ".join(x.ljust(width[c]) for c, x in enumerate(r)) + " |")
            if k == 0:
                print("|" + "|".join("-" * (w + 2) for w in width) + "|")


def ratio(peer_ms, ours_ms):
    """How many times faster than the peer of the same task (its row is 1x)."""
    return f"{peer_ms / ours_ms:.3g}x"


def open3d_hits_a_box(o3d):
    vertices, triangles = box_mesh(np.zeros((1, 3), np.float32), np.ones((1, 3), np.float32))
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.core.Tensor(vertices), o3d.core.Tensor(triangles))
    ray = o3d.core.Tensor(np.array([[0.5, 0.5, 3, 0, 0, -1]], np.float32))
    return bool(np.isclose(scene.cast_rays(ray)["t_hit"].numpy()[0], 2.0))


def bench_rays(t, args):
    lo, hi = uniform_scene(args.n)
    origins, directions, lengths = scene_rays(args.n, args.rays)
    peer = None
    try:
        import open3d as o3d
        if not open3d_hits_a_box(o3d):
            # Debian 12's python3-open3d 0.16 with its Embree 3.13: a ray
            # straight at a unit box misses, so there is no figure to compare.
            t.skip("rays", "open3d", f"open3d {o3d.__version__}: RaycastingScene misses a "
                   "ray cast straight at a box here")
            o3d = None
    except ImportError:
        t.skip("rays", "open3d", "open3d not installed")
        o3d = None
    if o3d is not None:
        vertices, triangles = box_mesh(lo, hi)
        scene = o3d.t.geometry.RaycastingScene()
        scene.add_triangles(o3d.core.Tensor(vertices), o3d.core.Tensor(triangles))
        rays = o3d.core.Tensor(np.hstack([origins, directions]).astype(np.float32))
        peer = median_ms(lambda: scene.cast_rays(rays), args.repeat)
        answer = scene.cast_rays(rays)
        peer_t = answer["t_hit"].numpy()
        peer_box = answer["primitive_ids"].numpy().astype(np.int64) // 12
        t.add("rays", "open3d", args.n, args.rays, peer, "1x", "")
    for structure in args.structures:
        w = bp.BroadPhase(structure=structure, threads=args.threads)
        w.add(lo, hi)
        w.update()
        ours = median_ms(lambda: w.cast_rays(origins, directions, lengths), args.repeat)
        hit, user, dist = w.cast_rays(origins, directions, lengths)
        check = f"{hit.mean():.1%} hit"
        if peer is not None:
            # A ray that starts inside a box hits it at 0 here and at its far
            # side in a mesh: compared only where the origin is outside.
            outside = ~(hit & (dist == 0))
            peer_hit = peer_t <= lengths
            same = (peer_hit == hit) & (~hit | (peer_box == (user & 0xFFFFFFFF).astype(np.int64)))
            check += f", {same[outside].mean():.2%} same box"
        t.add("rays", f"broadphase {structure}", args.n, args.rays, ours,
              ratio(peer, ours) if peer else "-", check)


def bench_nearest(t, args):
    lo, hi = uniform_scene(args.n)
    centres = np.float32(0.5) * (lo + hi)
    side = world_side(args.n)
    points = uniform_draws(3, 3 * args.queries).reshape(-1, 3) * side
    # Both sides make their tree before the timed queries, and the time
    # each takes is a row of its own: cKDTree's construction, and ours:
    # add, update and prepare_rays (the tree the nearest search walks,
    # otherwise made once the searches since the last change would have
    # paid for it: docs/rays.md).
    try:
        from scipy.spatial import cKDTree
        start = time.perf_counter()
        tree = cKDTree(centres)
        setup = (time.perf_counter() - start) * 1e3
        t.add("nearest setup", "cKDTree", args.n, args.n, setup, "1x", "cKDTree(points)")
    except ImportError:
        tree = setup = None
        t.skip("nearest setup", "cKDTree", "scipy not installed")
    worlds = {}
    for structure in args.structures:
        start = time.perf_counter()
        w = bp.BroadPhase(structure=structure, threads=args.threads)
        w.add(centres, centres)  # points as boxes: the question cKDTree answers
        w.update()
        w.prepare_rays()
        made = (time.perf_counter() - start) * 1e3
        t.add("nearest setup", f"broadphase {structure}", args.n, args.n, made,
              ratio(setup, made) if setup else "-", "add, update, prepare_rays")
        worlds[structure] = w
    for k in args.k:
        task = f"nearest k={k}"
        peer = dist = None
        if tree is not None:
            peer = median_ms(lambda: tree.query(points, k, workers=args.workers), args.repeat)
            dist, _ = tree.query(points, k, workers=args.workers)
            t.add(task, "cKDTree", args.n, args.queries, peer, "1x", "")
        else:
            t.skip(task, "cKDTree", "scipy not installed")
        for structure, w in worlds.items():
            ours = median_ms(lambda: w.nearest(points, k), args.repeat)
            user, d2 = w.nearest(points, k)
            check = ""
            if dist is not None:
                close = np.allclose(np.sqrt(d2), dist.reshape(d2.shape), rtol=1e-5, atol=1e-4)
                check = "same distances" if close else "DISTANCES DIFFER"
            t.add(task, f"broadphase {structure}", args.n, args.queries, ours,
                  ratio(peer, ours) if peer else "-", check)


def bench_boxes(t, args):
    lo, hi = uniform_scene(args.n)
    side = world_side(args.n)
    qlo = uniform_draws(4, 3 * args.queries).reshape(-1, 3) * side
    qhi = qlo + np.float32(4)
    peer = counts = None
    try:
        from rtree import index
        p = index.Property()
        p.dimension = 3
        stream = ((i, (*lo[i], *hi[i]), None) for i in range(args.n))
        tree = index.Index(stream, properties=p)
        boxes = [(*qlo[q], *qhi[q]) for q in range(args.queries)]
        peer = median_ms(lambda: [list(tree.intersection(b)) for b in boxes], args.repeat)
        counts = np.array([len(list(tree.intersection(b))) for b in boxes])
        t.add("boxes", "rtree", args.n, args.queries, peer, "1x", "one box a call")
    except ImportError:
        t.skip("boxes", "rtree", "rtree not installed")
    for structure in args.structures:
        w = bp.BroadPhase(structure=structure, threads=args.threads)
        w.add(lo, hi)
        w.update()
        ours = median_ms(lambda: w.query_boxes(qlo, qhi), args.repeat)
        offsets, _ = w.query_boxes(qlo, qhi)
        check = f"{offsets[-1] / args.queries:.3g} found/query"
        if counts is not None:
            check += ", same counts" if np.array_equal(counts, np.diff(offsets)) else \
                ", COUNTS DIFFER"
        t.add("boxes", f"broadphase {structure}", args.n, args.queries, ours,
              ratio(peer, ours) if peer else "-", check)


def brute_pairs(lo, hi, chunk=1024):
    count = 0
    for begin in range(0, len(lo), chunk):
        end = min(len(lo), begin + chunk)
        overlap = np.all((lo[begin:end, None, :] <= hi[None, :, :]) &
                         (lo[None, :, :] <= hi[begin:end, None, :]), axis=2)
        i, j = np.nonzero(overlap)
        count += int(np.count_nonzero(i + begin < j))
    return count


def bench_pairs(t, args):
    n = args.pairs_n
    lo, hi = uniform_scene(n)
    rng = np.random.default_rng(1)
    shift = (rng.random((n, 3), np.float32) - np.float32(0.5)) * np.float32(0.2)
    peer = median_ms(lambda: brute_pairs(lo + shift, hi + shift), args.repeat)
    count = brute_pairs(lo + shift, hi + shift)
    t.add("pairs", "numpy brute force", n, n, peer, "1x", f"{count} pairs")
    for structure in args.structures:
        w = bp.BroadPhase(structure=structure, threads=args.threads)
        ids = w.add(lo, hi)
        w.update()
        frame = [0]

        def ours_frame():  # a frame: every box moves, then update()
            frame[0] += 1
            s = shift if frame[0] % 2 else np.float32(0)
            w.move(ids, lo + s, hi + s)
            return w.update()

        ours = median_ms(ours_frame, args.repeat)
        w.move(ids, lo + shift, hi + shift)
        pairs, _, _ = w.update()
        t.add("pairs", f"broadphase {structure}", n, n, ours, ratio(peer, ours),
              "same count" if count == len(pairs) else "COUNTS DIFFER")


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{platform.node()}: {model}, {os.cpu_count()} CPUs, {platform.platform()}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100000, help="boxes (rays, nearest, boxes)")
    parser.add_argument("--rays", type=int, default=1000000)
    parser.add_argument("--queries", type=int, default=10000, help="nearest points and boxes")
    parser.add_argument("--k", default="1,8", help="nearest: k of each row group")
    parser.add_argument("--pairs-n", type=int, default=10000, help="boxes of the pairs row")
    parser.add_argument("--threads", type=int, default=0, help="0: every core")
    parser.add_argument("--workers", type=int, default=-1,
                        help="cKDTree.query's workers (-1: every core)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default="rays,nearest,boxes,pairs")
    parser.add_argument("--structures", default="automatic,bvh",
                        help="ours, one row each (automatic: the sweep and the rays' tree)")
    args = parser.parse_args()
    args.pairs_n = min(args.pairs_n, args.n)
    args.structures = args.structures.split(",")
    args.k = [int(k) for k in args.k.split(",")]

    print("machine:", machine())
    print("python:", sys.version.split()[0], sys.executable, "| numpy", np.__version__)
    print("command:", " ".join([os.path.basename(sys.executable)] + sys.argv))
    t = Table()
    benches = {"rays": bench_rays, "nearest": bench_nearest, "boxes": bench_boxes,
               "pairs": bench_pairs}
    for name in args.only.split(","):
        benches[name](t, args)
    t.print()


if __name__ == "__main__":
    main()
