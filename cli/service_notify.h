// The service manager's side of a farm process, for Type=notify units
// (sd_notify(3) from libsystemd): readiness, status, stopping, and the
// watchdog. Without systemd ($NOTIFY_SOCKET unset) every call does nothing.
#pragma once

#include <limits>
#include <string>

namespace tune {

// Sends `state` ("READY=1\nSTATUS=...") to the service manager. False when
// one is named and the send failed.
bool NotifyServiceManager(const std::string& state);

// WATCHDOG=1 at half the unit's WatchdogSec, from whatever loop calls
// Alive() on every turn: a loop that stops turning stops the pings, and the
// service manager restarts the process. Not thread-safe: one loop calls it.
class ServiceWatchdog {
 public:
  // Reads $WATCHDOG_USEC (sd_watchdog_enabled); off when unset.
  ServiceWatchdog();
  bool enabled() const { return interval_ > 0; }
  void Alive();

 private:
  double interval_ = 0;  // seconds between pings: half the timeout
  double last_ = -std::numeric_limits<double>::infinity();  // NowSeconds of the last ping
};

}  // namespace tune
