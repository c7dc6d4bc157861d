#include "sweeps.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <random>
#include <utility>

#include "base/clock.h"
#include "base/target.h"
#include "publish/publish.h"
#include "search/features.h"
#include "opspec/sweep_file.h"

namespace tune {
namespace {

// "<unix time, hex>-<random hex>": SweepSubmittedUnix reads the time back.
std::string NewSweepId(int64_t now_unix) {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08lx-%04x", static_cast<long>(now_unix),
                static_cast<unsigned>(rd() & 0xffff));
  return buf;
}

}  // namespace

Status Sweeps::Start() {
  scheduler_->SetContenders(Contenders());
  scheduler_->SetNearBest(NearBestConfigs());
  scheduler_->SetKeyRows([this](const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype,
                                const Shape& shape) {
    std::vector<Measurement> rows;
    const std::string op_hash = OpHash(spec, dev);
    const ResultFilter key{dev.model, spec.name, dtype, shape.Canonical(), spec.HostDigested() ? "" : op_hash};
    Status st = store_->Scan(key, [&](const Measurement& m) {
      if (MeasuresKernel(m, op_hash)) rows.push_back(m);
      return true;
    });
    if (!st.ok()) CoordinatorLog(log::Level::kWarn, "search sees no figures of a key",
                                 {{"shape", shape.Canonical()}, {"error", st.message()}});
    return rows;
  });
  scheduler_->SetPriors([this](const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype,
                                const Shape& shape) { return Priors(dev, spec, dtype, shape); });
  scheduler_->SetSearchWarning([](const std::string& sweep_id, const std::string& line) {
    CoordinatorLog(log::Level::kWarn, "search: " + line, {{"sweep", sweep_id}});
  });
  expander_ = std::make_unique<OffLoop>("expand");
  TUNE_RETURN_IF_ERROR(expander_->Start());
  searcher_ = std::make_unique<OffLoop>("search");
  TUNE_RETURN_IF_ERROR(searcher_->Start());
  scheduler_->SetProposer([this](Scheduler::ProposeWork work) {
    searcher_->Post([work = std::move(work)]() -> OffLoop::Completion { return work(); });
  });
  scheduler_->SetExpander([this](SpaceExpansion job) { Expand(std::move(job)); });
  return Resume();
}

Command Sweeps::Submit(const SweepSubmit& submit, const std::string& client, double now) {
  if (Status st = submit_rate_.Admit(client, now); !st.ok()) {
    CoordinatorLog(log::Level::kInfo, "sweep refused", {{"name", submit.name}, {"error", st.message()}});
    return ErrorReply{st.message()};
  }
  const int64_t now_unix = opts_->env->NowUnixSeconds();
  const std::string id = NewSweepId(now_unix);
  auto r = scheduler_->AddSweep(submit, id, now_unix, Measured(submit, id));
  if (!r.ok()) {
    CoordinatorLog(log::Level::kInfo, "sweep refused", {{"name", submit.name}, {"error", r.status().message()}});
    return ErrorReply{r.status().message()};
  }
  Persist(id);
  RecordOps(id, submit);
  CoordinatorLog(log::Level::kInfo, "sweep accepted", {{"sweep", id}, {"name", submit.name}});
  return SweepAccepted{id};
}

Command Sweeps::Cancel(const std::string& sweep_id) {
  auto id = Resolve(sweep_id);
  if (!id.ok()) return ErrorReply{id.status().message()};
  // An ended sweep (this run's, or one read back from its record) is
  // answered with its status: there is nothing left to stop, and its state
  // says how it ended.
  const SweepState* s = scheduler_->FindSweep(*id);
  if (s && s->state == RunState::kRunning) {
    if (Status st = scheduler_->CancelSweep(*id, opts_->env->NowUnixSeconds()); !st.ok())
      return ErrorReply{st.message()};
    RecordEnded();  // durable at once: a restart must not resume it
  }
  return StatusOf(*id);
}

Command Sweeps::StatusReply(const std::string& sweep_id) const {
  if (sweep_id.empty()) return StatusOf(sweep_id);
  auto id = Resolve(sweep_id);
  if (!id.ok()) return ErrorReply{id.status().message()};
  return StatusOf(*id);
}

