"""Random sequences of add, move, remove, set_filter, set_motion_type and
set_user_data against a model in Python and the numpy brute force: pairs,
begun and ended after every update, for every structure and 1 and 2
threads."""
import numpy as np
import pytest

import brute
from conftest import STRUCTURES

MOTIONS = ["static", "kinematic", "dynamic"]


class Model:
    """Every live proxy by handle, and which handle each user datum names."""

    def __init__(self):
        self.box = {}  # handle -> (lo, hi)
        self.motion = {}
        self.category = {}
        self.mask = {}
        self.user = {}
        self.handle_of_user = {}  # every user datum ever given is unique

    def live(self):
        return np.array(sorted(self.box), np.uint64)

    def expected_pairs(self, pair_kinematic):
        h = self.live()
        if len(h) == 0:
            return np.zeros((0, 2), np.uint64)
        lo = np.array([self.box[x][0] for x in h.tolist()], np.float32)
        hi = np.array([self.box[x][1] for x in h.tolist()], np.float32)
        rows_of_index = {int(i): r for r, i in enumerate(brute.index_of(h))}
        found = brute.pairs(brute.index_of(h), lo, hi,
                            [brute.MOTION[self.motion[x]] for x in h.tolist()],
                            [self.category[x] for x in h.tolist()],
                            [self.mask[x] for x in h.tolist()], pair_kinematic)
        return np.array([[h[rows_of_index[a]], h[rows_of_index[b]]] for a, b in found.tolist()],
                        np.uint64).reshape(-1, 2)


def random_boxes(rng, n, side=12.0):
    lo = (rng.random((n, 3)) * side).astype(np.float32)
    return lo, lo + (0.5 + rng.random((n, 3)) * 2).astype(np.float32)


def run_sequence(bp, structure, threads, seed, pair_kinematic):
    rng = np.random.default_rng(seed)
    w = bp.BroadPhase(structure=structure, threads=threads,
                      pair_kinematic_kinematic=pair_kinematic)
    m = Model()
    next_user = [2**62]  # apart from any handle

    def fresh_users(n):
        u = np.arange(next_user[0], next_user[0] + n, dtype=np.uint64)
        next_user[0] += n
        return u

    previous = set()
    history = []
    for frame in range(20):
        live = m.live()
        # add
        n = int(rng.integers(0, 40)) if frame else 200
        if n:
            lo, hi = random_boxes(rng, n)
            motion = MOTIONS[int(rng.integers(0, 3))]
            cat = rng.integers(1, 4, n).astype(np.uint64)
            use_default = rng.random() < 0.5
            users = None if use_default else fresh_users(n)
            mask = int(rng.integers(1, 4))
            ids = w.add(lo, hi, motion=motion, user_data=users, category=cat, mask=mask)
            for k, h in enumerate(ids.tolist()):
                m.box[h] = (lo[k], hi[k])
                m.motion[h], m.category[h], m.mask[h] = motion, int(cat[k]), mask
                u = h if use_default else int(users[k])
                m.user[h] = u
                m.handle_of_user[u] = h
        if len(live):
            # move some (the batch may repeat none; ascending or shuffled)
            chosen = rng.permutation(live)[:int(rng.integers(0, len(live) + 1))]
            lo, hi = random_boxes(rng, len(chosen))
            w.move(chosen, lo, hi)
            for k, h in enumerate(chosen.tolist()):
                m.box[h] = (lo[k], hi[k])
            # remove some
            gone = rng.permutation(live)[:int(rng.integers(0, 15))]
            w.remove(gone)
            for h in gone.tolist():
                for table in (m.box, m.motion, m.category, m.mask, m.user):
                    del table[h]
            live = m.live()
        if len(live):
            pick = rng.permutation(live)[:int(rng.integers(0, 10))]
            cat = rng.integers(1, 4, len(pick)).astype(np.uint64)
            mask = int(rng.integers(1, 4))
            w.set_filter(pick, cat, mask)
            for k, h in enumerate(pick.tolist()):
                m.category[h], m.mask[h] = int(cat[k]), mask
            pick = rng.permutation(live)[:int(rng.integers(0, 10))]
            motion = MOTIONS[int(rng.integers(0, 3))]
            w.set_motion_type(pick, motion)
            for h in pick.tolist():
                m.motion[h] = motion
            pick = rng.permutation(live)[:int(rng.integers(0, 10))]
            users = fresh_users(len(pick))
            w.set_user_data(pick, users)
            for k, h in enumerate(pick.tolist()):
                m.user[h] = int(users[k])
                m.handle_of_user[int(users[k])] = h

        pairs, begun, ended = w.update()
        expected = m.expected_pairs(pair_kinematic)
        handles = np.vectorize(lambda u: m.handle_of_user[int(u)], otypes=[np.uint64])
        got = handles(pairs) if len(pairs) else pairs
        np.testing.assert_array_equal(got, expected)
        user_now = np.array([[m.user[a], m.user[b]] for a, b in expected.tolist()],
                            np.uint64).reshape(-1, 2)
        np.testing.assert_array_equal(pairs, user_now)
        now = {tuple(p) for p in expected.tolist()}
        as_handles = lambda events: {tuple(p) for p in (handles(events) if len(events)
                                                        else events).tolist()}
        assert as_handles(begun) == now - previous
        assert as_handles(ended) == previous - now
        previous = now
        assert w.proxy_count() == len(m.box)
        assert w.validate() == ""
        assert np.all(w.contains(live)) if len(live) else True
        # by index: handles differ between broadphases (each pool's salt)
        history.append([brute.index_of(handles(e) if len(e) else e) for e in (pairs, begun, ended)])
    return history


