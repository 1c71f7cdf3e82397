#pragma once
// The one clock of weft's timers: seconds on the steady clock (monotonic; its origin is
// arbitrary, so only differences mean anything).
#include <chrono>

namespace weft::clock {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace weft::clock
