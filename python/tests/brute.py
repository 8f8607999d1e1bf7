"""The numpy brute force the tests hold the module against: every answer
computed by looking at every box, in float32 with the library's formulas
(docs/scenes.md, math/ray.h, math/aabb.h) so that distances compare exactly.
Written to be obviously right, not fast: N up to about 10^4."""
import numpy as np

STATIC, KINEMATIC, DYNAMIC = 0, 1, 2
MOTION = {"static": STATIC, "kinematic": KINEMATIC, "dynamic": DYNAMIC}
ALL = np.uint64(2**64 - 1)
NONE = 2**64 - 1


def index_of(handles):
    """The proxy index inside a handle: its low 32 bits."""
    return (np.asarray(handles, dtype=np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.int64)


def accepts(cat_a, mask_a, cat_b, mask_b):
    """bp::Filter::accepts, elementwise."""
    return ((cat_a & mask_b) != 0) & ((cat_b & mask_a) != 0)


def pairs(index, lo, hi, motion=None, category=None, mask=None, pair_kinematic=False,
          chunk=512, layer=None, table=None):
    """Every overlapping pair the broadphase reports, as (M, 2) proxy indices
    (lower first) sorted by (a, b). Rows of the arrays are proxies; index
    holds their proxy indices. layer (per row) and table ((32, 32) bool)
    apply a layer table: rows whose layers do not collide make no pair."""
    n = len(index)
    motion = np.full(n, DYNAMIC) if motion is None else np.asarray(motion)
    category = np.ones(n, np.uint64) if category is None else np.asarray(category, np.uint64)
    mask = np.full(n, ALL, np.uint64) if mask is None else np.asarray(mask, np.uint64)
    found = []
    for begin in range(0, n, chunk):
        end = min(n, begin + chunk)
        overlap = np.all((lo[begin:end, None, :] <= hi[None, :, :]) &
                         (lo[None, :, :] <= hi[begin:end, None, :]), axis=2)
        i, j = np.nonzero(overlap)
        i += begin
        keep = index[i] < index[j]
        i, j = i[keep], j[keep]
        mi, mj = motion[i], motion[j]
        moving_pair = (mi == DYNAMIC) | (mj == DYNAMIC) | \
            ((mi == KINEMATIC) & (mj == KINEMATIC) & pair_kinematic)
        keep = moving_pair & accepts(category[i], mask[i], category[j], mask[j])
        if table is not None:
            layers = np.asarray(layer)
            keep &= np.asarray(table, bool)[layers[i], layers[j]]
        found.append(np.stack([index[i[keep]], index[j[keep]]], axis=1))
    out = np.concatenate(found) if found else np.zeros((0, 2), np.int64)
    return out[np.lexsort((out[:, 1], out[:, 0]))]


def fnv1a64(index_pairs):
    """hashPairs (pair.h): FNV-1a 64 of the sorted pairs as little-endian uint32."""
    h = 14695981039346656037
    for byte in np.asarray(index_pairs, dtype="<u4").tobytes():
        h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def make_rays(origins, directions):
    """makeRay (math/ray.h): the unit direction and its reciprocal, in float32."""
    d = np.asarray(directions, np.float32)
    scale = np.max(np.abs(d), axis=1)
    d = d / scale[:, None]
    norm = np.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2])
    unit = d / norm[:, None]
    with np.errstate(divide="ignore"):
        inv = np.float32(1) / unit
    return np.asarray(origins, np.float32), inv


def ray_entry(origins, inv, lengths, lo, hi):
    """(R, N) entry distances, +inf where the ray misses: clipRayAabb of
    math/ray.h on every ray and box."""
    r, n = len(origins), len(lo)
    t_min = np.zeros((r, n), np.float32)
    t_max = np.broadcast_to(np.asarray(lengths, np.float32).reshape(-1, 1), (r, n)).copy()
    with np.errstate(invalid="ignore", over="ignore"):
        for a in range(3):
            i = inv[:, a:a + 1]
            near = (lo[None, :, a] - origins[:, a:a + 1]) * i
            far = (hi[None, :, a] - origins[:, a:a + 1]) * i
            flip = np.broadcast_to(i < 0, near.shape)
            near, far = np.where(flip, far, near), np.where(flip, near, far)
            t_min = np.where(near > t_min, near, t_min)
            t_max = np.where(far < t_max, far, t_max)
    return np.where(t_min <= t_max, t_min, np.float32(np.inf))


def closest_hits(index, entry):
    """Per ray: (hit, row of the closest box, t), ties to the lower proxy index."""
    order = np.argsort(index, kind="stable")
    e = entry[:, order]
    best = np.argmin(e, axis=1)  # first minimum: the lowest index among equal t
    t = e[np.arange(len(e)), best]
    hit = np.isfinite(t)
    return hit, order[best], t


def nearest(index, lo, hi, points, k):
    """Per point, the k rows nearest (distanceSquared of math/aabb.h), nearest
    first, ties to the lower index: (rows, d2), -1 / inf padded."""
    p = np.asarray(points, np.float32)
    rows = np.full((len(p), k), -1, np.int64)
    d2 = np.full((len(p), k), np.inf, np.float32)
    for q in range(len(p)):
        d = np.maximum(np.maximum(lo - p[q], p[q] - hi), np.float32(0))
        # Eigen's squaredNorm of a Vector3f adds the halves: x + (y + z).
        dist = d[:, 0] * d[:, 0] + (d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2])
        order = np.lexsort((index, dist))[:k]
        rows[q, :len(order)] = order
        d2[q, :len(order)] = dist[order]
    return rows, d2


def overlapping(index, lo, hi, box_lo, box_hi):
    """Rows of the boxes that overlap [box_lo, box_hi] (touching counts), by proxy index."""
    rows = np.nonzero(np.all((lo <= box_hi) & (box_lo <= hi), axis=1))[0]
    return rows[np.argsort(index[rows], kind="stable")]
