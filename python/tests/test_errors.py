"""Rejected calls: a broadphase.Error (a ValueError and a RuntimeError)
with the C++ error code, and the broadphase exactly as it was (the same
proxies, a valid structure, and the next update reporting the same pairs
and no event)."""
import numpy as np
import pytest

import brute


@pytest.fixture
def world(bp):
    rng = np.random.default_rng(1)
    lo = (rng.random((100, 3)) * 8).astype(np.float32)
    hi = lo + 1.5
    w = bp.BroadPhase(threads=2)
    ids = w.add(lo, hi)
    pairs, _, _ = w.update()
    return w, ids, lo, hi, pairs


def rejected(bp, world, code, call, *args, **kwargs):
    w, ids, lo, hi, pairs = world
    with pytest.raises(bp.Error) as info:
        call(*args, **kwargs)
    e = info.value
    assert isinstance(e, ValueError) and isinstance(e, RuntimeError)
    assert e.code == code, str(e)
    assert str(e) and e.message == str(e)
    # nothing changed
    assert w.proxy_count() == len(ids)
    assert np.all(w.contains(ids))
    assert w.validate() == ""
    now, begun, ended = w.update()
    np.testing.assert_array_equal(now, pairs)
    assert len(begun) == 0 and len(ended) == 0
    return str(e)


def test_bad_coordinate_arrays(bp, world):
    w, ids, lo, hi, _ = world
    bad = lo[:3].copy()
    bad[1, 2] = np.nan
    message = rejected(bp, world, "invalidBox", w.add, bad, hi[:3])
    assert "entry 1" in message
    rejected(bp, world, "invalidBox", w.add, hi[:3], lo[:3])  # inverted
    rejected(bp, world, "invalidBox", w.add, lo[:3] - 3e7, hi[:3])  # beyond 2^24
    rejected(bp, world, "invalidArgument", w.add, lo[:3, :2], hi[:3, :2])  # shape
    rejected(bp, world, "invalidArgument", w.add, lo[:3], hi[:4])  # rows differ
    rejected(bp, world, "invalidArgument", w.add, lo[:3].astype(np.int32), hi[:3])  # dtype
    rejected(bp, world, "invalidArgument", w.add, lo[:3].reshape(-1), hi[:3].reshape(-1))
    rejected(bp, world, "invalidArgument", w.add, np.asfortranarray(lo[:3]),
             np.asfortranarray(hi[:3]))
    strided = np.zeros((3, 6), np.float32)[:, ::2]  # not contiguous
    message = rejected(bp, world, "invalidArgument", w.add, strided, strided + 1)
    assert "contiguous" in message
    rejected(bp, world, "invalidArgument", w.add, lo[:3], hi[:3], motion="flying")
    rejected(bp, world, "invalidArgument", w.add, lo[:3], hi[:3], user_data=[1, 2])
    rejected(bp, world, "invalidArgument", w.add, lo[:3], hi[:3], user_data=[1, -2, 3])
    rejected(bp, world, "invalidArgument", w.add, lo[:3], hi[:3], user_data=[1.0, 2.0, 3.0])
    moved = lo[:2].copy()
    moved[0, 0] = np.inf
    rejected(bp, world, "invalidBox", w.move, ids[:2], moved, hi[:2])
    rejected(bp, world, "invalidArgument", w.move, ids[:2], lo[:3], hi[:3])
    rejected(bp, world, "invalidArgument", w.move, ids[:2], lo[:2].astype(np.float16), hi[:2])