Result<std::string> Sweeps::Resolve(const std::string& sweep_id) const {
  if (sweep_id.empty()) return Status::InvalidArgument("no sweep id given");
  if (scheduler_->FindSweep(sweep_id) || history_.count(sweep_id)) return sweep_id;
  std::set<std::string> matches;
  auto begins = [&](const std::string& id) { return id.compare(0, sweep_id.size(), sweep_id) == 0; };
  for (const auto& [id, s] : scheduler_->sweeps())
    if (begins(id)) matches.insert(id);
  for (auto it = history_.lower_bound(sweep_id); it != history_.end() && begins(it->first); ++it)
    matches.insert(it->first);
  if (matches.size() == 1) return *matches.begin();
  if (matches.empty()) return Status::NotFound("unknown sweep '" + sweep_id + "'");
  std::string listed;
  size_t n = 0;
  for (const std::string& id : matches) {
    if (n++ == kAmbiguousListed) {
      listed += ", ... (" + std::to_string(matches.size()) + " in all)";
      break;
    }
    listed += (listed.empty() ? "" : ", ") + id;
  }
  return Status::InvalidArgument("sweep id prefix '" + sweep_id + "' is ambiguous: " + listed);
}

SweepStatus Sweeps::StatusOf(const std::string& sweep_id) const {
  SweepStatus st;
  st.sweeps = scheduler_->Progress(sweep_id, opts_->env->NowSeconds());
  // Sweeps that ended before this coordinator started, from their records:
  // the one asked for, or the newest kHistoryListed of them.
  size_t listed = 0;
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
    const auto& [id, progress] = *it;
    if (scheduler_->FindSweep(id)) continue;
    if (sweep_id == id || (sweep_id.empty() && listed++ < kHistoryListed)) st.sweeps.push_back(progress);
  }
  st.workers = static_cast<uint32_t>(sessions_->size());
  st.store_fault = health_->fault();
  st.devices = sessions_->DevicesByModel();
  return st;
}

void Sweeps::Persist(const std::string& id) {
  const SweepState* s = scheduler_->FindSweep(id);
  if (!s) return;
  SweepRecord record{RunStateName(s->state), s->submit, std::nullopt};
  // Only a running sweep is read back (to resume); an ended one's packages
  // are in the op records, whose versions are bounded, and its progress is
  // kept for `status` after a restart.
  if (s->state != RunState::kRunning) {
    record.submit.op_packages.clear();
    auto progress = scheduler_->Progress(id, opts_->env->NowSeconds());
    if (!progress.empty()) record.progress = std::move(progress.front());
  }
  Status st = store_->PutSweep(id, EncodeSweepRecord(record));
  if (!st.ok()) health_->Failed("cannot persist sweep " + id + ": " + st.message(), opts_->env->NowSeconds());
}

void Sweeps::RecordCoverage(const SweepState& sweep) {
  for (const auto& [key, plan] : sweep.plans) {
    KeyCoverage c;
    c.gpu_model = key.model;
    c.op = key.op;
    c.dtype = key.dtype;
    c.shape = key.shape;
    c.legal = plan.legal;
    c.legal_exact = plan.legal_exact;
    c.strategy = plan.strategy;
    c.budget = plan.budget;
    c.seed = plan.searched ? sweep.submit.seed : 0;
    c.sweep_id = sweep.id;
    c.unix_time = sweep.finished_unix;
    // The kernel this sweep measured: the hash of its own rows of the key,
    // else the newest stored one (a key measured whole before it).
    std::map<std::string, std::set<std::string>> configs;  // kernel hash -> config ids
    int64_t newest = INT64_MIN;
    Status st = store_->Scan(ResultFilter{key.model, key.op, key.dtype, key.shape, ""}, [&](const Measurement& m) {
      configs[m.kernel_hash].insert(m.config_id);
      if (m.sweep_id == sweep.id) newest = INT64_MAX, c.kernel_hash = m.kernel_hash;
      else if (m.unix_time > newest) newest = m.unix_time, c.kernel_hash = m.kernel_hash;
      return true;
    });
    if (!st.ok() || c.kernel_hash.empty()) continue;
    c.evaluated = configs[c.kernel_hash].size();
    const bool whole = c.legal_exact && c.evaluated >= c.legal;
    const bool finished = sweep.state == RunState::kDone && !sweep.skipped.count(key.model);
    c.state = whole ? KeyCoverage::State::kExhausted
              : finished && plan.searched ? KeyCoverage::State::kSearched
                                          : KeyCoverage::State::kPartial;
    if (Status put = store_->PutCoverage(c); !put.ok())
      CoordinatorLog(log::Level::kWarn, "cannot record a key's coverage", {{"sweep", sweep.id}, {"error", put.message()}});
  }
}

