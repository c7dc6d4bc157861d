#include "image_service.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "base/limits.h"
#include "build_service.h"

namespace tune {

std::string ImageService::Fault(const std::string& identity, const WorkerSession& session,
                                const ImageRequest& request, double now, Ingestion::ImageGrant* grant) {
  const double devices = double(std::max<size_t>(session.devices.size(), 1));
  const double burst = kImageRequestBurstPerDevice * devices;
  auto [it, added] = buckets_.try_emplace(identity, Bucket{burst, now});
  Bucket& b = it->second;
  b.tokens = std::min(burst, b.tokens + (now - b.at) * kImageRequestsPerSecondPerDevice * devices);
  b.at = now;
  if (b.tokens < 1)
    return "more than " + std::to_string(int(kImageRequestsPerSecondPerDevice * devices)) +
           " image requests a second";
  b.tokens -= 1;
  auto granted = ingestion_->GrantImages(request.unit_id, session);
  if (!granted) return "unit " + std::to_string(request.unit_id) + " is not leased to it";
  const LeasedUnit& unit = *granted->unit;
  if (request.sweep_id != unit.sweep_id)
    return "sweep '" + request.sweep_id + "' for unit " + std::to_string(request.unit_id) + " of sweep '" +
           unit.sweep_id + "'";
  if (request.wants.size() > unit.configs.size())
    return std::to_string(request.wants.size()) + " images asked for a unit of " +
           std::to_string(unit.configs.size()) + " configs";
  for (size_t i = 0; i < request.wants.size(); ++i) {
    const ImageWant& w = request.wants[i];
    const std::string where = "want " + std::to_string(i) + ": ";
    if (!unit.configs.count(w.config_id)) return where + "config " + w.config_id + " that the unit does not hold";
    if (w.dtype != unit.dtype) return where + "dtype " + w.dtype + " in a unit of " + unit.dtype;
    if (!granted->archs.count(w.arch)) return where + "arch '" + w.arch + "' that its devices are not";
    if (!granted->kernel_hashes.count(w.kernel_hash))
      return where + "kernel hash '" + w.kernel_hash + "' of another op or toolchain";
  }
  *grant = std::move(*granted);
  return "";
}

void ImageService::Refuse(const std::string& identity, const WorkerSession& session, const ImageRequest& request,
                          const std::string& why) {
  counters_->image_requests_refused++;
  const std::string who = "worker " + session.name + " (" + session.Lessee() + ")";
  CoordinatorLog(log::Level::kWarn, "refused image request",
                 {{"sweep", request.sweep_id}, {"unit", request.unit_id}, {"worker", who}, {"error", why}});
  ImageReply reply;
  reply.sweep_id = request.sweep_id;
  reply.unit_id = request.unit_id;
  reply.missing = static_cast<uint32_t>(std::min<size_t>(request.wants.size(), UINT32_MAX));
  reply.refused = "image request of " + who + " refused: " + why;
  link_->Send(identity, std::move(reply));
  if (sessions_->NoteViolation(identity))
    link_->Disconnect(identity, std::to_string(kMaxViolations) + " requests refused (results or images)");
}

void ImageService::AnswerNothing(const std::string& identity, const ImageRequest& request) {
  ImageReply reply;
  reply.sweep_id = request.sweep_id;
  reply.unit_id = request.unit_id;
  reply.missing = static_cast<uint32_t>(std::min<size_t>(request.wants.size(), UINT32_MAX));
  link_->Send(identity, std::move(reply));
}

void ImageService::Handle(const std::string& identity, const WorkerSession& session, const ImageRequest& request,
                          double now) {
  // Late, not hostile: the unit's sweep ended (its leases are forgotten).
  if (!ingestion_->SweepRunning(request.sweep_id) && !ingestion_->GrantImages(request.unit_id, session))
    return AnswerNothing(identity, request);
  Ingestion::ImageGrant grant;
  if (std::string why = Fault(identity, session, request, now, &grant); !why.empty())
    return Refuse(identity, session, request, why);
  // Answered only for a lease held now, a few times at most, one at a time:
  // a peer cannot make the coordinator read and hold a unit's images over
  // and over.
  const std::pair<std::string, uint64_t> key{identity, request.unit_id};
  if (!ingestion_->HoldsNow(identity, request.unit_id) || in_flight_.count(key) ||
      replies_[key] >= kMaxImageRepliesPerLease)
    return AnswerNothing(identity, request);
  ++replies_[key];
  // Each key once, in the order asked.
  std::vector<ImageWant> wants;
  std::set<std::string> keys;
  Open open{request.sweep_id, grant.unit->op, {}};
  for (const ImageWant& w : request.wants)
    if (keys.insert(w.Key()).second) {
      wants.push_back(w);
      open.wants.emplace_back(w, grant.unit->configs.at(w.config_id));
    }
  in_flight_.insert(key);
  Serve(identity, request.sweep_id, request.unit_id, request.wants.size(), std::move(wants), std::move(open), true);
}

void ImageService::Serve(const std::string& identity, const std::string& sweep_id, uint64_t unit_id, size_t asked,
                         std::vector<ImageWant> wants, Open open, bool first) {
  reader_.Post([this, identity, sweep_id, unit_id, asked, first, wants = std::move(wants),
                open = std::move(open)]() mutable -> OffLoop::Completion {
    auto reply = std::make_shared<ImageReply>();
    reply->sweep_id = sweep_id;
    reply->unit_id = unit_id;
    uint64_t bytes = 0;
    for (const ImageWant& w : wants) {
      auto k = store_->GetKernel(w.kernel_hash, w.config_id, w.dtype, w.arch);
      // Two keys' word, or a builder's on the builder allow-list now, and no
      // conflict: never one worker's alone (the asker's included), and
      // never past the reply's bound (compiled instead).
      if (!k.ok() || bytes + k->image.size() > kMaxImageReplyBytes) continue;
      const bool built = is_builder_ && k->conflicts.empty() &&
                         std::any_of(k->witnesses.begin(), k->witnesses.end(), [&](const std::string& w) {
                           const std::string key = BuilderKeyOf(w);
                           return !key.empty() && is_builder_(key);
                         });
      if (!k->Corroborated() && !built) continue;
      bytes += k->image.size();
      KernelImage served = std::move(k).value();
      served.witnesses.clear();
      served.conflicts.clear();
      reply->images.push_back(std::move(served));
    }
    reply->missing = static_cast<uint32_t>(std::min<size_t>(asked - std::min(asked, reply->images.size()), UINT32_MAX));
    std::set<std::string> served;
    for (const KernelImage& k : reply->images) served.insert(k.Key());
    std::erase_if(open.wants, [&](const auto& w) { return served.count(w.first.Key()) > 0; });
    return [this, identity, unit_id, first, reply, open = std::move(open)]() mutable {
      const std::pair<std::string, uint64_t> key{identity, unit_id};
      if (first) in_flight_.erase(key);
      if (!ingestion_->HoldsNow(identity, unit_id)) open.wants.clear();
      // The first reply says what is missing; a later one only brings images.
      if (first || !reply->images.empty()) {
        counters_->images_served += reply->images.size();
        link_->Send(identity, std::move(*reply));
      }
      if (first) {
        open.workers_half = open.wants.size() / 2;
        if (open.wants.empty()) open_.erase(key);
        else open_[key] = std::move(open);
      } else if (auto it = open_.find(key); it != open_.end()) {  // what a later reply served is closed
        std::set<std::string> left;
        for (const auto& w : open.wants) left.insert(w.first.Key());
        std::erase_if(it->second.wants, [&](const auto& w) { return !left.count(w.first.Key()); });
        if (it->second.wants.empty()) open_.erase(it);
      }
    };
  });
}

std::vector<ImageService::Unserved> ImageService::UnservedConfigs(size_t most) const {
  std::vector<Unserved> out;
  std::set<std::string> compiling;  // peers whose first unit was seen: the one their pools compile now
  for (const auto& [key, open] : open_) {
    // A worker compiles its units in lease order, each from its front: of
    // the first, builders take the back half (to meet it midway, not to
    // build what it built already); of the rest, everything.
    const size_t workers = compiling.insert(key.first).second ? std::min(open.workers_half, open.wants.size()) : 0;
    for (size_t i = open.wants.size(); i > workers; --i) {
      if (out.size() >= most) return out;
      const auto& [want, config] = open.wants[i - 1];
      out.push_back(Unserved{open.sweep_id, open.op, want.dtype, want.arch, want.kernel_hash, config});
    }
  }
  return out;
}

void ImageService::Stored(const std::set<std::string>& keys) {
  for (const auto& [key, open] : open_) {
    if (in_flight_.count(key)) continue;  // its first reply is being read
    Open some{open.sweep_id, open.op, {}};
    std::vector<ImageWant> wants;
    for (const auto& w : open.wants)
      if (keys.count(w.first.Key())) {
        wants.push_back(w.first);
        some.wants.push_back(w);
      }
    if (!wants.empty())
      Serve(key.first, open.sweep_id, key.second, wants.size(), std::move(wants), std::move(some), false);
  }
}

void ImageService::Tick() {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    if (sessions_->Find(it->first)) ++it;
    else it = buckets_.erase(it);
  }
  for (auto it = replies_.begin(); it != replies_.end();) {
    if (ingestion_->HoldsNow(it->first.first, it->first.second)) ++it;
    else it = replies_.erase(it);
  }
  for (auto it = open_.begin(); it != open_.end();) {
    if (ingestion_->HoldsNow(it->first.first, it->first.second)) ++it;
    else it = open_.erase(it);
  }
}

}  // namespace tune
