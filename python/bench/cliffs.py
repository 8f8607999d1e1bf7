"""Every entry point of the Python module timed at N and 4N (uniform, one
thread): a batch call's time should grow as its batch, a fixed batch of
queries' as the log of the world (docs/performance.md, "Cliffs").

  PYTHONPATH=build/release/python /usr/bin/python3 python/bench/cliffs.py
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python as b  # noqa: E402  the scene and rays, drawn as the C++ scenes
import broadphase as bp  # noqa: E402


def run(n):
    """Seconds of each call on a world of n boxes."""
    lo, hi = b.uniform_scene(n)
    side = b.world_side(n)
    t = {}

    def timed(name, fn):
        start = time.perf_counter()
        result = fn()
        t[name] = time.perf_counter() - start
        return result

    w = bp.BroadPhase(threads=1)
    ids = timed("add(N)", lambda: w.add(lo, hi))
    timed("update (first)", lambda: w.update())
    shift = np.float32(0.01)
    timed("move(N)", lambda: w.move(ids, lo + shift, hi + shift))
    timed("update (frame)", lambda: w.update())
    half = np.ascontiguousarray(ids[::2])
    timed("set_filter(N/2)", lambda: w.set_filter(half, category=2, mask=0xFFFFFFFF))
    timed("set_motion_type(N/2)", lambda: w.set_motion_type(half, "kinematic"))
    timed("set_layer(N/2)", lambda: w.set_layer(half, 1))
    timed("set_user_data(N/2)", lambda: w.set_user_data(half, np.arange(len(half), dtype=np.uint64)))
    timed("update (after them)", lambda: w.update())
    timed("contains(N)", lambda: w.contains(ids))
    timed("user_data(N)", lambda: w.user_data(ids))
    q = b.uniform_draws(4, 3 * 10000).reshape(-1, 3) * side
    timed("query_boxes(1e4)", lambda: w.query_boxes(q, q + np.float32(4)))
    timed("query_points(1e4)", lambda: w.query_points(q))
    timed("nearest(1e4, 8)", lambda: w.nearest(q, 8))
    o, d, l = b.scene_rays(n, 10000)
    timed("cast_rays(1e4)", lambda: w.cast_rays(o, d, np.minimum(l, np.float32(8))))
    st = timed("save_state", lambda: w.save_state())
    timed("load_state", lambda: w.load_state(st))
    timed("shift_origin", lambda: w.shift_origin(np.array([1, 0, 0], np.float32)))
    timed("validate", lambda: w.validate())
    timed("remove(N/2)", lambda: w.remove(half))
    timed("update (after remove)", lambda: w.update())
    return t

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    small = run(n)
    large = run(4 * n)
    print(f"{'call':24s} {'N':>12s} {'4N':>12s} {'growth':>7s}")
    for k in small:
        print(f"{k:24s} {small[k]*1e3:9.2f} ms {large[k]*1e3:9.2f} ms {large[k]/small[k]:6.2f}x")
