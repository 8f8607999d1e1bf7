"""Pairs and begin/end events on the standard scenes (docs/scenes.md),
against the numpy brute force and the reference hashes of
tests/data/pairs_n10000.csv, for every structure and 1 and 2 threads."""
import csv
import os

import numpy as np
import pytest

import brute
from conftest import REPO, STRUCTURES

SCENES = ["uniform", "clustered", "sizes", "static", "plane"]


def add_scene(bp, scene, structure, threads):
    w = bp.BroadPhase(structure=structure, threads=threads)
    lo, hi = scene.lo, scene.hi
    is_static = scene.is_static
    if len(is_static) == 0:
        is_static = np.zeros(scene.n, bool)
    ids = w.add(lo, hi)  # indices 0..n-1 in scene order, as the reference answers number them
    if is_static.any():
        w.set_motion_type(ids[is_static], "static")
    return w, ids, is_static


def index_pairs(user_pairs):
    return brute.index_of(user_pairs.reshape(-1)).reshape(-1, 2)


def as_set(index_pairs_array):
    return {tuple(p) for p in index_pairs_array.tolist()}


@pytest.mark.parametrize("structure", STRUCTURES)
@pytest.mark.parametrize("name", SCENES)
def test_scene_frames_match_brute_force(bp, tk, name, structure):
    scene = tk.make_scene(name, 1500)
    runs = []
    for threads in (1, 2):
        scene = tk.make_scene(name, 1500)
        w, ids, is_static = add_scene(bp, scene, structure, threads)
        motion = np.where(is_static, brute.STATIC, brute.DYNAMIC)
        index = brute.index_of(ids)
        previous = set()
        frames = []
        for frame in range(4):
            if frame > 0:
                scene.step()
                moving = ~is_static
                w.move(ids[moving], scene.lo[moving], scene.hi[moving])
            pairs, begun, ended = w.update()
            assert pairs.dtype == np.uint64 and pairs.shape[1] == 2
            expected = brute.pairs(index, scene.lo, scene.hi, motion)
            got = index_pairs(pairs)
            np.testing.assert_array_equal(got, expected)  # same pairs, same order
            now = as_set(expected)
            assert as_set(index_pairs(begun)) == now - previous
            assert as_set(index_pairs(ended)) == previous - now
            for events in (begun, ended):  # sorted as the pairs are
                e = index_pairs(events)
                assert np.all(np.diff(e[:, 0] * 2**32 + e[:, 1]) > 0)
            previous = now
            frames.append((pairs, begun, ended))
        assert w.validate() == ""
        runs.append(frames)
    for one, two in zip(*runs):  # bit for bit the same for 1 and 2 threads
        for a, b in zip(one, two):
            np.testing.assert_array_equal(index_pairs(a), index_pairs(b))


def reference_hashes():
    path = os.path.join(REPO, "tests", "data", "pairs_n10000.csv")
    with open(path) as f:
        return {(r["scene"], int(r["frame"])): (int(r["pairs"]), int(r["fnv1a64"], 16))
                for r in csv.DictReader(f)}


@pytest.mark.parametrize("name", SCENES)
def test_reference_hashes_at_ten_thousand(bp, tk, name):
    # The C++ reference answers: pair count and FNV-1a of the sorted pairs,
    # frames 0 and 1, through the module with the default structure.
    reference = reference_hashes()
    scene = tk.make_scene(name, 10000)
    w, ids, is_static = add_scene(bp, scene, "automatic", 0)
    for frame in (0, 1):
        if frame:
            scene.step()
            w.move(ids[~is_static], scene.lo[~is_static], scene.hi[~is_static])
        pairs, _, _ = w.update()
        got = index_pairs(pairs)
        assert (len(got), brute.fnv1a64(got)) == reference[(name, frame)]


def test_uniform_ten_thousand_against_brute_force(bp, tk):
    scene = tk.make_scene("uniform", 10000)
    w, ids, _ = add_scene(bp, scene, "sweep", 2)
    pairs, _, _ = w.update()
    expected = brute.pairs(brute.index_of(ids), scene.lo, scene.hi)
    np.testing.assert_array_equal(index_pairs(pairs), expected)


def test_benchmark_draws_the_standard_scene(tk):
    # bench_python.py draws the `uniform` scene and its rays in numpy; they
    # are the C++ generator's boxes and rays.
    import sys
    sys.path.insert(0, os.path.join(REPO, "python", "bench"))
    import bench_python
    scene = tk.make_scene("uniform", 3000)
    lo, hi = bench_python.uniform_scene(3000)
    np.testing.assert_array_equal(lo, scene.lo)
    np.testing.assert_array_equal(hi, scene.hi)
    origins, directions, lengths = bench_python.scene_rays(3000, 500)
    o, d, length = tk.make_rays(3000, 500)
    np.testing.assert_array_equal(origins, o)
    np.testing.assert_allclose(directions, d, rtol=0, atol=1e-6)  # float32 log/cos of numpy
    np.testing.assert_array_equal(lengths, length)
