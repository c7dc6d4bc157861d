#include "base/clock.h"

#include <chrono>

namespace tune {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace tune
