// Majordomo's heartbeating as a value both ends of a link keep (the worker's
// CoordinatorLink, the coordinator's WorkerSessions): a peer silent for
// `liveness` heartbeats is gone; a side that sent nothing for a heartbeat
// sends one; a dropped link is opened again after a backoff that doubles
// from kFirstBackoffSeconds to kMaxBackoffSeconds and starts again once a
// hello is answered. Every time is the caller's `now` (NowSeconds, or a
// test's), so the rules are tested without waiting.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tune {

class Liveness {
 public:
  static constexpr double kFirstBackoffSeconds = 0.25;
  static constexpr double kMaxBackoffSeconds = 8;

  // The rules on their own, for a side that keeps its times elsewhere.
  static bool Gone(double last_heard, double now, double heartbeat_seconds, uint32_t liveness) {
    return now - last_heard > heartbeat_seconds * liveness;
  }
  static bool HeartbeatDue(double last_sent, double now, double heartbeat_seconds) {
    return now - last_sent >= heartbeat_seconds;
  }

  // The peer's terms (a HelloAck's): the heartbeat interval and how many
  // may be missed.
  void SetTerms(double heartbeat_seconds, uint32_t liveness) {
    heartbeat_seconds_ = heartbeat_seconds;
    liveness_ = liveness;
  }
  double heartbeat_seconds() const { return heartbeat_seconds_; }
  uint32_t liveness() const { return liveness_; }

  void Heard(double now) { last_heard_ = now; }
  void Sent(double now) { last_sent_ = now; }
  double SilentFor(double now) const { return now - last_heard_; }
  bool Gone(double now) const { return Gone(last_heard_, now, heartbeat_seconds_, liveness_); }
  bool HeartbeatDue(double now) const { return HeartbeatDue(last_sent_, now, heartbeat_seconds_); }

  // The link dropped at `now`: the next connect is due after the current
  // backoff, returned; the one after that waits twice as long, up to the
  // maximum.
  double Dropped(double now) {
    const double wait = backoff_;
    reconnect_at_ = now + wait;
    backoff_ = std::min(backoff_ * 2, kMaxBackoffSeconds);
    return wait;
  }
  // A hello was answered: the next drop waits the first backoff again.
  void Greeted() { backoff_ = kFirstBackoffSeconds; }
  // The peer asked for a new hello: the next connect is due at `now`.
  void ReconnectAt(double now) { reconnect_at_ = now; }
  bool ReconnectDue(double now) const { return now >= reconnect_at_; }
  double backoff_seconds() const { return backoff_; }

 private:
  double heartbeat_seconds_ = 1.0;
  uint32_t liveness_ = 5;
  double last_heard_ = 0, last_sent_ = 0;
  double backoff_ = kFirstBackoffSeconds, reconnect_at_ = 0;
};

}  // namespace tune
