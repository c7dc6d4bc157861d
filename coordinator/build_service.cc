#include "build_service.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <tuple>

#include "base/text.h"
#include "coordinator.h"
#include "base/target.h"

namespace tune {
namespace {

constexpr std::string_view kBuilderWitness = "builder:";

// Configs settled (stored, or failed on a builder) remembered at most: past
// it the memory starts again, and the store says what is stored.
constexpr size_t kMaxSettled = 1u << 20;
// Uncut configs one request looks at, at most: the scan runs on the loop.
constexpr size_t kMaxScannedPerRequest = 1u << 16;
// When a builder with nothing to build asks again: it times nothing, and
// each ask scans the pools on the loop.
constexpr uint32_t kBuilderRetryMs = 250;

}  // namespace

std::string BuilderWitness(const std::string& z85_key) {
  return z85_key.empty() ? std::string() : std::string(kBuilderWitness) + z85_key;
}

std::string BuilderKeyOf(const std::string& witness) {
  return witness.starts_with(kBuilderWitness) ? witness.substr(kBuilderWitness.size()) : std::string();
}

std::string CheckBuilderHello(const Hello& hello) {
  for (const std::string& arch : hello.builder_archs) {
    if (!IsCudaArch(arch))
      return "builder architecture '" + arch + "' is not sm_ and two or three digits (sm_90, sm_90a)";
  }
  if (hello.builder_toolchain.empty()) return "a builder's hello names no toolchain";
  if (!hello.devices.empty()) return "a builder's hello names devices";
  return "";
}

bool BuilderBuildsFor(const std::vector<std::string>& archs, const std::string& arch) {
  return std::any_of(archs.begin(), archs.end(), [&](const std::string& a) { return ArchCapability(a) == ArchCapability(arch); });
}

std::vector<BuildService::Candidate> BuildService::Candidates(const WorkerSession& builder, size_t wanted,
                                                             double now, int64_t now_unix) {
  std::vector<Candidate> out;
  std::set<std::string> keys;
  // The pools of one (sweep, op, dtype) share their configs over shapes:
  // each is scanned once.
  std::set<std::tuple<const void*, size_t, std::string>> scanned_pools;
  size_t scanned = 0;
  // What devices hold and will compile themselves unless built first: each
  // unit's from its back.
  auto spec_of = [&](const std::string& sweep_id, const std::string& op) -> const OpSpec* {
    const SweepState* sweep = scheduler_->FindSweep(sweep_id);
    if (!sweep || sweep->state != RunState::kRunning) return nullptr;
    for (const OpSpec& s : sweep->specs)
      if (s.name == op) return &s;
    return nullptr;
  };
  if (images_) {
    for (ImageService::Unserved& u : images_->UnservedConfigs(kBuildCandidatesPerRequest)) {
      const OpSpec* spec = spec_of(u.sweep_id, u.op);
      if (!spec || spec->program || spec->HostDigested() || !BuilderBuildsFor(builder.builder_archs, u.arch)) continue;
      // Its toolchain's hash: an image of another toolchain is not the one asked for.
      if (hashes_[u.sweep_id].Of(*spec, builder.builder_toolchain) != u.kernel_hash) continue;
      Candidate c{u.sweep_id, u.op, u.dtype, u.arch, u.kernel_hash, std::move(u.config)};
      const std::string key = c.Key();
      if (handed_.count(key) || settled_.count(key) || !keys.insert(key).second) continue;
      out.push_back(std::move(c));
    }
    if (out.size() >= wanted) return out;
  }
  // Higher priorities first, as the scheduler leases them.
  std::set<uint32_t, std::greater<>> levels;
  for (const auto& [id, sweep] : scheduler_->sweeps())
    if (sweep.state == RunState::kRunning) levels.insert(sweep.submit.priority);
  for (uint32_t level : levels) {
    for (const auto& [model, pools] : scheduler_->pools()) {
      const auto device = scheduler_->models().find(model);
      // Another toolchain makes another kernel hash: no device of the
      // model would ever ask for the image.
      if (device == scheduler_->models().end() || TargetOf(device->second).toolchain != builder.builder_toolchain) continue;
      // A searched key proposes only as its devices lease: ask it now, as
      // far ahead as the builder asks, so that what it proposes next waits
      // uncut for a builder.
      scheduler_->ProposeAhead(model, now, now_unix, wanted);
      for (const ConfigPool& pool : pools) {
        const SweepState* sweep = scheduler_->FindSweep(pool.sweep_id);
        if (!sweep || sweep->state != RunState::kRunning || sweep->submit.priority != level || !pool.configs) continue;
        const OpSpec* spec = spec_of(pool.sweep_id, pool.op);
        // Program ops build in their own process; a host digest joins the
        // hash only where the compile runs.
        if (!spec || spec->program || spec->HostDigested()) continue;
        const std::string arch = CudaArchOf(*spec, device->second.cc_major, device->second.cc_minor);
        if (!BuilderBuildsFor(builder.builder_archs, arch)) continue;
        const std::string& hash = hashes_[pool.sweep_id].Of(*spec, builder.builder_toolchain);
        if (!scanned_pools.emplace(pool.configs.get(), pool.next, pool.dtype).second) continue;
        // A searched pool is a batch that devices lease from its front:
        // builders take it from the back, where they are furthest ahead.
        const size_t left = pool.configs->size() - std::min(pool.next, pool.configs->size());
        for (size_t j = 0; j < left; ++j) {
          if (++scanned > kMaxScannedPerRequest) return out;
          const size_t i = pool.search ? pool.configs->size() - 1 - j : pool.next + j;
          Candidate c{pool.sweep_id, pool.op, pool.dtype, arch, hash, (*pool.configs)[i]};
          const std::string key = c.Key();
          if (handed_.count(key) || settled_.count(key) || !keys.insert(key).second) continue;
          out.push_back(std::move(c));
          if (out.size() >= kBuildCandidatesPerRequest) return out;
        }
      }
    }
  }
  return out;
}

void BuildService::Request(const std::string& identity, const WorkerSession& builder, const BuildRequest& request,
                           double now, int64_t now_unix) {
  const uint32_t retry = std::max(kBuilderRetryMs, NoWorkRetryMs(sessions_->size()));
  size_t held = 0;
  for (const auto& [id, w] : works_) held += w.identity == identity && !w.expired;
  // One read at a time per builder, and a bounded hand: a builder cannot
  // make the coordinator read the store over and over, or hoard configs.
  if (asking_.count(identity) || held >= kMaxBuildWorksPerBuilder) return link_->Send(identity, NoWork{retry});
  std::vector<Candidate> candidates = Candidates(builder, request.max_configs, now, now_unix);
  if (candidates.empty()) return link_->Send(identity, NoWork{retry});
  asking_.insert(identity);
  auto shared = std::make_shared<std::vector<Candidate>>(std::move(candidates));
  reader_.Post([this, identity, shared, max = request.max_configs, now]() -> OffLoop::Completion {
    auto missing = std::make_shared<std::vector<Candidate>>();
    auto stored = std::make_shared<std::vector<std::string>>();
    for (Candidate& c : *shared) {
      auto k = store_->GetKernel(c.kernel_hash, c.config.Id(), c.dtype, c.arch);
      if (k.ok()) stored->push_back(c.Key());
      else missing->push_back(std::move(c));
    }
    return [this, identity, missing, stored, max, now] {
      asking_.erase(identity);
      for (const std::string& key : *stored) Settle(key);
      if (!sessions_->Find(identity)) return;  // gone meanwhile
      Hand(identity, max, *missing, now);
    };
  });
}

void BuildService::Hand(const std::string& identity, uint32_t max_configs, const std::vector<Candidate>& missing,
                        double now) {
  const size_t most = std::min<size_t>(std::max<uint32_t>(max_configs, 1), kMaxBuildConfigs);
  std::optional<BuildWork> work;
  Work book;
  for (const Candidate& c : missing) {
    if (handed_.count(c.Key()) || settled_.count(c.Key())) continue;  // another builder's meanwhile
    if (!work) {
      const SweepState* sweep = scheduler_->FindSweep(c.sweep_id);
      const OpSpec* spec = nullptr;
      if (sweep && sweep->state == RunState::kRunning)
        for (const OpSpec& s : sweep->specs)
          if (s.name == c.op) spec = &s;
      if (!spec) continue;  // its sweep ended meanwhile
      work.emplace();
      work->sweep_id = c.sweep_id;
      work->work_id = next_work_++;
      work->op = c.op;
      work->op_package = spec->package;
      work->dtype = c.dtype;
      work->arch = c.arch;
      work->kernel_hash = c.kernel_hash;
      book = Work{identity, c.sweep_id, c.op, c.dtype, c.arch, c.kernel_hash, {}, {spec->kernel}, now + kBuildWorkSeconds, false};
    }
    if (c.sweep_id != work->sweep_id || c.op != work->op || c.dtype != work->dtype || c.arch != work->arch) continue;
    work->configs.push_back(c.config);
    book.configs.emplace(c.config.Id(), c.config);
    if (work->configs.size() >= most) break;
  }
  if (!work || work->configs.empty())
    return link_->Send(identity, NoWork{std::max(kBuilderRetryMs, NoWorkRetryMs(sessions_->size()))});
  for (const auto& [id, config] : book.configs)
    handed_[KernelImage::KeyOf(book.kernel_hash, id, book.dtype, book.arch)] = work->work_id;
  works_.emplace(work->work_id, std::move(book));
  counters_->build_works++;
  const WorkerSession* s = sessions_->Find(identity);
  CoordinatorLog(log::Level::kDebug, "build work",
                 {{"builder", s ? s->name : Printable(identity)}, {"work", work->work_id}, {"sweep", work->sweep_id},
                  {"op", work->op}, {"dtype", work->dtype}, {"arch", work->arch}, {"configs", work->configs.size()}});
  link_->Send(identity, std::move(*work));
}

void BuildService::Built(const std::string& identity, const WorkerSession& builder, BuiltImages built, double now) {
  (void)now;
  auto it = works_.find(built.work_id);
  if (it == works_.end() || it->second.identity != identity)
    return Refuse(identity, builder, built.work_id, "work " + std::to_string(built.work_id) + " was not handed to it");
  const Work& work = it->second;
  if (built.images.size() + built.failed > work.configs.size())
    return Refuse(identity, builder, built.work_id,
                  std::to_string(built.images.size()) + " images and " + std::to_string(built.failed) +
                      " failed for a work of " + std::to_string(work.configs.size()) + " configs");
  std::set<std::string> seen;
  for (size_t i = 0; i < built.images.size(); ++i) {
    const KernelImage& k = built.images[i];
    const std::string where = "image " + std::to_string(i) + ": ";
    if (!BuilderBuildsFor(builder.builder_archs, k.arch))
      return Refuse(identity, builder, built.work_id, where + "arch '" + k.arch + "' that it did not say it builds for");
    if (k.arch != work.arch)
      return Refuse(identity, builder, built.work_id, where + "arch '" + k.arch + "' in a work for " + work.arch);
    if (k.kernel_hash != work.kernel_hash)
      return Refuse(identity, builder, built.work_id, where + "kernel hash '" + k.kernel_hash + "' of another op or toolchain");
    if (k.dtype != work.dtype)
      return Refuse(identity, builder, built.work_id, where + "dtype " + k.dtype + " in a work of " + work.dtype);
    if (!work.configs.count(k.config_id))
      return Refuse(identity, builder, built.work_id, where + "config " + k.config_id + " that the work does not hold");
    if (!seen.insert(k.config_id).second)
      return Refuse(identity, builder, built.work_id, where + "config " + k.config_id + " twice");
  }
  // Checked whole before anything is stored, off the loop: each image is
  // hashed, and a batch may hold kMaxBuildConfigs cubins.
  auto images = std::make_shared<std::vector<KernelImage>>(std::move(built.images));
  reader_.Post([this, identity, work_id = built.work_id, images, failed = built.failed, entries = work.entries,
                witness = BuilderWitness(builder.key)]() -> OffLoop::Completion {
    std::string why;
    for (size_t i = 0; i < images->size() && why.empty(); ++i) {
      const KernelImage& k = (*images)[i];
      Status st = CheckKernelImage(k);
      if (st.ok()) st = CheckCubinEntries(k.image, entries);
      if (!st.ok()) why = "image " + std::to_string(i) + ": " + st.message();
    }
    uint64_t stored = 0, conflicts = 0;
    std::set<std::string> keys;  // stored now, or the same bytes before
    std::string fault;
    if (why.empty()) {
      for (const KernelImage& k : *images) {
        KernelPut put = KernelPut::kNew;
        Status st = store_->PutKernel(k, witness, &put);
        if (put == KernelPut::kConflict) {
          ++conflicts;
          CoordinatorLog(log::Level::kWarn, "a builder's image differs from the stored one of its key",
                         {{"key", k.Key()}, {"error", st.message()}});
        } else if (!st.ok()) {
          fault = st.message();
        } else {
          stored += put != KernelPut::kSame;
          keys.insert(k.Key());
        }
      }
    }
    return [this, identity, work_id, failed, why, stored, conflicts, fault, keys = std::move(keys)] {
      auto it = works_.find(work_id);
      const WorkerSession* s = sessions_->Find(identity);
      if (!why.empty()) {
        if (s) return Refuse(identity, *s, work_id, why);
        counters_->builds_refused++;
        return Release(work_id);
      }
      counters_->builder_images_stored += stored;
      counters_->builder_image_conflicts += conflicts;
      counters_->builder_configs_failed += failed;
      // Workers that lack them for units they hold are sent them now.
      if (images_ && !keys.empty()) images_->Stored(keys);
      if (!fault.empty())
        CoordinatorLog(log::Level::kError, "a builder's image could not be stored", {{"error", fault}});
      // What it built is stored; what it could not build, the devices'
      // compiles will say why (and no builder is handed it again). After a
      // failed write, the configs may be handed again.
      if (it != works_.end() && fault.empty())
        for (const auto& [id, config] : it->second.configs)
          Settle(KernelImage::KeyOf(it->second.kernel_hash, id, it->second.dtype, it->second.arch));
      Release(work_id);
      works_.erase(work_id);
    };
  });
}

void BuildService::Refuse(const std::string& identity, const WorkerSession& builder, uint64_t work_id,
                          const std::string& why) {
  counters_->builds_refused++;
  const std::string who = "builder " + builder.name + " (" + builder.Lessee() + ")";
  CoordinatorLog(log::Level::kWarn, "refused built images", {{"work", work_id}, {"builder", who}, {"error", why}});
  // Its work goes to another builder.
  if (auto it = works_.find(work_id); it != works_.end() && it->second.identity == identity) {
    Release(work_id);
    works_.erase(it);
  }
  link_->Send(identity, ErrorReply{"built images of " + who + " refused: " + why});
  if (sessions_->NoteViolation(identity))
    link_->Disconnect(identity, std::to_string(kMaxViolations) + " requests refused (results, images or builds)");
}

void BuildService::Release(uint64_t work_id) {
  for (auto it = handed_.begin(); it != handed_.end();) {
    if (it->second == work_id) it = handed_.erase(it);
    else ++it;
  }
}

void BuildService::Settle(const std::string& key) {
  if (settled_.size() >= kMaxSettled) settled_.clear();
  settled_.insert(key);
}

void BuildService::Tick(double now) {
  for (auto it = works_.begin(); it != works_.end();) {
    Work& w = it->second;
    const bool gone = !sessions_->Find(w.identity);
    if ((gone || now >= w.expires) && !w.expired) {
      Release(it->first);
      w.expired = true;
    }
    // A builder gone answers nothing; an expired work stays to take a late
    // honest answer until its builder goes.
    if (gone) it = works_.erase(it);
    else ++it;
  }
  for (auto it = hashes_.begin(); it != hashes_.end();) {
    if (scheduler_->Running(it->first)) ++it;
    else it = hashes_.erase(it);
  }
}

}  // namespace tune
