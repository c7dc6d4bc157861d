// The systemd readiness protocol (sd_notify(3)), for Type=notify units: a
// datagram to $NOTIFY_SOCKET. Written out rather than linking libsystemd:
// the farm runs without systemd too, and the protocol is one sendmsg.
#pragma once

#include <string>

namespace tune {

// Sends `state` ("READY=1\nSTATUS=...") to the service manager when
// $NOTIFY_SOCKET names one (a path, or "@name" in the abstract namespace);
// does nothing otherwise. False when a socket was named and the send failed.
bool NotifyServiceManager(const std::string& state);

}  // namespace tune
