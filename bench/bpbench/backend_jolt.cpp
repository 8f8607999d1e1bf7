// jolt: Jolt Physics' BroadPhaseQuadTree, driven as JPH::PhysicsSystem drives it.
//
// Built only when the build is given a Jolt checkout (BP_JOLT_ROOT,
// scripts/peers.sh). The adapter owns what PhysicsSystem owns around its
// broadphase, and nothing more: a BodyManager holding one body per box, the
// layer interface and filters, and the BroadPhaseQuadTree.
//
// Layers as Jolt's own examples set them up: two broadphase layers,
// non-moving and moving, one object layer each; static boxes are static
// bodies in the non-moving layer, the others dynamic bodies in the moving
// layer, activated when added (PhysicsSystem only finds pairs for active
// bodies; they never sleep here, since nothing but the frame runs).
//
// Boxes become bodies with a box shape of the box's half extents, centred
// on the box, identity rotation. Jolt has no way to hand a body an AABB: a
// body's bounds are always its shape's world-space bounds
// (Body::CalculateWorldSpaceBoundsInternal), computed after integration has
// moved it. So a frame moves each body to its box's centre and recomputes its
// bounds, which is what the integration step does for a body that moved
// without rotating, and then notifies the broadphase in batches of 64
// (PhysicsSystem's cBodiesBatch). Those bounds are the box up to a rounding
// of the centre and half extent (a few ulps). PhysicsSystem grows each active
// body's bounds by PhysicsSettings::mSpeculativeContactDistance (0.02 by
// default) in FindCollidingPairs, which covers that rounding, so Jolt's pairs
// are a superset of the exact ones; as with Bullet's fat boxes, the exact
// list is Jolt's filtered by the exact boxes, then sorted, inside the frame.
//
// The frame's broadphase calls follow PhysicsSystem::Update: FrameSync,
// LockModifications, UpdatePrepare (which rebuilds at most one dirty layer's
// tree), FindCollidingPairs over the active bodies in batches of 16
// (cActiveBodiesBatchSize) against the tree as it stands, UpdateFinalize,
// UnlockModifications. PhysicsSystem runs UpdatePrepare and the pair finding
// as parallel jobs; here they run one after the other on the calling thread,
// as every peer runs on one thread.
#include "backend.h"

// Jolt.h first: every Jolt header relies on it.
#include <Jolt/Jolt.h>

#include <Jolt/Core/Factory.h>
#include <Jolt/Physics/Body/BodyCreationSettings.h>
#include <Jolt/Physics/Body/BodyManager.h>
#include <Jolt/Physics/Body/BodyPair.h>
#include <Jolt/Physics/Collision/BroadPhase/BroadPhaseQuadTree.h>
#include <Jolt/Physics/Collision/Shape/BoxShape.h>
#include <Jolt/Physics/PhysicsSettings.h>
#include <Jolt/RegisterTypes.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace bpbench {
namespace {

namespace object_layer {
constexpr JPH::ObjectLayer kNonMoving = 0;
constexpr JPH::ObjectLayer kMoving = 1;
}  // namespace object_layer

namespace broad_layer {
constexpr JPH::BroadPhaseLayer kNonMoving(0);
constexpr JPH::BroadPhaseLayer kMoving(1);
}  // namespace broad_layer

class LayerInterface final : public JPH::BroadPhaseLayerInterface {
 public:
  JPH::uint GetNumBroadPhaseLayers() const override { return 2; }
  JPH::BroadPhaseLayer GetBroadPhaseLayer(JPH::ObjectLayer layer) const override {
    return layer == object_layer::kNonMoving ? broad_layer::kNonMoving : broad_layer::kMoving;
  }
#if defined(JPH_EXTERNAL_PROFILE) || defined(JPH_PROFILE_ENABLED)
  const char* GetBroadPhaseLayerName(JPH::BroadPhaseLayer layer) const override {
    return layer == broad_layer::kNonMoving ? "non-moving" : "moving";
  }
#endif
};

// Moving objects look in both trees; non-moving ones are never the active
// side of a pair, so they need no tree.
class ObjectVsBroadPhase final : public JPH::ObjectVsBroadPhaseLayerFilter {
 public:
  bool ShouldCollide(JPH::ObjectLayer layer, JPH::BroadPhaseLayer) const override {
    return layer == object_layer::kMoving;
  }
};

// Static-static pairs are not pairs (bpbench's rule and Jolt's).
class ObjectPairs final : public JPH::ObjectLayerPairFilter {
 public:
  bool ShouldCollide(JPH::ObjectLayer a, JPH::ObjectLayer b) const override {
    return a == object_layer::kMoving || b == object_layer::kMoving;
  }
};

// Jolt's allocation hooks, factory and type registry, once per process:
// RegisterTypes also checks that this file was compiled with the library's
// configuration (precision, object layer bits, instruction sets).
void initJoltOnce() {
  static const bool done = [] {
    JPH::RegisterDefaultAllocator();
    JPH::Factory::sInstance = new JPH::Factory();
    JPH::RegisterTypes();
    return true;
  }();
  (void)done;
}

class JoltBackend final : public Backend {
 public:
  JoltBackend() { initJoltOnce(); }

