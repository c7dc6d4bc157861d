#include "submit_rate.h"

namespace tune {
namespace {

constexpr double kWindowSeconds = 60;

}  // namespace

Status SubmitRate::Admit(const std::string& client, double now) {
  if (per_minute_ == 0) return Status::OK();
  ForgetIdle(now);
  std::deque<double>& times = recent_[client];
  while (!times.empty() && now - times.front() >= kWindowSeconds) times.pop_front();
  if (times.size() >= per_minute_) {
    return Status::Error("client " + client + ": " + std::to_string(times.size()) +
                         " sweeps submitted in the last 60 s, at the limit of " + std::to_string(per_minute_) +
                         " sweeps per client per minute (--max-sweeps-per-minute); submit again in " +
                         std::to_string(static_cast<int>(kWindowSeconds - (now - times.front())) + 1) + " s");
  }
  times.push_back(now);
  return Status::OK();
}

void SubmitRate::ForgetIdle(double now) {
  // A pass over every client once a window: each entry is visited once per
  // minute however many submits arrive.
  if (now - last_sweep_ < kWindowSeconds) return;
  last_sweep_ = now;
  for (auto it = recent_.begin(); it != recent_.end();) {
    if (it->second.empty() || now - it->second.back() >= kWindowSeconds) it = recent_.erase(it);
    else ++it;
  }
}

}  // namespace tune