std::vector<PriorTrial> Sweeps::Priors(const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype,
                                       const Shape& shape) {
  std::vector<Measurement> rows;
  const std::string here = shape.Canonical();
  Status st = store_->Scan(ResultFilter{"", spec.name, dtype, "", ""}, [&](const Measurement& m) {
    if (m.gpu_model != dev.model || m.shape != here) rows.push_back(m);
    return true;
  });
  std::vector<PriorTrial> out;
  if (!st.ok()) {
    CoordinatorLog(log::Level::kWarn, "search starts cold: the store's neighbours cannot be read",
                   {{"op", spec.name}, {"error", st.message()}});
    return out;
  }
  // Per neighbour (model, shape): the valid figures of its newest kernel.
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<Config, double>>> keys;
  for (const Measurement& m : NewestKernelOnly(std::move(rows))) {
    auto& valid = keys[{m.gpu_model, m.shape}];
    if (m.Valid() && std::isfinite(m.median_us) && m.median_us > 0) valid.emplace_back(m.config, m.median_us);
  }
  for (auto& [key, valid] : keys) {
    Shape neighbour;
    if (!ParseNamedValues(key.second, &neighbour.dims)) continue;
    for (PriorTrial& p : PriorsOfKey(std::move(valid), KeyFeatures(neighbour, key.first))) out.push_back(std::move(p));
  }
  return out;
}

MeasuredFn Sweeps::Measured(const SweepSubmit& submit, const std::string& sweep_id) {
  ResultStore* db = store_;
  std::set<FailureClass> retried;
  for (const std::string& c : submit.retry) retried.insert(FailureClassFromName(c));
  // An earlier sweep's failure of a retried class is measured again, and a
  // retime measures every row of an earlier sweep again (one of this
  // sweep's own, before a restart, is its result).
  auto retry = [retried, sweep_id, retime = submit.retime](const Measurement& row) {
    return (retime || (!row.Valid() && retried.count(row.failure))) && row.sweep_id != sweep_id;
  };
  // Each copy (one per expansion) hashes each (op, toolchain) once, not once
  // per config, and scans a host-digested key once.
  using Digests = std::map<std::string, std::vector<std::string>>;  // config id -> host digests
  return [db, retry, hashes = std::map<std::pair<std::string, std::string>, std::string>(),
          digested = std::map<std::string, Digests>()](
             const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Config& config,
             const Shape& shape) mutable -> std::optional<StoredPair> {
    std::string& hash = hashes[{spec.name, TargetOf(dev).toolchain}];
    if (hash.empty()) hash = OpHash(spec, dev);
    if (spec.HostDigested()) {
      // Rows of an op whose hosts add to its kernel hash (include roots, a
      // program's version) are kept under a hash per host digest: the
      // worker that is leased the pair tells whether one of them is its own.
      const ResultFilter key{dev.model, spec.name, dtype, shape.Canonical(), ""};
      const std::string at = key.gpu_model + '\0' + key.op + '\0' + key.dtype + '\0' + key.shape + '\0' + hash;
      auto [it, fresh] = digested.try_emplace(at);
      if (fresh) {
        Status st = db->Scan(key, [&](const Measurement& m) {
          if (!m.include_digest.empty() && MeasuresKernel(m, hash) && !retry(m))
            it->second[m.config_id].push_back(m.include_digest);
          return true;
        });
        if (!st.ok()) CoordinatorLog(log::Level::kWarn, "stored rows not reused: the store did not answer",
                                     {{"shape", key.shape}, {"error", st.message()}});
      }
      auto stored = it->second.find(config.Id());
      if (stored == it->second.end()) return std::nullopt;
      StoredPair pair;
      pair.host_digests = stored->second;
      return pair;
    }
    const auto row = db->Get(dev.model, spec.name, dtype, shape.Canonical(), hash, config.Id());
    if (!row || retry(*row)) return std::nullopt;
    return StoredPair{!row->Valid(), row->failure, {}};
  };
}

