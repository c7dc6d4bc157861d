#include "base/clock.h"

#include <chrono>
#include <ctime>

namespace tune {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t NowUnixSeconds() { return static_cast<int64_t>(std::time(nullptr)); }

double NowUnixSecondsPrecise() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace tune
