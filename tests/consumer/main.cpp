// Proves the installed headers and libraries are usable on their own: only
// the public API, as an engine sees it, with and without exceptions (built
// twice, see CMakeLists.txt).
#include <broadphase/broad_phase.h>
#include <broadphase/error.h>

#include <cstdio>

namespace {
int gReports = 0;
void countReport(bp::ErrorCode, const char*, void*) { ++gReports; }
}  // namespace

int main() {
  // A row of unit boxes, each overlapping the next: n - 1 pairs.
  bp::BroadPhase broadphase({.threads = 2});
  const int n = 1000;
  for (int i = 0; i < n; ++i)
    broadphase.add(
        {.box = {bp::Vec3(0.5f * float(i), 0, 0), bp::Vec3(0.5f * float(i) + 0.75f, 1, 1)},
         .userData = uint64_t(i)});
  const bp::FramePairs& frame = broadphase.update();
  const bp::RayHit hit = broadphase.castRay(bp::Vec3(-5, 0.5f, 0.5f), bp::Vec3(1, 0, 0), 100.0f);
  std::printf("consumer: %zu pairs, first hit %u, %d threads\n", frame.pairs.size(), hit.proxy,
              broadphase.threadCount());
  // The error handler: a rejected add returns ProxyId{}, whatever the mode.
  bp::setErrorHandler(&countReport);
  const bp::ProxyId rejected = broadphase.add({.box = bp::Aabb::empty()});
  const bool handled = gReports == 1 && !broadphase.contains(rejected);
  std::printf("consumer: rejected add %s\n", handled ? "reported" : "NOT reported");
  return frame.pairs.size() == size_t(n - 1) && hit.proxy == 0 && handled ? 0 : 1;
}