void Sweeps::RecordOps(const std::string& sweep_id, const SweepSubmit& submit) {
  std::vector<std::string>& digests = package_digests_[sweep_id];
  digests.clear();
  for (size_t i = 0; i < submit.ops.size() && i < submit.op_packages.size(); ++i) {
    digests.push_back(PackageDigest(submit.op_packages[i]));
    Status st = store_->PutOp(submit.ops[i], SweepSubmittedUnix(sweep_id), submit.op_packages[i]);
    if (!st.ok()) health_->Failed("cannot record op " + submit.ops[i] + ": " + st.message(), opts_->env->NowSeconds());
  }
  PruneOpVersions(submit);
}

void Sweeps::PruneOpVersions(const SweepSubmit& submit) {
  // The versions running sweeps need, by op name; sweeps that ended need none.
  std::map<std::string, std::set<std::string>> needed;
  for (auto it = package_digests_.begin(); it != package_digests_.end();) {
    const SweepState* s = scheduler_->FindSweep(it->first);
    if (!s || s->state != RunState::kRunning) {
      it = package_digests_.erase(it);
      continue;
    }
    for (size_t i = 0; i < s->submit.ops.size() && i < it->second.size(); ++i)
      needed[s->submit.ops[i]].insert(it->second[i]);
    ++it;
  }
  std::vector<std::pair<std::string, std::set<std::string>>> jobs;
  for (const std::string& op : std::set<std::string>(submit.ops.begin(), submit.ops.end()))
    jobs.emplace_back(op, needed[op]);
  expander_->Post([this, jobs = std::move(jobs)]() -> OffLoop::Completion {
    std::vector<std::pair<std::string, std::string>> lines;  // op, outcome
    for (const auto& [op, keep] : jobs) {
      auto removed = store_->PruneOps(op, kMaxRetainedOpVersions, keep);
      if (!removed.ok()) lines.emplace_back(op, removed.status().message());
      else if (*removed > 0) lines.emplace_back(op, std::to_string(*removed) + " old versions removed");
    }
    return [this, lines = std::move(lines)] {
      for (const auto& [op, what] : lines) CoordinatorLog(log::Level::kInfo, "op versions pruned",
                                                          {{"op", op}, {"outcome", what}});
    };
  });
}

void Sweeps::Expand(SpaceExpansion job) {
  CoordinatorLog(log::Level::kDebug, "expanding config spaces", {{"sweep", job.sweep_id}, {"model", job.device.model}});
  expander_->Post([this, job = std::move(job)]() -> OffLoop::Completion {
    const double start = opts_->env->NowSeconds();
    auto space = std::make_shared<Result<ExpandedSpace>>(ExpandSpace(job));
    const double seconds = opts_->env->NowSeconds() - start;
    return [this, id = job.sweep_id, model = job.device.model, space, seconds] {
      if (space->ok()) {
        CoordinatorLog(log::Level::kInfo, "config spaces expanded",
                       {{"sweep", id}, {"model", model}, {"pairs", (*space)->pairs_total},
                        {"stored_before", (*space)->pairs_done}, {"seconds", seconds}});
      }
      scheduler_->ApplyExpansion(id, model, std::move(*space), opts_->env->NowUnixSeconds());
    };
  });
}

