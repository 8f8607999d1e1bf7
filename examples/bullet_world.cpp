// A Bullet 3 world on broadphase: the smallest program to start from.
// btDiscreteDynamicsWorld takes bp::bullet::Broadphase where it would take
// btDbvtBroadphase; nothing else changes. Boxes and spheres fall onto a
// ground plane, then a ray from above finds the body under it.
#include <broadphase/bullet/broadphase.h>

#include <btBulletDynamicsCommon.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

int main(int argc, char** argv) {
  int steps = 240;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);

  btDefaultCollisionConfiguration configuration;
  btCollisionDispatcher dispatcher(&configuration);
  // Our broadphase, its tasks on two threads of its own arena (pass
  // config.broadphase.arena to share the engine's instead).
  bp::bullet::Config config;
  config.broadphase.threads = 2;
  bp::bullet::Broadphase broadphase(nullptr, config);
  btSequentialImpulseConstraintSolver solver;
  btDiscreteDynamicsWorld world(&dispatcher, &broadphase, &solver, &configuration);
  world.setGravity(btVector3(0, -10, 0));

  // The ground: an infinite plane (its +-1e18 box is clamped to 2^24).
  btStaticPlaneShape groundShape(btVector3(0, 1, 0), 0);
  btRigidBody ground(btRigidBody::btRigidBodyConstructionInfo(0, nullptr, &groundShape));
  world.addRigidBody(&ground);

  btBoxShape box(btVector3(0.5f, 0.5f, 0.5f));
  btSphereShape sphere(0.5f);
  std::vector<std::unique_ptr<btDefaultMotionState>> states;
  std::vector<std::unique_ptr<btRigidBody>> bodies;
  for (int i = 0; i < 27; ++i) {
    btCollisionShape* shape = i % 2 ? static_cast<btCollisionShape*>(&sphere) : &box;
    btVector3 inertia;
    shape->calculateLocalInertia(1.0f, inertia);
    const btVector3 at(float(i % 3) * 1.1f, 1.0f + float(i / 9) * 1.2f, float((i / 3) % 3) * 1.1f);
    states.push_back(
        std::make_unique<btDefaultMotionState>(btTransform(btQuaternion::getIdentity(), at)));
    btRigidBody::btRigidBodyConstructionInfo info(1.0f, states.back().get(), shape, inertia);
    info.m_rollingFriction = 0.1f;
    bodies.push_back(std::make_unique<btRigidBody>(info));
    world.addRigidBody(bodies.back().get());
  }

  for (int s = 0; s < steps; ++s) world.stepSimulation(1.0f / 60.0f, 1, 1.0f / 60.0f);

  // A ray straight down through the middle of the pile. Bullet's ray test
  // walks the broadphase (our castRay) and runs its narrowphase on what it
  // finds.
  const btVector3 from(1.1f, 20, 1.1f), to(1.1f, -1, 1.1f);
  btCollisionWorld::ClosestRayResultCallback hit(from, to);
  world.rayTest(from, to, hit);
  int picked = -1;
  for (size_t i = 0; i < bodies.size(); ++i)
    if (hit.m_collisionObject == bodies[i].get()) picked = int(i);
  std::printf("%d bodies, %d pairs after %d steps\n", int(bodies.size()),
              broadphase.getOverlappingPairCache()->getNumOverlappingPairs(), steps);
  if (picked >= 0)
    std::printf("ray hit body %d at y = %.2f\n", picked, double(hit.m_hitPointWorld.y()));
  broadphase.printStats();

  for (auto& b : bodies) world.removeRigidBody(b.get());
  world.removeRigidBody(&ground);
  return picked >= 0 ? 0 : 1;
}
