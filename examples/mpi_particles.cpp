// A granular column on several MPI ranks: spheres of slightly different
// radii fall into a square bin and pile up, pushed apart by spring contacts.
// Space is split over the ranks by bp::mpi::DistributedBroadPhase; each rank
// integrates the particles it owns, which migrate (with their velocity, as
// the payload) when they cross into another rank's region.
//
//   mpirun -np 4 build/release/examples/mpi_particles --particles 4000 --frames 400
//
// (As root, Open MPI also wants --allow-run-as-root; on fewer cores than
// ranks, --oversubscribe.)
//
// Contacts: update() gives each rank the pairs whose lower id it owns. With
// the halo at the largest radius, the other particle of such a pair is held
// on the rank too (owned or ghost), so its centre and radius are known:
// the rank computes the pair's force, keeps +F and sends -F to the other
// particle's owner. Each particle then sums its contact forces in the order
// of the other particle's id, so the run is the same bit for bit on any
// number of ranks and threads: it ends with a checksum of every particle's
// position to compare.
#include <broadphase/mpi/distributed_broad_phase.h>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr float kBin = 16.0f;       // the bin: [0, kBin] x [0, inf) x [0, kBin]
constexpr float kMaxRadius = 0.5f;  // radii in [0.4, 0.5]
constexpr float kStiffness = 4000.0f;
constexpr float kDrag = 0.8f;  // per second, on every particle
constexpr float kGravity = -9.81f;
constexpr float kStep = 0.004f;

// What travels with a particle: its velocity.
struct State {
  float vx, vy, vz;
};

// A contact force on one particle from another.
struct Push {
  uint64_t particle;
  uint64_t other;
  float fx, fy, fz;
};

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
float unit(uint64_t id, int k) { return float(mix(id * 8 + uint64_t(k)) >> 40) / float(1 << 24); }

bp::Aabb sphereBox(const bp::Vec3& c, float r) {
  return {c - bp::Vec3(r, r, r), c + bp::Vec3(r, r, r)};
}

