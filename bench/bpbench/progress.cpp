#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <thread>

namespace bpbench {

bool stderrIsTerminal() { return ::isatty(2) == 1; }

Progress::Progress(std::string label, bool quiet, double showAfterSeconds)
    : label_(std::move(label)),
      enabled_(!quiet && stderrIsTerminal()),
      showAfter_(showAfterSeconds),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::~Progress() { finish(); }

double Progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(double fraction, const std::string& text) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - start_).count() < showAfter_) return;
  if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  constexpr int kWidth = 24;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int full = static_cast<int>(fraction * kWidth + 0.5);
  std::string bar(static_cast<size_t>(full), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r\033[2K%s [%s] %3d%%  %s", label_.c_str(), bar.c_str(),
               static_cast<int>(fraction * 100 + 0.5), text.c_str());
  std::fflush(stderr);
}

void Progress::during(const std::string& text, const std::function<void()>& work) {
  if (!enabled_) {
    work();
    return;
  }
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread ticker([&] {
    std::unique_lock<std::mutex> lock(m);
    while (!cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return done; })) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      char buf[64];
      std::snprintf(buf, sizeof buf, "  %.1f s", s);
      update(0, text + buf);
    }
  });
  try {
    work();
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(m);
      done = true;
    }
    cv.notify_one();
    ticker.join();
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(m);
    done = true;
  }
  cv.notify_one();
  ticker.join();
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[2K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace bpbench