  ~JoltBackend() override {
    // The broadphase refers to the bodies: it goes first (PhysicsSystem's order).
    broadphase_.reset();
    bodies_.reset();
  }

  void build(const Scene& scene, Scheduler&) override {
    const uint32_t n = static_cast<uint32_t>(scene.boxes.size());
    if (n > JPH::BodyID::cMaxBodyIndex + 1)
      throw std::runtime_error("jolt: at most 2^23 bodies (the index bits of a BodyID)");
    boxes_ = scene.boxes;
    bodies_ = std::make_unique<JPH::BodyManager>();
    bodies_->Init(n, 0, layers_);
    broadphase_ = std::make_unique<JPH::BroadPhaseQuadTree>();
    broadphase_->Init(bodies_.get(), layers_);
    bodyOf_.assign(n, JPH::BodyID());
    sceneOf_.assign(n, 0);
    std::vector<uint32_t> all(n);
    for (uint32_t i = 0; i < n; ++i) all[i] = i;
    std::vector<uint8_t> isStatic(n, 0);
    if (!scene.isStatic.empty()) isStatic = scene.isStatic;
    addBodies(all, scene.boxes, isStatic);
    // What PhysicsSystem::OptimizeBroadPhase does, and Jolt advises after a
    // bulk insert: build both trees once, before the first frame.
    broadphase_->Optimize();
  }

  void move(std::span<const uint32_t> ids, std::span<const Aabb> boxes, Scheduler&) override {
    // PhysicsSystem moves bodies and notifies the broadphase while it holds
    // the modification lock of its step (so without taking it per batch).
    broadphase_->LockModifications();
    JPH::BodyID batch[kBoundsBatch];
    int inBatch = 0;
    for (size_t k = 0; k < ids.size(); ++k) {
      const uint32_t id = ids[k];
      boxes_[id] = boxes[k];
      const JPH::BodyID body = bodyOf_[id];
      bodies_->GetBody(body).SetPositionAndRotationInternal(centreOf(boxes[k]),
                                                            JPH::Quat::sIdentity(), false);
      batch[inBatch++] = body;
      if (inBatch == kBoundsBatch) {
        broadphase_->NotifyBodiesAABBChanged(batch, inBatch, false);
        inBatch = 0;
      }
    }
    if (inBatch > 0) broadphase_->NotifyBodiesAABBChanged(batch, inBatch, false);
    broadphase_->UnlockModifications();
  }

  void findPairs(Scheduler&, std::vector<Pair>& out) override {
    broadphase_->FrameSync();
    broadphase_->LockModifications();
    const JPH::BroadPhase::UpdateState update = broadphase_->UpdatePrepare();

    Collector collector(*this, out);
    out.clear();
    const JPH::uint32 active = bodies_->GetNumActiveBodies(JPH::EBodyType::RigidBody);
    const JPH::BodyID* list = bodies_->GetActiveBodiesUnsafe(JPH::EBodyType::RigidBody);
    // FindCollidingPairs reorders its array, so each batch is a copy, as in
    // PhysicsSystem::JobFindCollisions.
    JPH::BodyID batch[kActiveBatch];
    for (JPH::uint32 begin = 0; begin < active; begin += kActiveBatch) {
      const JPH::uint32 count = std::min<JPH::uint32>(kActiveBatch, active - begin);
      std::copy(list + begin, list + begin + count, batch);
      broadphase_->FindCollidingPairs(batch, static_cast<int>(count), speculative_,
                                      objectVsBroadPhase_, objectPairs_, collector);
    }

    broadphase_->UpdateFinalize(update);
    broadphase_->UnlockModifications();
    std::sort(out.begin(), out.end());
  }

  // Churn as BodyInterface does it: deactivate and take out of the
  // broadphase, then destroy; new bodies for the adds.
  void remove(std::span<const uint32_t> ids) override {
    std::vector<JPH::BodyID> gone(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) gone[k] = bodyOf_[ids[k]];
    const int count = static_cast<int>(gone.size());
    bodies_->DeactivateBodies(gone.data(), count);
    broadphase_->RemoveBodies(gone.data(), count);
    bodies_->DestroyBodies(gone.data(), count);
    for (uint32_t id : ids) bodyOf_[id] = JPH::BodyID();
  }

  void add(std::span<const uint32_t> ids, std::span<const Aabb> boxes,
           std::span<const uint8_t> isStatic) override {
    for (size_t k = 0; k < ids.size(); ++k) boxes_[ids[k]] = boxes[k];
    addBodies(ids, boxes, isStatic);
  }

