/// The standard scenes of docs/scenes.md: boxes, motion and rays,
/// generated bit for bit as specified (this file's .cpp is compiled with
/// -ffp-contract=off like the rest of the library). Tests and benchmarks use
/// them; an engine can too, to compare itself with published figures.
#pragma once

#include <broadphase/math/aabb.h>
#include <broadphase/math/ray.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace bp {

enum class SceneKind : uint8_t { uniform, clustered, sizes, staticScene, plane };

inline constexpr SceneKind kAllScenes[] = {SceneKind::uniform, SceneKind::clustered,
                                           SceneKind::sizes, SceneKind::staticScene,
                                           SceneKind::plane};

const char* sceneName(SceneKind kind);  ///< "uniform", ..., "static", "plane"
std::optional<SceneKind> parseScene(std::string_view name);

/// splitmix64 and the float draws of docs/scenes.md.
struct SceneRng {
  uint64_t state;
  explicit SceneRng(uint64_t seed) : state(seed) {}
  uint64_t next();
  float uniform();  ///< [0, 1), 24 random bits
  float normal();   ///< Box-Muller, two uniform() draws
};

struct Scene {
  SceneKind kind = SceneKind::uniform;
  uint32_t n = 0;
  uint64_t seed = 1;
  float worldSide = 0;  ///< L = 4 cbrt(N)
  Vec3 bounds;          ///< the motion domain [0, bounds) per axis
  int frame = 0;

  std::vector<Vec3> centers;
  std::vector<Vec3> extents;
  std::vector<Vec3> velocities;   ///< zero for static boxes
  std::vector<uint8_t> isStatic;  ///< 1: never moves (the `static` scene)
  std::vector<Aabb> boxes;        ///< current exact boxes, index = proxy id

  /// Advances one frame of motion: every moving box moves by its velocity,
  /// reflecting off the domain walls, and its box is recomputed.
  void step();
  /// The motion of step() for boxes [begin, end) only; `frame` is not
  /// advanced. Each box moves on its own, so ranges that cover [0, n) once,
  /// run in any order or at once on several threads, give step()'s boxes bit
  /// for bit (an engine's integration runs this way on its workers).
  void stepRange(uint32_t begin, uint32_t end);
  uint32_t movingCount() const;
};

Scene makeScene(SceneKind kind, uint32_t n, uint64_t seed = 1);

/// The rays of docs/scenes.md for a scene of n boxes: own generator (seed 2),
/// length L/4.
std::vector<Ray> makeRays(uint32_t n, uint32_t count, uint64_t seed = 2);

/// The same rays over another motion domain (Scene::bounds): origins drawn
/// uniformly in [0, bounds) per axis, length max(bounds) / 4. For a cube of
/// side L these are makeRays's rays exactly, so scene `uniform` keeps its
/// reference answers.
std::vector<Ray> makeRaysIn(const Vec3& bounds, uint32_t count, uint64_t seed = 2);

}  // namespace bp
