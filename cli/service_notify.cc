#include "service_notify.h"

#include <systemd/sd-daemon.h>

#include <cstdint>

#include "base/clock.h"

namespace tune {

bool NotifyServiceManager(const std::string& state) { return sd_notify(0, state.c_str()) >= 0; }

ServiceWatchdog::ServiceWatchdog() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) interval_ = static_cast<double>(usec) / 2e6;
}

void ServiceWatchdog::Alive() {
  if (!enabled()) return;
  const double now = NowSeconds();
  if (now - last_ < interval_) return;
  last_ = now;
  sd_notify(0, "WATCHDOG=1");
}

}  // namespace tune