  // Rays are not measured for this peer (no kRays capability).
  void castRays(Scheduler&, std::span<const Ray>, RayQuery, std::span<RayHit>) override {}
  void castRaysAll(Scheduler&, std::span<const Ray>, std::vector<RayHit>& out,
                   std::vector<uint32_t>& offsets) override {
    out.clear();
    offsets.clear();
  }

 private:
  static constexpr int kBoundsBatch = 64;  // PhysicsSystem's cBodiesBatch
  static constexpr int kActiveBatch = 16;  // PhysicsSystem's cActiveBodiesBatchSize (private)

  // Jolt's pairs in, exact scene-id pairs out: each pair is reported once
  // (Body::sFindCollidingPairsCanCollide), so no deduplication is needed.
  class Collector final : public JPH::BodyPairCollector {
   public:
    Collector(const JoltBackend& backend, std::vector<Pair>& out) : b_(backend), out_(out) {}
    void AddHit(const JPH::BodyPair& pair) override {
      const uint32_t a = b_.sceneOf_[pair.mBodyA.GetIndex()];
      const uint32_t c = b_.sceneOf_[pair.mBodyB.GetIndex()];
      if (bp::overlaps(b_.boxes_[a], b_.boxes_[c])) out_.push_back(bp::makePair(a, c));
    }

   private:
    const JoltBackend& b_;
    std::vector<Pair>& out_;
  };

  static JPH::RVec3 centreOf(const Aabb& box) {
    const bp::Vec3 c = (box.min + box.max) * 0.5f;
    return JPH::RVec3(c.x(), c.y(), c.z());
  }

  // BodyInterface's batch add: create the bodies, AddBodiesPrepare and
  // AddBodiesFinalize with all of them, then activate the moving ones.
  void addBodies(std::span<const uint32_t> ids, std::span<const Aabb> boxes,
                 std::span<const uint8_t> isStatic) {
    std::vector<JPH::BodyID> added, moving;
    added.reserve(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      const bool st = isStatic[k] != 0;
      const bp::Vec3 half = (boxes[k].max - boxes[k].min) * 0.5f;
      // No convex radius: the bounds do not depend on it, and a box thinner
      // than the default radius would otherwise have it clamped.
      JPH::BodyCreationSettings settings(
          new JPH::BoxShape(JPH::Vec3(half.x(), half.y(), half.z()), 0.0f), centreOf(boxes[k]),
          JPH::Quat::sIdentity(), st ? JPH::EMotionType::Static : JPH::EMotionType::Dynamic,
          st ? object_layer::kNonMoving : object_layer::kMoving);
      // Mass properties are the solver's business; given, so that a flat box
      // (no volume) is not a degenerate body.
      settings.mOverrideMassProperties = JPH::EOverrideMassProperties::MassAndInertiaProvided;
      settings.mMassPropertiesOverride.mMass = 1.0f;
      settings.mMassPropertiesOverride.mInertia = JPH::Mat44::sIdentity();
      settings.mAllowSleeping = false;
      JPH::Body* body = bodies_->AllocateBody(settings);
      if (!bodies_->AddBody(body)) {
        bodies_->FreeBody(body);
        throw std::runtime_error("jolt: out of bodies");
      }
      const JPH::BodyID id = body->GetID();
      bodyOf_[ids[k]] = id;
      sceneOf_[id.GetIndex()] = ids[k];
      added.push_back(id);
      if (!st) moving.push_back(id);
    }
    const int count = static_cast<int>(added.size());
    const JPH::BroadPhase::AddState state = broadphase_->AddBodiesPrepare(added.data(), count);
    broadphase_->AddBodiesFinalize(added.data(), count, state);
    bodies_->ActivateBodies(moving.data(), static_cast<int>(moving.size()));
  }

  LayerInterface layers_;
  ObjectVsBroadPhase objectVsBroadPhase_;
  ObjectPairs objectPairs_;
  const float speculative_ = JPH::PhysicsSettings().mSpeculativeContactDistance;
  std::unique_ptr<JPH::BodyManager> bodies_;
  std::unique_ptr<JPH::BroadPhaseQuadTree> broadphase_;
  std::vector<JPH::BodyID> bodyOf_;  // scene id -> body
  std::vector<uint32_t> sceneOf_;    // body index -> scene id
  std::vector<Aabb> boxes_;          // exact boxes, scene ids
};

}  // namespace

#define BPBENCH_STR2(x) #x
#define BPBENCH_STR(x) BPBENCH_STR2(x)

std::string joltVersion() {
  return BPBENCH_STR(JPH_VERSION_MAJOR) "." BPBENCH_STR(JPH_VERSION_MINOR) "." BPBENCH_STR(
      JPH_VERSION_PATCH);
}

std::unique_ptr<Backend> makeJolt() { return std::make_unique<JoltBackend>(); }

}  // namespace bpbench
