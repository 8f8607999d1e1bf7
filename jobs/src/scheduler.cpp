#include <broadphase/jobs/scheduler.h>

#include <tbb/info.h>

#include <string>

namespace bp {

Scheduler::Scheduler(int threads) {
  if (threads < 0)
    throw std::invalid_argument("bp::Scheduler: thread count " + std::to_string(threads) +
                                " is negative (use 0 for all hardware threads)");
  threads_ = threads == 0 ? tbb::info::default_concurrency() : threads;
  if (threads_ > tbb::info::default_concurrency())
    parallelism_ = std::make_unique<tbb::global_control>(
        tbb::global_control::max_allowed_parallelism, size_t(threads_));
  owned_ = std::make_unique<tbb::task_arena>(threads_);
  owned_->initialize();
  arena_ = owned_.get();
}

Scheduler::Scheduler(tbb::task_arena& shared) : arena_(&shared) {
  if (!shared.is_active()) shared.initialize();
  threads_ = shared.max_concurrency();
}

}  // namespace bp
