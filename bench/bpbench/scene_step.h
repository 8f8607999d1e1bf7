// The scene's motion between two timed frames, as an engine's integration
// runs before its broadphase: on the frame's workers. Untimed.
//
// Why it matters: a frame that starts after a long serial stretch finds
// oneTBB's workers asleep, and waking one costs the calling thread 7-15 us
// on this project's VMs (docs/threading.md, "Sleeping workers"). Stepped
// on the calling thread, whether a frame began with awake workers would
// depend on the scene: a batch of 10^5 moves has its handles staged in
// parallel just before the frame (the workers wake there, untimed),
// static's 10^4 in one inline chunk (they sleep). Stepping on the workers treats every scene alike,
// as Box2D's and Jolt's steps reach their broadphase: right after parallel work on the same
// workers. `--serial-step` gives the other case for every scene.
#pragma once

#include <broadphase/jobs/scheduler.h>
#include <broadphase/testkit/scene.h>

namespace bpbench {

// One step of scene.step(), bit for bit: on the scheduler's workers, or,
// when `serial`, on the calling thread alone.
void stepScene(bp::Scene& scene, bp::Scheduler& scheduler, bool serial);

}  // namespace bpbench