def test_bad_handles(bp, world):
    w, ids, lo, hi, _ = world
    unknown = ids[:3].copy()
    unknown[2] ^= np.uint64(1 << 40)  # another generation: never issued
    message = rejected(bp, world, "staleHandle", w.move, unknown, lo[:3], hi[:3])
    assert "entry 2" in message
    rejected(bp, world, "staleHandle", w.remove, unknown)
    rejected(bp, world, "staleHandle", w.remove, ids[[0, 1, 0]])  # twice in one batch
    rejected(bp, world, "staleHandle", w.set_filter, unknown, 1, 1)
    rejected(bp, world, "staleHandle", w.set_motion_type, unknown, "static")
    rejected(bp, world, "staleHandle", w.set_user_data, unknown, [1, 2, 3])
    rejected(bp, world, "staleHandle", w.user_data, unknown)
    other = bp.BroadPhase()
    foreign = other.add(lo[:1], hi[:1])
    rejected(bp, world, "staleHandle", w.remove, foreign)
    rejected(bp, world, "invalidArgument", w.remove, ids.astype(np.int64))  # dtype
    rejected(bp, world, "invalidArgument", w.remove, ids.reshape(-1, 2))  # shape
    rejected(bp, world, "invalidArgument", w.remove, ids[::2])  # not contiguous
    rejected(bp, world, "invalidArgument", w.set_motion_type, ids[:2], "asleep")
    rejected(bp, world, "invalidArgument", w.set_user_data, ids[:2], [1, 2, 3])


def test_removed_handles_are_stale(bp, world):
    w, ids, lo, hi, _ = world
    w.remove(ids[:5])
    w.update()
    with pytest.raises(bp.Error) as info:
        w.move(ids[:5], lo[:5], hi[:5])
    assert info.value.code == "staleHandle"
    assert not np.any(w.contains(ids[:5])) and np.all(w.contains(ids[5:]))


def test_bad_queries(bp, world):
    w, ids, lo, hi, _ = world
    o, d = lo[:4].copy(), np.ones((4, 3), np.float32)
    d[3] = 0
    message = rejected(bp, world, "invalidRay", w.cast_rays, o, d, 5.0)
    assert "ray 3" in message
    rejected(bp, world, "invalidRay", w.cast_rays, o, np.ones((4, 3), np.float32), -1.0)
    rejected(bp, world, "invalidRay", w.cast_rays_all, o, d, 5.0)
    rejected(bp, world, "invalidArgument", w.cast_rays, o, d[:3], 5.0)
    rejected(bp, world, "invalidArgument", w.cast_rays, o, np.ones((4, 3), np.float32), 5.0,
             query="all")
    rejected(bp, world, "invalidArgument", w.cast_rays, o, np.ones((4, 3), np.float32),
             np.ones(3, np.float32))
    rejected(bp, world, "invalidBox", w.query_box, [1, 1, 1], [0, 0, 0])
    rejected(bp, world, "invalidBox", w.query_boxes, lo[:3], lo[:3] - 1)
    rejected(bp, world, "invalidArgument", w.query_box, [1, 1], [2, 2])
    rejected(bp, world, "invalidArgument", w.query_point, [np.nan, 0, 0])
    rejected(bp, world, "invalidArgument", w.query_points, np.full((2, 3), np.inf, np.float32))
    rejected(bp, world, "invalidArgument", w.nearest, lo[:2], 0)
    bad = lo[:2].copy()
    bad[1, 0] = np.nan
    message = rejected(bp, world, "invalidArgument", w.nearest, bad, 3)
    assert "point 1" in message
    rejected(bp, world, "invalidArgument", w.shift_origin, [np.nan, 0, 0])
    rejected(bp, world, "invalidBox", w.shift_origin, [-1.7e7, 0, 0])


def test_bad_configuration(bp):
    for kwargs in ({"structure": "octree"}, {"threads": -1}, {"margin": -1.0},
                   {"cell_size": float("nan")}):
        with pytest.raises(bp.Error) as info:
            bp.BroadPhase(**kwargs)
        assert info.value.code == "invalidArgument"


def test_capacity_exceeded_keeps_the_last_frame(bp):
    w = bp.BroadPhase(max_pairs=3)
    box = np.zeros((2, 3), np.float32)
    ids = w.add(box, box + 1)
    first, _, _ = w.update()
    assert len(first) == 1
    w.add(np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32))  # 6 pairs
    with pytest.raises(bp.Error) as info:
        w.update()
    assert info.value.code == "capacityExceeded"
    assert w.validate() == "" and w.proxy_count() == 4
    w.remove(ids)
    pairs, begun, ended = w.update()  # 1 pair again, reported against the kept frame
    assert len(pairs) == 1 and len(ended) == 1 and len(begun) == 1