// Every rank's pushes for other ranks' particles, to their owners.
std::vector<Push> sendToOwners(const std::vector<std::vector<Push>>& out, int size) {
  std::vector<int> sendCounts(static_cast<size_t>(size)), recvCounts(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) sendCounts[size_t(r)] = int(out[size_t(r)].size() * sizeof(Push));
  MPI_Alltoall(sendCounts.data(), 1, MPI_INT, recvCounts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> sendOffsets(static_cast<size_t>(size)), recvOffsets(static_cast<size_t>(size));
  std::vector<Push> send, received;
  int in = 0;
  for (int r = 0; r < size; ++r) {
    sendOffsets[size_t(r)] = int(send.size() * sizeof(Push));
    send.insert(send.end(), out[size_t(r)].begin(), out[size_t(r)].end());
    recvOffsets[size_t(r)] = in;
    in += recvCounts[size_t(r)];
  }
  received.resize(size_t(in) / sizeof(Push));
  MPI_Alltoallv(send.data(), sendCounts.data(), sendOffsets.data(), MPI_BYTE, received.data(),
                recvCounts.data(), recvOffsets.data(), MPI_BYTE, MPI_COMM_WORLD);
  return received;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  uint32_t particles = 4000;
  int frames = 400;
  int threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--particles") == 0) particles = uint32_t(std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--frames") == 0) frames = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  }

  {
    bp::mpi::DistributedBroadPhase world(
        MPI_COMM_WORLD, {.local = {.threads = threads},
                         .halo = kMaxRadius,  // partners of owned particles are held here
                         .payloadBytes = sizeof(State)});

    // A loose column of particles on a jittered lattice, each rank adding a
    // share (update() hands each to its owner). User data: the radius bits.
    const int perLayer = int(kBin / 1.1f) * int(kBin / 1.1f);
    for (uint32_t id = 0; id < particles; ++id) {
      if (int(id % uint32_t(size)) != rank) continue;
      const int layer = int(id) / perLayer, cell = int(id) % perLayer, row = int(kBin / 1.1f);
      const bp::Vec3 c(0.6f + 1.1f * float(cell % row) + 0.05f * unit(id, 0),
                       1.0f + 1.2f * float(layer) + 0.05f * unit(id, 1),
                       0.6f + 1.1f * float(cell / row) + 0.05f * unit(id, 2));
      const float r = 0.4f + 0.1f * unit(id, 3);
      const State s{unit(id, 4) - 0.5f, 0.0f, unit(id, 5) - 0.5f};
      uint32_t bits;
      std::memcpy(&bits, &r, sizeof bits);
      world.add(id, {.box = sphereBox(c, r), .userData = bits},
                std::as_bytes(std::span<const State>(&s, 1)));
    }

    std::vector<Push> pushes;
    std::vector<std::vector<Push>> out(static_cast<size_t>(size));
    std::vector<bp::Aabb> boxes;
    uint64_t contacts = 0, migrations = 0;
    for (int frame = 0; frame < frames; ++frame) {
      const bp::mpi::GlobalFrame& f = world.update();
      migrations += world.stats().migratedIn;

      // Contact forces of the pairs this rank owns (lower id here).
      pushes.clear();
      for (auto& o : out) o.clear();
      uint64_t touching = 0;
      for (const bp::mpi::GlobalPair& p : f.pairs) {
        const bp::Aabb a = world.box(p.a), b = world.box(p.b);
        const float ra = 0.5f * (a.max.x() - a.min.x()), rb = 0.5f * (b.max.x() - b.min.x());
        const bp::Vec3 d = a.center() - b.center();
        const float dist = d.norm();
        const float depth = ra + rb - dist;
        if (depth <= 0 || dist == 0) continue;  // boxes overlap, spheres do not
        ++touching;
        const bp::Vec3 force = d * (kStiffness * depth / dist);
        pushes.push_back({p.a, p.b, force.x(), force.y(), force.z()});
        const Push back{p.b, p.a, -force.x(), -force.y(), -force.z()};
        const int owner = world.ownerOf(p.b);
        if (owner == rank)
          pushes.push_back(back);
        else
          out[size_t(owner)].push_back(back);
      }
      const std::vector<Push> received = sendToOwners(out, size);
      pushes.insert(pushes.end(), received.begin(), received.end());
      // Sum each particle's forces in the order of the other id: the same
      // sum whatever rank computed each term.
      std::sort(pushes.begin(), pushes.end(), [](const Push& x, const Push& y) {
        return x.particle < y.particle || (x.particle == y.particle && x.other < y.other);
      });

      // Integrate what this rank owns, in id order of the pushes.
      const std::span<const uint64_t> owned = world.ownedIds();
      boxes.resize(owned.size());
      size_t next = 0;
      std::vector<size_t> order(owned.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      std::sort(order.begin(), order.end(),
                [&](size_t x, size_t y) { return owned[x] < owned[y]; });
      for (size_t k : order) {
        const uint64_t id = owned[k];
        bp::Vec3 force(0, 0, 0);
        while (next < pushes.size() && pushes[next].particle < id) ++next;
        for (; next < pushes.size() && pushes[next].particle == id; ++next)
          force += bp::Vec3(pushes[next].fx, pushes[next].fy, pushes[next].fz);
        const bp::Aabb box = world.box(id);
        const float r = 0.5f * (box.max.x() - box.min.x());
        State s;
        std::memcpy(&s, world.payload(id).data(), sizeof s);
        bp::Vec3 v(s.vx, s.vy, s.vz);
        v += (force + bp::Vec3(0, kGravity, 0)) * kStep;  // unit mass
        v *= 1.0f - kDrag * kStep;
        bp::Vec3 c = box.center() + v * kStep;
        // The bin's floor and walls: reflect, losing half the speed.
        for (int axis = 0; axis < 3; ++axis) {
          const float lo = r, hi = axis == 1 ? 1e6f : kBin - r;
          if (c[axis] < lo) {
            c[axis] = lo;
            v[axis] = std::fabs(v[axis]) * 0.5f;
          } else if (c[axis] > hi) {
            c[axis] = hi;
            v[axis] = -std::fabs(v[axis]) * 0.5f;
          }
        }
        s = {v.x(), v.y(), v.z()};
        std::memcpy(world.payload(id).data(), &s, sizeof s);
        boxes[k] = sphereBox(c, r);
      }
      world.moveOwned(boxes);
      contacts += touching;
    }
    world.update();

    // Summary: counts, height and a checksum of every position (the same on
    // any number of ranks).
    double height = 0;
    uint64_t checksum = 0;
    for (uint64_t id : world.ownedIds()) {
      const bp::Vec3 c = world.box(id).center();
      height += c.y();
      uint32_t bits[3];
      std::memcpy(bits, c.data(), sizeof bits);
      checksum += mix(id ^ (uint64_t(bits[0]) << 32 | bits[1]) ^ (uint64_t(bits[2]) << 17));
    }
    uint64_t totals[3] = {world.ownedIds().size(), contacts, migrations};
    MPI_Allreduce(MPI_IN_PLACE, totals, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &checksum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &height, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf(
          "%llu particles on %d ranks, %d frames: %llu contacts, %llu migrations, "
          "mean height %.3f\n",
          (unsigned long long)totals[0], size, frames, (unsigned long long)totals[1],
          (unsigned long long)totals[2], height / double(totals[0]));
      std::printf("checksum %016llx\n", (unsigned long long)checksum);
    }
  }
  MPI_Finalize();
  return 0;
}
