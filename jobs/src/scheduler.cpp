#include <broadphase/jobs/scheduler.h>

#include <tbb/info.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace bp {

Scheduler::Scheduler(int threads) {
  if (threads < 0) {
    const std::string message = "bp::Scheduler: thread count " + std::to_string(threads) +
                                " is negative (use 0 for all hardware threads)";
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
    throw std::invalid_argument(message);
#else
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    std::abort();
#endif
  }
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
