#include "coordinator_link.h"

#include <cmath>

#include <algorithm>
#include <cstdio>

#include "base/clock.h"
#include "base/log.h"

namespace tune {

CoordinatorLink::CoordinatorLink(zmq::context_t& ctx, Options opts)
    : ctx_(ctx), opts_(std::move(opts)), framer_(opts_.name) {}

Status CoordinatorLink::Connect() {
  auto link = Link::Dealer(ctx_, opts_.curve_keys ? &*opts_.curve_keys : nullptr, opts_.coordinator_key);
  if (!link.ok()) return link.status();
  TUNE_RETURN_IF_ERROR((*link)->Connect(opts_.endpoint));
  link_ = std::move(link).value();
  greeted_ = false;
  liveness_.Heard(NowSeconds());
  Send(Hello{opts_.name, TUNEFARM_VERSION, opts_.devices, opts_.builder_archs, opts_.builder_toolchain});
  log::Info("worker", "connecting", {{"worker", opts_.name}, {"endpoint", opts_.endpoint}});
  return Status::OK();
}

void CoordinatorLink::Drop(const std::string& why) {
  log::Warn("worker", "connection lost; reconnecting",
            {{"worker", opts_.name}, {"reason", why}, {"backoff_s", liveness_.backoff_seconds()}});
  link_.reset();
  greeted_ = false;
  liveness_.Dropped(NowSeconds());
}

void CoordinatorLink::SendFrame(const std::string& frame) {
  // A full queue drops the frame, as a lost one: results go again until
  // acknowledged, heartbeats and asks are sent again anyway.
  (void)link_->SendFrame(frame);
  liveness_.Sent(NowSeconds());
}

void CoordinatorLink::Send(Command cmd) { SendFrame(framer_.Frame(std::move(cmd))); }

void CoordinatorLink::SendResults(Results results) {
  const auto key = std::make_pair(results.unit_id, results.batch);
  std::string frame = framer_.Frame(std::move(results));
  if (link_ && greeted_) SendFrame(frame);
  unacked_[key] = std::move(frame);
}

std::optional<Command> CoordinatorLink::Receive() {
  while (link_) {
    auto got = link_->ReceiveEnvelope();
    if (!got) break;
    liveness_.Heard(NowSeconds());
    if (!got->ok()) {
      log::Warn("worker", "dropping a malformed message from the coordinator",
                {{"worker", opts_.name}, {"error", got->status().message()}});
      continue;
    }
    Envelope env = std::move(*got).value();
    if (const auto* ack = std::get_if<HelloAck>(&env.command)) {
      greeted_ = true;
      liveness_.Greeted();
      liveness_.SetTerms(ack->heartbeat_ms / 1000.0, ack->liveness);
      // Everything not acknowledged on the last link goes again.
      for (const auto& [key, frame] : unacked_) SendFrame(frame);
    } else if (const auto* ack = std::get_if<ResultsAck>(&env.command)) {
      unacked_.erase({ack->unit_id, ack->batch});
      if (!ack->refused.empty()) {
        log::Warn("worker", "results refused by the coordinator",
                  {{"worker", opts_.name}, {"unit", ack->unit_id}, {"error", ack->refused}});
      }
      if (std::abs(ack->clock_skew_seconds) > kClockSkewWarnSeconds && !told_skew_) {
        told_skew_ = true;
        log::Warn("worker", "this host's clock is off the coordinator's (its rows are stored with the coordinator's time)",
                  {{"worker", opts_.name}, {"skew_seconds", ack->clock_skew_seconds}});
      }
    } else if (const auto* bye = std::get_if<tune::Disconnect>(&env.command)) {
      log::Warn("worker", "the coordinator disconnected us", {{"worker", opts_.name}, {"reason", bye->reason}});
      const bool was_greeted = greeted_;
      Drop(bye->reason);
      // A coordinator that knew this link asks for a new hello: said at
      // once. A refused hello (a live session of this name, a key it does
      // not admit) waits the backoff, which doubles while it is refused.
      if (was_greeted) liveness_.ReconnectAt(NowSeconds());
    }
    return std::move(env.command);
  }
  return std::nullopt;
}

bool CoordinatorLink::KeepAlive(double now) {
  if (!link_) return false;
  if (liveness_.Gone(now)) {
    Drop("coordinator silent for " + std::to_string(liveness_.SilentFor(now)) + " s");
    return false;
  }
  if (liveness_.HeartbeatDue(now)) Send(Heartbeat{});
  return true;
}

}  // namespace tune
