#!/usr/bin/env python3
"""A spinning lidar in a world of moving boxes, through the broadphase
module: each frame the boxes move (numpy), one move() and one update()
hand them to the broadphase, and one cast_rays() casts the whole sweep.
Prints frames per second and where the time goes.

  PYTHONPATH=build/release/python /usr/bin/python3 examples/lidar.py
  ... --boxes 100000 --rays 100000 --frames 30 --threads 0
"""
import argparse
import time

import numpy as np

import broadphase as bp


def main():
    parser = argparse.ArgumentParser(description="A spinning lidar through moving boxes.")
    parser.add_argument("--boxes", type=int, default=100000)
    parser.add_argument("--rays", type=int, default=100000, help="rays a frame")
    parser.add_argument("--channels", type=int, default=64, help="elevation channels")
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--threads", type=int, default=0, help="0: every core")
    parser.add_argument("--structure", default="automatic")
    args = parser.parse_args()

    rng = np.random.default_rng(1)
    side = np.float32(4 * np.cbrt(args.boxes))  # the density of the standard scenes
    centre = (rng.random((args.boxes, 3), np.float32) * side)
    half = np.float32(0.5) + rng.random((args.boxes, 3), np.float32)
    velocity = (rng.random((args.boxes, 3), np.float32) - np.float32(0.5)) * np.float32(0.4)

    world = bp.BroadPhase(structure=args.structure, threads=args.threads)
    ids = world.add(centre - half, centre + half)
    world.update()

    # The sweep: `channels` elevations from -15 to +15 degrees, the rest in
    # azimuth; the head turns by one azimuth step's fraction each frame.
    channels = min(args.channels, args.rays)
    columns = args.rays // channels
    elevation = np.radians(np.linspace(-15, 15, channels, dtype=np.float32))
    azimuth = np.linspace(0, 2 * np.pi, columns, endpoint=False, dtype=np.float32)
    sensor = np.full(3, side / 2, np.float32)
    max_range = float(side / 2)

    t_motion = t_update = t_scan = t_rays = 0.0
    hits = 0
    start = time.perf_counter()
    for frame in range(args.frames):
        t0 = time.perf_counter()
        centre += velocity
        out = (centre < 0) | (centre >= side)  # reflect off the walls
        velocity[out] = -velocity[out]
        np.clip(centre, 0, np.nextafter(side, 0), out=centre)
        t1 = time.perf_counter()
        world.move(ids, centre - half, centre + half)
        world.update()
        t2 = time.perf_counter()
        spin = azimuth + np.float32(frame * 0.1)
        el, az = np.meshgrid(elevation, spin, indexing="ij")
        directions = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)],
                              axis=-1).reshape(-1, 3)
        origins = np.ascontiguousarray(np.broadcast_to(sensor, directions.shape))
        t3 = time.perf_counter()
        # One origin for the whole scan: the batch walks the tree 32 rays at
        # a time as one frustum (docs/rays.md).
        hit, user, distance = world.cast_rays(origins, directions, max_range)
        hits += int(hit.sum())
        t4 = time.perf_counter()
        t_motion += t1 - t0
        t_update += t2 - t1
        t_scan += t3 - t2
        t_rays += t4 - t3
    elapsed = time.perf_counter() - start

    rays = columns * channels
    per = lambda t: 1e3 * t / args.frames
    print(f"{args.boxes} moving boxes, {rays} rays a frame, {args.frames} frames, "
          f"{world.threads} threads, structure {world.structure}")
    print(f"per frame: numpy motion {per(t_motion):.2f} ms, move+update {per(t_update):.2f} ms, "
          f"numpy scan directions {per(t_scan):.2f} ms, "
          f"cast_rays {per(t_rays):.2f} ms ({rays * args.frames / t_rays / 1e6:.2f} M rays/s)")
    print(f"hit fraction {hits / (rays * args.frames):.3f}")
    print(f"frames per second: {args.frames / elapsed:.1f}")


if __name__ == "__main__":
    main()
