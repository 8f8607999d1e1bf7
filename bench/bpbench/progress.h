// A live line on stderr: a bar, a fraction, and whatever the caller says.
// Drawn only when stderr is a terminal, --quiet is off, and the work has run
// for more than a second (short runs stay silent); redrawn at most 10 times
// a second.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

namespace bpbench {

class Progress {
 public:
  Progress(std::string label, bool quiet, double showAfterSeconds = 1.0);
  ~Progress();  // clears the line

  // fraction in [0, 1]; text is shown after the bar.
  void update(double fraction, const std::string& text);
  void finish();
  double elapsed() const;

  // Runs work() on this thread while a helper thread keeps the line alive
  // with `text` and a clock (for long single calls: a structure's build).
  void during(const std::string& text, const std::function<void()>& work);

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  double showAfter_;
  std::chrono::steady_clock::time_point start_, last_;
  std::mutex mutex_;
};

bool stderrIsTerminal();

}  // namespace bpbench
