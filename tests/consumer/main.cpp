// Proves the installed headers and libraries are usable on their own.
#include <broadphase/brute_force.h>
#include <broadphase/jobs/scheduler.h>
#include <broadphase/scene.h>

#include <cstdio>

int main() {
  bp::Scheduler scheduler(2);
  const bp::Scene scene = bp::makeScene(bp::SceneKind::uniform, 1000);
  const auto pairs = bp::brute::findPairs(scene.boxes);
  std::printf("consumer: %zu pairs, %d threads\n", pairs.size(), scheduler.threadCount());
  return pairs.empty() ? 1 : 0;
}