@pytest.mark.parametrize("pair_kinematic", [False, True])
@pytest.mark.parametrize("structure", STRUCTURES)
def test_random_sequences(bp, structure, pair_kinematic):
    one = run_sequence(bp, structure, 1, 11, pair_kinematic)
    two = run_sequence(bp, structure, 2, 11, pair_kinematic)
    for a, b in zip(one, two):  # handles and events identical for any thread count
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_shift_origin(bp):
    rng = np.random.default_rng(3)
    lo, hi = random_boxes(rng, 300)
    w = bp.BroadPhase()
    ids = w.add(lo, hi)
    before, _, _ = w.update()
    offset = np.array([4.0, -2.0, 1.5], np.float32)
    w.shift_origin(offset)
    pairs, begun, ended = w.update()
    np.testing.assert_array_equal(pairs, before)
    assert len(begun) == 0 and len(ended) == 0
    found = w.query_box(lo[0] - offset, hi[0] - offset)
    assert ids[0] in found
    assert w.validate() == ""


def test_float64_and_lists_are_converted(bp):
    rng = np.random.default_rng(4)
    lo, hi = random_boxes(rng, 200)
    a, b = bp.BroadPhase(), bp.BroadPhase()
    a.add(lo, hi)
    b.add(lo.astype(np.float64), hi.astype(np.float64))
    pa, _, _ = a.update()
    pb, _, _ = b.update()
    np.testing.assert_array_equal(brute.index_of(pa), brute.index_of(pb))
    np.testing.assert_array_equal(a.query_box([0, 0, 0], [3, 3, 3]) & 0xFFFFFFFF,
                                  b.query_box((0.0, 0.0, 0.0), np.float64([3, 3, 3])) & 0xFFFFFFFF)


def test_introspection(bp):
    w = bp.BroadPhase(structure="bvh", threads=1)
    assert w.structure == "bvh" and w.threads == 1
    assert w.proxy_count() == 0
    ids = w.add(np.zeros((3, 3), np.float32), np.ones((3, 3), np.float32), user_data=[7, 8, 9])
    np.testing.assert_array_equal(w.user_data(ids), [7, 8, 9])
    pairs, _, _ = w.update()
    np.testing.assert_array_equal(pairs, [[7, 8], [7, 9], [8, 9]])
    assert w.memory_bytes() > 0 and w.proxy_count() == 3
    use = w.memory_use()
    assert sum(use.values()) == w.memory_bytes() and use["structure"] > 0
    assert use["doubles"] == 0 and use["query_view"] == 0


def test_concurrent_queries_from_python_threads(bp, tk):
    # The GIL is released inside the calls and queries take a shared lock:
    # threads querying at once get the answers one thread gets.
    import threading
    scene = tk.make_scene("uniform", 5000)
    w = bp.BroadPhase(threads=2)
    w.add(scene.lo, scene.hi)
    w.update()
    origins, directions, lengths = tk.make_rays(5000, 20000)  # several chunks a call
    one = bp.BroadPhase(threads=1)
    one.add(scene.lo, scene.hi)
    one.update()
    expected = one.cast_rays(origins, directions, lengths)
    expected = (expected[0], expected[1] & 0xFFFFFFFF, expected[2])
    results = [None] * 4

    def work(slot):
        results[slot] = w.cast_rays(origins, directions, lengths)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:  # the same as one thread's, by proxy index
        for x, y in zip((r[0], r[1] & 0xFFFFFFFF, r[2]), expected):
            np.testing.assert_array_equal(x, y)