void Sweeps::RecordEnded() {
  for (const auto& [id, s] : scheduler_->sweeps()) {
    if (s.state == RunState::kRunning || !ended_.insert(id).second) continue;
    Persist(id);
    RecordCoverage(s);
    ingestion_->ForgetLeases(id);
    if (s.error.empty()) CoordinatorLog(log::Level::kInfo, std::string("sweep ") + RunStateName(s.state),
                                        {{"sweep", id}});
    else CoordinatorLog(log::Level::kWarn, std::string("sweep ") + RunStateName(s.state),
                        {{"sweep", id}, {"error", s.error}});
  }
}

Status Sweeps::Resume() {
  std::vector<std::pair<std::string, SweepRecord>> running;
  Status st = store_->ForEachSweep([&](const std::string& id, const std::string& bytes) {
    auto rec = DecodeSweepRecord(bytes);
    if (!rec.ok()) {
      CoordinatorLog(log::Level::kWarn, "skipping an unreadable sweep",
                     {{"sweep", id}, {"error", rec.status().message()}});
      return;
    }
    if (rec->state == "running") running.emplace_back(id, std::move(rec).value());
    else if (rec->progress) history_[id] = std::move(*rec->progress);
  });
  // The newest kHistory ended sweeps (ids begin with their submit time).
  while (history_.size() > kHistory) history_.erase(history_.begin());
  TUNE_RETURN_IF_ERROR(st);
  for (auto& [id, rec] : running) {
    auto r = scheduler_->AddSweep(rec.submit, id, opts_->env->NowUnixSeconds(), Measured(rec.submit, id));
    if (!r.ok()) {
      // Failed for good rather than tried again on every start.
      CoordinatorLog(log::Level::kError, "sweep cannot resume; marked failed",
                     {{"sweep", id}, {"error", r.status().message()}});
      Status st = store_->PutSweep(id, EncodeSweepRecord({"failed", rec.submit, std::nullopt}));
      if (!st.ok()) CoordinatorLog(log::Level::kError, "cannot mark the sweep failed",
                                   {{"sweep", id}, {"error", st.message()}});
    } else {
      RecordOps(id, rec.submit);  // a coordinator stopped between the sweep and its op records
      CoordinatorLog(log::Level::kInfo, "resuming sweep", {{"sweep", id}, {"name", rec.submit.name}});
    }
  }
  return Status::OK();
}

bool Sweeps::RowsToTimeAgain(const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                             const char* pass, const std::string& retime_sweep, std::vector<Measurement>* rows) {
  const std::string op_hash = OpHash(spec, dev);
  // An op whose hosts add to its hash keeps its rows under hashes derived
  // from its own (one per set of headers or versions): the key is scanned whole.
  const ResultFilter key{dev.model, spec.name, dtype, shape.Canonical(), spec.HostDigested() ? "" : op_hash};
  bool confirmed = false;
  Status st = store_->Scan(key, [&](const Measurement& m) {
    if (!MeasuresKernel(m, op_hash)) return true;
    // A retime's passes start over among its own rows: earlier sweeps'
    // figures (confirmed ones too) are no contenders of tonight's.
    if (!retime_sweep.empty() && m.sweep_id != retime_sweep) return true;
    confirmed = confirmed || m.pass == Measurement::Pass::kConfirm;
    if (m.Valid() && std::isfinite(m.median_us)) rows->push_back(m);
    return !confirmed;
  });
  if (!st.ok()) CoordinatorLog(log::Level::kWarn, std::string(pass) + " skips a shape",
                               {{"shape", shape.Canonical()}, {"error", st.message()}});
  return st.ok() && !confirmed;
}

ContendersFn Sweeps::Contenders() {
  return [this](const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                uint32_t top, const std::string& retime_sweep) {
    std::vector<Measurement> valid;
    if (!RowsToTimeAgain(dev, spec, dtype, shape, "confirm phase", retime_sweep, &valid)) return std::vector<Config>{};
    return ContendersOf(std::move(valid), top);
  };
}

NearBestFn Sweeps::NearBestConfigs() {
  return [this](const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                double within, const std::string& retime_sweep) {
    std::vector<Measurement> valid;
    if (!RowsToTimeAgain(dev, spec, dtype, shape, "refine pass", retime_sweep, &valid)) return NearBest{};
    return NearBestOf(valid, within);
  };
}

}  // namespace tune
