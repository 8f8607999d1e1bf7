// BudgetGate: the check a cell sweep under a PairBudget makes before each
// outer entry (sweep_kernel.cpp, sweep_kernel_wide.cpp). Internal to the
// library.
//
// Why inside the sweep and not only between cells: one crowded cell of
// identical boxes holds ~N^2 / 2 pairs, and an entry writes at most one pair
// for each entry of the cell (and of its static twin). Checked before each
// entry, a sweep that exceeds the budget holds at most batch() + N pairs
// more than it charged.
//
// The kernels take the gate as a template parameter: NoGate's check is a
// constant, so the sweeps without a budget compile to the same code as
// before.
#pragma once

#include "pairs/pair_budget.h"
#include "pairs/pair_buffer.h"

#include <cstddef>

namespace bp {

struct NoGate {
  template <class Out>
  bool open(Out&) {
    return true;
  }
};

class BudgetGate {
 public:
  BudgetGate(PairBudget& budget, PairBuffer& buffer)
      : budget_(budget), buffer_(buffer), checkpoint_(buffer.charged() + budget.batch()) {}

  // Whether the sweep goes on. Once the buffer grew batch() past its last
  // charge it is settled; false when the budget is exceeded (by this worker
  // or another), and then the buffer is cleared and `out` must not write
  // again. `out` is the kernel's writer, or the buffer itself.
  bool open(PairWriter& out) {
    if (out.size() < checkpoint_ && !budget_.exceeded()) [[likely]]
      return true;
    out.finish();
    if (!settle()) return false;
    out.reload();
    return true;
  }
  bool open(PairBuffer& out) {
    if (out.size() < checkpoint_ && !budget_.exceeded()) [[likely]]
      return true;
    return settle();
  }

 private:
  bool settle() {
    if (!budget_.settle(buffer_)) return false;
    checkpoint_ = buffer_.charged() + budget_.batch();
    return true;
  }

  PairBudget& budget_;
  PairBuffer& buffer_;
  size_t checkpoint_;
};

}  // namespace bp
