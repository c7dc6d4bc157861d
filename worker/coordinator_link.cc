#include "coordinator_link.h"

#include <cmath>

#include <algorithm>
#include <cstdio>

#include "base/clock.h"
#include "base/log.h"

namespace tune {

CoordinatorLink::CoordinatorLink(zmq::context_t& ctx, Options opts) : ctx_(ctx), opts_(std::move(opts)) {}

Status CoordinatorLink::Connect() {
  socket_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  socket_->set(zmq::sockopt::linger, 0);
  socket_->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(kMaxFrameBytes));
  if (opts_.curve_keys) TUNE_RETURN_IF_ERROR(ConfigureCurveClient(*socket_, *opts_.curve_keys, opts_.coordinator_key));
  socket_->connect(opts_.endpoint);
  greeted_ = false;
  liveness_.Heard(NowSeconds());
  Send(Hello{opts_.name, TUNEFARM_VERSION, opts_.devices, opts_.builder_archs, opts_.builder_toolchain});
  log::Info("worker", "connecting", {{"worker", opts_.name}, {"endpoint", opts_.endpoint}});
  return Status::OK();
}

void CoordinatorLink::Drop(const std::string& why) {
  log::Warn("worker", "connection lost; reconnecting",
            {{"worker", opts_.name}, {"reason", why}, {"backoff_s", liveness_.backoff_seconds()}});
  socket_.reset();
  greeted_ = false;
  liveness_.Dropped(NowSeconds());
}

void CoordinatorLink::SendFrame(const std::string& frame) {
  socket_->send(zmq::buffer(frame), zmq::send_flags::dontwait);
  liveness_.Sent(NowSeconds());
}

void CoordinatorLink::Send(Command cmd) {
  Envelope env;
  env.seq = ++seq_;
  env.sender = opts_.name;
  env.command = std::move(cmd);
  SendFrame(EncodeEnvelope(env));
}

void CoordinatorLink::SendResults(Results results) {
  const auto key = std::make_pair(results.unit_id, results.batch);
  Envelope env;
  env.seq = ++seq_;
  env.sender = opts_.name;
  env.command = std::move(results);
  std::string frame = EncodeEnvelope(env);
  if (socket_ && greeted_) SendFrame(frame);
  unacked_[key] = std::move(frame);
}

std::optional<Command> CoordinatorLink::Receive() {
  zmq::message_t msg;
  while (socket_ && socket_->recv(msg, zmq::recv_flags::dontwait)) {
    liveness_.Heard(NowSeconds());
    auto env = DecodeEnvelope(msg.data(), msg.size());
    if (!env.ok()) {
      log::Warn("worker", "dropping a malformed message from the coordinator",
                {{"worker", opts_.name}, {"error", env.status().message()}});
      continue;
    }
    if (const auto* ack = std::get_if<HelloAck>(&env->command)) {
      greeted_ = true;
      liveness_.Greeted();
      liveness_.SetTerms(ack->heartbeat_ms / 1000.0, ack->liveness);
      // Everything not acknowledged on the last link goes again.
      for (const auto& [key, frame] : unacked_) SendFrame(frame);
    } else if (const auto* ack = std::get_if<ResultsAck>(&env->command)) {
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
    } else if (const auto* bye = std::get_if<tune::Disconnect>(&env->command)) {
      log::Warn("worker", "the coordinator disconnected us", {{"worker", opts_.name}, {"reason", bye->reason}});
      Drop(bye->reason);
      liveness_.ReconnectAt(NowSeconds());  // say hello again at once
    }
    return std::move(env->command);
  }
  return std::nullopt;
}

bool CoordinatorLink::KeepAlive(double now) {
  if (!socket_) return false;
  if (liveness_.Gone(now)) {
    Drop("coordinator silent for " + std::to_string(liveness_.SilentFor(now)) + " s");
    return false;
  }
  if (liveness_.HeartbeatDue(now)) Send(Heartbeat{});
  return true;
}

}  // namespace tune
