"""Rays, box and point queries and k nearest, against the numpy brute force
(and the reference rays of tests/data/rays_uniform_n10000.csv), for every
structure, with filters."""
import csv
import os

import numpy as np
import pytest

import brute
from conftest import REPO, STRUCTURES


def world(bp, tk, structure, n=3000, threads=2, ray_tree="automatic"):
    scene = tk.make_scene("uniform", n)
    w = bp.BroadPhase(structure=structure, threads=threads, ray_tree=ray_tree)
    ids = w.add(scene.lo, scene.hi)
    w.update()
    return w, ids, scene


def random_rays(rng, side, count):
    origins = (rng.random((count, 3)) * side).astype(np.float32)
    directions = rng.normal(size=(count, 3)).astype(np.float32)
    directions[0] = (1, 0, 0)  # axis-parallel rays: slabs with infinite reciprocals
    directions[1] = (0, -1, 0)
    lengths = np.full(count, side / 3, np.float32)
    return origins, directions, lengths


def test_reference_rays(bp, tk):
    scene = tk.make_scene("uniform", 10000)
    w = bp.BroadPhase()
    w.add(scene.lo, scene.hi)
    w.update()
    origins, directions, lengths = tk.make_rays(10000, 1000)
    hit, user, t = w.cast_rays(origins, directions, lengths)
    with open(os.path.join(REPO, "tests", "data", "rays_uniform_n10000.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1000
    for r, row in enumerate(rows):
        box = int(row["box"])
        assert hit[r] == (box >= 0)
        if box >= 0:
            assert brute.index_of(user[r]) == box
            assert t[r] == pytest.approx(float(row["t"]), rel=1e-5, abs=1e-5)
        else:
            assert user[r] == brute.NONE and np.isinf(t[r])


@pytest.mark.parametrize("ray_tree", ["always", "never"])
@pytest.mark.parametrize("structure", STRUCTURES)
def test_rays_match_brute_force(bp, tk, structure, ray_tree):
    w, ids, scene = world(bp, tk, structure, ray_tree=ray_tree)
    w.prepare_rays()
    index = brute.index_of(ids)
    rng = np.random.default_rng(5)
    side = float(scene.hi.max())
    origins, directions, lengths = random_rays(rng, side, 400)
    o, inv = brute.make_rays(origins, directions)
    entry = brute.ray_entry(o, inv, lengths, scene.lo, scene.hi)
    hit_b, row_b, t_b = brute.closest_hits(index, entry)

    hit, user, t = w.cast_rays(origins, directions, lengths, query="closest")
    assert hit.dtype == bool and user.dtype == np.uint64 and t.dtype == np.float32
    np.testing.assert_array_equal(hit, hit_b)
    np.testing.assert_array_equal(user[hit], ids[row_b[hit]])
    np.testing.assert_array_equal(t[hit], t_b[hit])  # bit for bit
    assert np.all(user[~hit] == brute.NONE) and np.all(np.isinf(t[~hit]))

    # any: a hit exactly where closest hits, and a box the ray does hit.
    hit_any, user_any, t_any = w.cast_rays(origins, directions, lengths, query="any")
    np.testing.assert_array_equal(hit_any, hit_b)
    rows = np.searchsorted(index, brute.index_of(user_any[hit_any]))
    np.testing.assert_array_equal(entry[np.nonzero(hit_any)[0], rows], t_any[hit_any])

    # all: every hit, nearest first, ties to the lower index.
    offsets, user_all, t_all = w.cast_rays_all(origins, directions, lengths)
    assert offsets.shape == (401,) and offsets[0] == 0 and offsets[-1] == len(user_all)
    for r in range(len(origins)):
        rows = np.nonzero(np.isfinite(entry[r]))[0]
        order = np.lexsort((index[rows], entry[r, rows]))
        np.testing.assert_array_equal(user_all[offsets[r]:offsets[r + 1]], ids[rows[order]])
        np.testing.assert_array_equal(t_all[offsets[r]:offsets[r + 1]], entry[r, rows[order]])

    # one length for every ray
    hit_s, user_s, t_s = w.cast_rays(origins, directions, float(lengths[0]))
    np.testing.assert_array_equal(user_s, user)


def test_ray_tree_is_checked_and_pickled(bp):
    with pytest.raises(bp.Error) as e:
        bp.BroadPhase(ray_tree="sometimes")
    assert e.value.code == "invalidArgument" and "ray_tree" in str(e.value)
    import pickle
    w = bp.BroadPhase(ray_tree="never")
    w.add(np.zeros((1, 3), np.float32), np.ones((1, 3), np.float32))
    w.update()
    again = pickle.loads(pickle.dumps(w))
    assert again.__getstate__()[5] == "never"


@pytest.mark.parametrize("structure", STRUCTURES)
def test_box_and_point_queries(bp, tk, structure):
    w, ids, scene = world(bp, tk, structure)
    index = brute.index_of(ids)
    rng = np.random.default_rng(7)
    side = float(scene.hi.max())
    centres = (rng.random((200, 3)) * side).astype(np.float32)
    half = (rng.random((200, 3)) * 3).astype(np.float32)
    lo, hi = centres - half, centres + half
    offsets, user = w.query_boxes(lo, hi)
    for q in range(len(lo)):
        expected = ids[brute.overlapping(index, scene.lo, scene.hi, lo[q], hi[q])]
        np.testing.assert_array_equal(user[offsets[q]:offsets[q + 1]], expected)
        if q < 20:
            np.testing.assert_array_equal(w.query_box(lo[q], hi[q]), expected)
    offsets, user = w.query_points(centres)
    for q in range(len(centres)):
        expected = ids[brute.overlapping(index, scene.lo, scene.hi, centres[q], centres[q])]
        np.testing.assert_array_equal(user[offsets[q]:offsets[q + 1]], expected)
        if q < 20:
            np.testing.assert_array_equal(w.query_point(centres[q]), expected)


@pytest.mark.parametrize("structure", STRUCTURES)
def test_nearest(bp, tk, structure):
    w, ids, scene = world(bp, tk, structure)
    index = brute.index_of(ids)
    rng = np.random.default_rng(9)
    points = (rng.random((150, 3)) * float(scene.hi.max())).astype(np.float32)
    points[0] = scene.lo[5]  # on a corner: distance 0, ties
    for k in (1, 8):
        user, d2 = w.nearest(points, k)
        assert user.shape == (150, k) and user.dtype == np.uint64 and d2.dtype == np.float32
        rows, d2_b = brute.nearest(index, scene.lo, scene.hi, points, k)
        np.testing.assert_array_equal(d2, d2_b)
        np.testing.assert_array_equal(user, ids[rows])


def test_nearest_pads_when_fewer_than_k(bp):
    w = bp.BroadPhase()
    lo = np.array([[0, 0, 0], [5, 0, 0]], np.float32)
    ids = w.add(lo, lo + 1)
    w.update()
    user, d2 = w.nearest(np.array([[4.5, 0.5, 0.5]], np.float32), 4)
    np.testing.assert_array_equal(user[0, :2], ids[::-1])
    np.testing.assert_array_equal(d2[0, :2], [0.25, 12.25])
    assert np.all(user[0, 2:] == bp.NONE) and np.all(np.isinf(d2[0, 2:]))


def test_query_filters(bp, tk):
    w, ids, scene = world(bp, tk, "automatic", n=1000)
    index = brute.index_of(ids)
    category = np.where(np.arange(1000) % 3 == 0, 2, 1).astype(np.uint64)
    w.set_filter(ids, category, brute.ALL)
    w.update()
    lo, hi = np.zeros(3, np.float32), np.full(3, float(scene.hi.max()), np.float32)
    every = w.query_box(lo, hi)
    only2 = w.query_box(lo, hi, category=1, mask=2)
    np.testing.assert_array_equal(only2, ids[category == 2])
    assert len(every) == 1000
    user, d2 = w.nearest(np.array([[1, 1, 1]], np.float32), 3, mask=2)
    rows, _ = brute.nearest(index[category == 2], scene.lo[category == 2],
                            scene.hi[category == 2], np.array([[1, 1, 1]], np.float32), 3)
    np.testing.assert_array_equal(user[0], ids[category == 2][rows[0]])
