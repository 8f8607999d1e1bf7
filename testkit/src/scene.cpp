// Bit-exact implementation of docs/scenes.md. Every float
// expression is written in the order the spec states it; do not "simplify".
#include <broadphase/testkit/scene.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace bp {

const char* sceneName(SceneKind kind) {
  switch (kind) {
    case SceneKind::uniform: return "uniform";
    case SceneKind::clustered: return "clustered";
    case SceneKind::sizes: return "sizes";
    case SceneKind::staticScene: return "static";
    case SceneKind::plane: return "plane";
  }
  return "?";
}

std::optional<SceneKind> parseScene(std::string_view name) {
  for (SceneKind k : kAllScenes)
    if (name == sceneName(k)) return k;
  return std::nullopt;
}

uint64_t SceneRng::next() {
  state += 0x9E3779B97F4A7C15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float SceneRng::uniform() { return float(next() >> 40) * 0x1p-24f; }

float SceneRng::normal() {
  float u1 = uniform();
  u1 = std::max(u1, 0x1p-24f);
  const float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530718f * u2);
}

namespace {

float sceneSide(uint32_t n) { return 4.0f * std::cbrt(float(n)); }

Vec3 drawUniformExtent(SceneRng& rng) {
  const float x = 1.0f + 2.0f * rng.uniform();
  const float y = 1.0f + 2.0f * rng.uniform();
  const float z = 1.0f + 2.0f * rng.uniform();
  return {x, y, z};
}

Vec3 drawPoint(SceneRng& rng, float side) {
  const float x = rng.uniform() * side;
  const float y = rng.uniform() * side;
  const float z = rng.uniform() * side;
  return {x, y, z};
}

Aabb boxOf(const Vec3& c, const Vec3& e) {
  Aabb b;
  for (int a = 0; a < 3; ++a) {
    b.min[a] = c[a] - 0.5f * e[a];
    b.max[a] = c[a] + 0.5f * e[a];
  }
  return b;
}

}  // namespace

Scene makeScene(SceneKind kind, uint32_t n, uint64_t seed) {
  Scene s;
  s.kind = kind;
  s.n = n;
  s.seed = seed;
  const float L = sceneSide(n);
  s.worldSide = L;
  s.bounds = Vec3(L, L, L);
  s.centers.resize(n);
  s.extents.resize(n);
  s.velocities.assign(n, Vec3::Zero());
  s.isStatic.assign(n, 0);
  SceneRng rng(seed);

  switch (kind) {
    case SceneKind::uniform:
    case SceneKind::staticScene:
      for (uint32_t i = 0; i < n; ++i) {
        s.centers[i] = drawPoint(rng, L);
        s.extents[i] = drawUniformExtent(rng);
        if (kind == SceneKind::staticScene) s.isStatic[i] = (i % 10 != 0);
      }
      break;
    case SceneKind::clustered: {
      Vec3 clusters[16];
      for (Vec3& c : clusters) c = drawPoint(rng, L);
      for (uint32_t i = 0; i < n; ++i) {
        const int k = int(std::floor(rng.uniform() * 16.0f));
        Vec3 c;
        for (int a = 0; a < 3; ++a) {
          const float g = rng.normal();
          c[a] = clusters[k][a] + ((g * L) / 32.0f);
        }
        s.centers[i] = c;
        s.extents[i] = drawUniformExtent(rng);
      }
      const float below = std::nextafter(L, 0.0f);
      for (Vec3& c : s.centers)
        for (int a = 0; a < 3; ++a) {
          if (c[a] < 0.0f)
            c[a] = 0.0f;
          else if (c[a] >= L)
            c[a] = below;
        }
      break;
    }
    case SceneKind::sizes:
      for (uint32_t i = 0; i < n; ++i) {
        s.centers[i] = drawPoint(rng, L);
        const float size = std::min(L / 4.0f, std::pow(1.0f - rng.uniform(), -1.0f / 2.5f));
        const float m = 0.5f + rng.uniform();
        s.extents[i] = Vec3(size * m, size * m, size * m);
      }
      break;
    case SceneKind::plane:
      s.bounds = Vec3(L * 16.0f, 4.0f, L * 16.0f);
      for (uint32_t i = 0; i < n; ++i) {
        const float x = rng.uniform() * L * 16.0f;
        const float y = rng.uniform() * 4.0f;
        const float z = rng.uniform() * L * 16.0f;
        s.centers[i] = Vec3(x, y, z);
        s.extents[i] = drawUniformExtent(rng);
      }
      break;
  }

  for (uint32_t i = 0; i < n; ++i) {
    if (s.isStatic[i]) continue;
    const float x = (rng.uniform() - 0.5f) * 0.4f;
    const float y = (rng.uniform() - 0.5f) * 0.4f;
    const float z = (rng.uniform() - 0.5f) * 0.4f;
    s.velocities[i] = Vec3(x, y, z);
  }

  s.boxes.resize(n);
  for (uint32_t i = 0; i < n; ++i) s.boxes[i] = boxOf(s.centers[i], s.extents[i]);
  return s;
}

void Scene::step() {
  stepRange(0, n);
  ++frame;
}

void Scene::stepRange(uint32_t begin, uint32_t end) {
  for (uint32_t i = begin; i < end; ++i) {
    if (isStatic[i]) continue;
    Vec3& c = centers[i];
    Vec3& v = velocities[i];
    for (int a = 0; a < 3; ++a) {
      float x = c[a] + v[a];
      if (x < 0.0f) {
        x = -x;
        v[a] = -v[a];
      } else if (x >= bounds[a]) {
        x = 2.0f * bounds[a] - x;
        v[a] = -v[a];
      }
      c[a] = x;
    }
    boxes[i] = boxOf(c, extents[i]);
  }
}

uint32_t Scene::movingCount() const {
  return static_cast<uint32_t>(std::count(isStatic.begin(), isStatic.end(), uint8_t(0)));
}

std::vector<Ray> makeRays(uint32_t n, uint32_t count, uint64_t seed) {
  return makeRaysIn(Vec3::Constant(sceneSide(n)), count, seed);
}

std::vector<Ray> makeRaysIn(const Vec3& bounds, uint32_t count, uint64_t seed) {
  const float length = bounds.maxCoeff() / 4.0f;
  SceneRng rng(seed);
  std::vector<Ray> rays(count);
  for (Ray& r : rays) {
    const float x = rng.uniform() * bounds.x();
    const float y = rng.uniform() * bounds.y();
    const float z = rng.uniform() * bounds.z();
    const Vec3 o(x, y, z);
    const float dx = rng.normal();
    const float dy = rng.normal();
    const float dz = rng.normal();
    const float len = std::sqrt(dx * dx + dy * dy + dz * dz);
    Vec3 d = len == 0.0f ? Vec3(1.0f, 0.0f, 0.0f) : Vec3(dx / len, dy / len, dz / len);
    r.origin = o;
    r.direction = d;
    r.maxT = length;
    r.invDirection = Vec3(1.0f / d.x(), 1.0f / d.y(), 1.0f / d.z());
  }
  return rays;
}

}  // namespace bp
