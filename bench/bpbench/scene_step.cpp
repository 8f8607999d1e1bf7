#include "scene_step.h"

namespace bpbench {

void stepScene(bp::Scene& scene, bp::Scheduler& scheduler, bool serial) {
  if (serial) {
    scene.step();
    return;
  }
  // Boxes move independently (Scene::stepRange), so the split cannot change
  // the result; 4096 boxes a part is a few microseconds of work.
  scheduler.forEach(0, scene.n, 4096,
                    [&](uint32_t begin, uint32_t end) { scene.stepRange(begin, end); });
  ++scene.frame;
}

}  // namespace bpbench
