"""Broadphase layers: the layer a proxy is added with or moved to and the
layer table, against the numpy brute force with the table applied, for
every structure and 1 and 2 threads; what the structure hands the facade
leaves out pairs of layers that never collide."""
import numpy as np
import pytest

import brute
from conftest import STRUCTURES

LAYERS = 32


def table_without(*pairs):
    """The default table (every layer collides with every layer) less the
    listed pairs of layers, both ways."""
    t = np.ones((LAYERS, LAYERS), bool)
    for a, b in pairs:
        t[a, b] = t[b, a] = False
    return t


def expected(handles, lo, hi, layer, table):
    found = brute.pairs(brute.index_of(handles), lo, hi, layer=layer, table=table)
    row = {int(i): r for r, i in enumerate(brute.index_of(handles))}
    return np.array([[handles[row[a]], handles[row[b]]] for a, b in found.tolist()],
                    np.uint64).reshape(-1, 2)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("structure", STRUCTURES)
def test_layers_and_table_changes_against_brute_force(bp, structure, threads):
    rng = np.random.default_rng(5)
    n = 1500
    lo = (rng.random((n, 3)) * 30).astype(np.float32)
    hi = lo + (0.5 + rng.random((n, 3)) * 2).astype(np.float32)
    layer = rng.integers(0, 5, n)
    table = table_without((1, 1), (2, 3), (0, 4))
    w = bp.BroadPhase(structure=structure, threads=threads, layers=table)
    np.testing.assert_array_equal(w.layer_table(), table)
    ids = w.add(lo, hi, layer=layer)
    previous = set()
    for frame in range(6):
        if frame == 2:  # layer changes
            pick = rng.permutation(n)[:200]
            layer[pick] = rng.integers(0, 5, len(pick))
            w.set_layer(ids[pick], layer[pick])
        if frame == 3:  # a table change, and one layer for a few
            table = table_without((3, 3), (1, 2))
            w.set_layer_table(table)
            w.set_layer(ids[:10], 31)
            layer[:10] = 31
        if frame == 4:  # moves
            lo += (rng.random((n, 3)) - 0.5).astype(np.float32)
            hi = lo + 1.5
            w.move(ids, lo, hi)
        pairs, begun, ended = w.update()
        want = expected(ids, lo, hi, layer, table)
        np.testing.assert_array_equal(pairs, want)
        now = {tuple(p) for p in want.tolist()}
        assert {tuple(p) for p in begun.tolist()} == now - previous
        assert {tuple(p) for p in ended.tolist()} == previous - now
        previous = now
        assert w.validate() == ""


def test_layers_that_never_collide_are_never_candidates(bp):
    # Piles of boxes in one spot, each pile in a layer that does not collide
    # with itself: filters would leave every pair of a pile to the structure.
    piles, per = 4, 200
    lo = np.repeat(np.arange(piles, dtype=np.float32)[:, None] * 10, per, axis=0)
    lo = np.repeat(lo, 3, axis=1) + np.zeros((piles * per, 3), np.float32)
    hi = lo + 1
    layer = np.repeat(np.arange(1, piles + 1), per)
    table = table_without(*[(k, k) for k in range(1, piles + 1)])
    for structure in STRUCTURES:
        w = bp.BroadPhase(structure=structure, layers=table)
        w.add(lo, hi, layer=layer)
        pairs, _, _ = w.update()
        assert len(pairs) == 0 and w.last_structure_pairs() == 0
        filtered = bp.BroadPhase(structure=structure)
        cat = np.uint64(1) << layer.astype(np.uint64)
        filtered.add(lo, hi, category=cat, mask=~cat)
        pairs, _, _ = filtered.update()
        assert len(pairs) == 0
        assert filtered.last_structure_pairs() == piles * per * (per - 1) // 2


def test_bad_layers_change_nothing(bp):
    w = bp.BroadPhase(layers=table_without((1, 1)))
    lo = np.zeros((3, 3), np.float32)
    ids = w.add(lo, lo + 1, layer=1)
    w.update()
    before = w.save_state()
    bad_tables = [np.ones((31, 32), bool), np.ones((32, 32), np.int32), table_without()[:, ::2],
                  "table", None]
    asym = table_without()
    asym[2, 5] = False
    bad_tables.append(asym)
    for t in bad_tables:
        with pytest.raises(bp.Error) as info:
            w.set_layer_table(t)
        assert info.value.code == "invalidArgument"
    assert "not symmetric: layer 2" in str(info.value) and "layer 5" in str(info.value)
    for call in (lambda: w.set_layer(ids, 32), lambda: w.set_layer(ids, [0, 1, 32]),
                 lambda: w.set_layer(ids, -1), lambda: w.set_layer(ids, [1, 2]),
                 lambda: w.add(lo, lo + 1, layer=40), lambda: w.add(lo, lo + 1, layer=[0, 1, 99])):
        with pytest.raises(bp.Error) as info:
            call()
        assert info.value.code == "invalidArgument"
    assert "entry 2: layer 99 is out of range" in str(info.value)
    with pytest.raises(bp.Error) as info:
        w.set_layer(ids[:1] + np.uint64(1 << 32), 2)
    assert info.value.code == "staleHandle"
    with pytest.raises(bp.Error) as info:
        bp.BroadPhase(layers=asym)
    assert info.value.code == "invalidArgument"
    assert w.save_state() == before
