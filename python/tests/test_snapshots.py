"""Snapshots: save_state / load_state and pickling. A run saved half way
and restored, into the same object or a fresh one of any structure and
thread count, repeats every later frame (pairs, begun, ended) and query bit
for bit; bad bytes raise invalidState and change nothing."""
import copy
import pickle

import numpy as np
import pytest

from conftest import STRUCTURES

FRAMES, SAVE_AT = 8, 4


def frame_calls(w, rng, ids, frame):
    """One frame's changes, drawn from rng (the same for the same state of
    rng): moves, removes and adds, layers, filters, motion and user data."""
    live = ids[w.contains(ids)]
    lo = (rng.random((len(live), 3)) * 20).astype(np.float32)
    w.move(live, lo, lo + 1.5)
    gone = rng.permutation(live)[:8]
    w.remove(gone)
    live = np.setdiff1d(live, gone)
    lo = (rng.random((10, 3)) * 20).astype(np.float32)
    new = w.add(lo, lo + 1.5, layer=rng.integers(0, 3, 10), user_data=rng.integers(0, 2**40, 10))
    pick = rng.permutation(live)[:5]
    w.set_layer(pick, rng.integers(0, 3, len(pick)))
    w.set_filter(rng.permutation(live)[:3], category=2, mask=int(rng.integers(1, 4)))
    w.set_motion_type(rng.permutation(live)[:3], ["static", "kinematic", "dynamic"][frame % 3])
    if frame == 3:
        table = np.ones((32, 32), bool)
        table[1, 1] = table[0, 2] = table[2, 0] = False
        w.set_layer_table(table)
    return np.concatenate([ids, new])


def answers(w, rays):
    """Everything a frame gives back: the update's lists and the queries."""
    out = list(w.update())
    out += list(w.cast_rays(*rays))
    out += list(w.cast_rays_all(*rays))
    out += list(w.nearest(rays[0][:20], 4))
    out += list(w.query_boxes(rays[0][:20], rays[0][:20] + 3))
    return out


def unsealed(state):
    """A snapshot less its checksum and the saver's structure (bytes 16-24)."""
    return state[:16] + state[25:]


def same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def rays_of(rng, n=200):
    o = (rng.random((n, 3)) * 20).astype(np.float32)
    d = (rng.random((n, 3)) - 0.5).astype(np.float32)
    return o, d, np.full(n, 30.0, np.float32)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("structure", STRUCTURES)
def test_restored_runs_repeat_every_frame(bp, structure, threads):
    rng = np.random.default_rng(3)
    rays = rays_of(rng)
    w = bp.BroadPhase(structure=structure, threads=threads, max_pairs=0)
    lo = (rng.random((600, 3)) * 20).astype(np.float32)
    ids = w.add(lo, lo + 1.5, layer=rng.integers(0, 3, 600))
    want, saved, rng_at_save, ids_at_save = [], None, None, None
    for frame in range(FRAMES):
        if frame == SAVE_AT:
            saved, rng_at_save, ids_at_save = w.save_state(), copy.deepcopy(rng), ids.copy()
        ids = frame_calls(w, rng, ids, frame)
        want.append(answers(w, rays))
    assert isinstance(saved, bytes)
    targets = [w] + [bp.BroadPhase(structure=s, threads=3 - threads) for s in STRUCTURES]
    for target in targets:
        target.load_state(bytearray(saved))  # any buffer
        assert target.validate() == ""
        assert unsealed(target.save_state()) == unsealed(saved)
        r, ids_now = copy.deepcopy(rng_at_save), ids_at_save.copy()
        for frame in range(SAVE_AT, FRAMES):
            ids_now = frame_calls(target, r, ids_now, frame)
            same(answers(target, rays), want[frame])


def test_pickle_and_deepcopy_carry_the_state(bp):
    rng = np.random.default_rng(4)
    table = np.ones((32, 32), bool)
    table[2, 2] = False
    w = bp.BroadPhase(structure="bvh", threads=2, margin=0.1, layers=table,
                      pair_kinematic_kinematic=True)
    lo = (rng.random((300, 3)) * 10).astype(np.float32)
    ids = w.add(lo, lo + 1, layer=rng.integers(0, 4, 300), motion="kinematic")
    w.update()
    w.move(ids[:50], lo[:50] + 0.5, lo[:50] + 1.5)  # pending at the save
    saved, copies = w.save_state(), [pickle.loads(pickle.dumps(w)), copy.deepcopy(w)]
    want = w.update()
    for other in copies:
        assert other.structure == "bvh" and other.threads == w.threads
        np.testing.assert_array_equal(other.layer_table(), table)
        assert other.save_state() == saved
        same(other.update(), want)


def test_bad_snapshots_change_nothing(bp):
    w = bp.BroadPhase(threads=1)
    lo = np.arange(30, dtype=np.float32)[:, None].repeat(3, axis=1)
    w.add(lo, lo + 1.5)
    w.update()
    good = w.save_state()
    other = bp.BroadPhase()
    other.add(lo[:5], lo[:5] + 3)
    pairs, _, _ = other.update()
    before = other.save_state()
    damaged = bytearray(good)
    damaged[200] ^= 1
    version = bytearray(good)
    version[4] = 9
    for bad, why in ((good[:50], "truncated"), (good[:-1], "bytes but"), (bytes(damaged), "checksum"),
                     (bytes(version), "format version 9"), (b"", "truncated"),
                     (good + b"\0", "bytes but")):
        with pytest.raises(bp.Error) as info:
            other.load_state(bad)
        assert info.value.code == "invalidState" and why in str(info.value), str(info.value)
        assert other.save_state() == before and other.validate() == ""
    for bad in ("not bytes", 12, np.zeros(100, np.float32)[::2]):
        with pytest.raises(bp.Error) as info:
            other.load_state(bad)
        assert info.value.code == "invalidArgument"
    now, begun, ended = other.update()
    np.testing.assert_array_equal(now, pairs)
    assert len(begun) == len(ended) == 0
