// The farm's C API (tune/farm_c.h) over the client side: a LocalFarm or a
// coordinator's endpoint, the coordinator protocol for sweeps, remote or
// local store reads for results, publish as the CLI does it.
#include "tune/farm_c.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/backend_kinds.h"
#include "base/c_strings.h"
#include "base/json_text.h"
#include "base/log.h"
#include "coordinator_client.h"
#include "farm_access.h"
#include "local_farm.h"
#include "opspec/config_space.h"
#include "opspec/sweep_file.h"
#include "publish/publish.h"
#include "remote_store.h"
#include "report.h"
#include "base/target.h"
#include "base/text.h"

using tune::Result;
using tune::Status;
using Json = nlohmann::json;

// `lhs = *expr`, or return expr's error.
#define FARM_CONCAT_(a, b) a##b
#define FARM_CONCAT(a, b) FARM_CONCAT_(a, b)
#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_AS(FARM_CONCAT(result_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_AS(tmp, lhs, expr) \
  auto tmp = (expr);                        \
  if (!tmp.ok()) return tmp.status();       \
  lhs = std::move(*tmp)

struct tunefarm_farm_t {
  std::unique_ptr<tune::LocalFarm> local;  // null for a connected farm
  std::shared_ptr<tune::ResultStore> opened;  // a store-only farm's store
  tune::ClientArgs to;
  double timeout = 10;
  std::string store;                       // a local farm's
  ~tunefarm_farm_t() {
    if (local) local->Stop();
  }
};

namespace {

using tune::CopyString;
using tune::SetError;

// Runs `fn` (which returns a Result<T>), turning its error or an exception
// into *errptr: none may cross the API.
template <typename T, typename Fn>
T Guard(char** errptr, T failed, Fn&& fn) {
  return tune::Guard(errptr, failed, [&]() -> T {
    Result<T> r = fn();
    if (r.ok()) return *r;
    SetError(errptr, r.status().message());
    return failed;
  });
}

Result<Json> ParseRequest(const char* text, const char* what) {
  if (!text || !*text) return Json::object();
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument(std::string(what) + ": not a JSON object");
  return j;
}

// The value of `key` in `j` as T, `fallback` when absent; an error naming
// the field when it has another type.
template <typename T>
Result<T> Field(const Json& j, const char* key, T fallback, const char* what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const std::exception&) {
    return Status::InvalidArgument(std::string(what) + ": \"" + key + "\" has the wrong type (" + it->type_name() + ")");
  }
}

// An integer field in [lo, hi], `fallback` when absent; a float, a bool or
// a value out of range is an error naming the field.
Result<int64_t> IntField(const Json& j, const char* key, int64_t fallback, int64_t lo, int64_t hi, const char* what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX)) ||
      it->get<int64_t>() < lo || it->get<int64_t>() > hi)
    return Status::InvalidArgument(std::string(what) + ": \"" + key + "\" must be an integer in " + std::to_string(lo) +
                                   ".." + std::to_string(hi) + ", not " + it->dump());
  return it->get<int64_t>();
}

// Shapes as the CLI spells them: dicts {"M": 4096} or strings "M=4096,...".
Result<std::vector<std::string>> ShapeTexts(const Json& j) {
  std::vector<std::string> out;
  auto it = j.find("shapes");
  if (it == j.end()) return out;
  if (!it->is_array()) return Status::InvalidArgument("submit: \"shapes\" must be a list");
  for (const Json& s : *it) {
    if (s.is_string()) {
      out.push_back(s.get<std::string>());
      continue;
    }
    if (!s.is_object() || s.empty())
      return Status::InvalidArgument("submit: a shape must be a dict of dim to int, or \"M=4096,...\"");
    std::string text;
    for (const auto& [dim, value] : s.items()) {
      if (!value.is_number_integer())
        return Status::InvalidArgument("submit: shape dim " + dim + " must be an int, not " + value.type_name());
      text += (text.empty() ? "" : ",") + dim + "=" + std::to_string(value.get<int64_t>());
    }
    out.push_back(text);
  }
  return out;
}

// A config list (SweepSubmit::configs): dicts {"BM": 128, "SCHEDULE":
// "stream_k", "TMA": True} or strings "BM=128,...", each checked against
// the op by CheckListedSweep.
Result<std::vector<tune::Config>> ConfigsOf(const Json& j) {
  std::vector<tune::Config> out;
  auto it = j.find("configs");
  if (it == j.end()) return out;
  if (!it->is_array() || it->empty()) return Status::InvalidArgument("submit: \"configs\" must be a non-empty list");
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& c = (*it)[i];
    const std::string where = "submit: configs[" + std::to_string(i) + "]";
    tune::Config config;
    if (c.is_string()) {
      if (!tune::ParseParamValues(c.get<std::string>(), &config.params) || config.params.empty())
        return Status::InvalidArgument(where + ": expected \"NAME=VALUE,...\" like \"BM=128,BN=256\"");
    } else if (c.is_object() && !c.empty()) {
      for (const auto& [param, value] : c.items()) {
        if (value.is_boolean()) {
          config.params.emplace_back(param, tune::ParamValue::Bool(value.get<bool>()));
        } else if (value.is_number_integer() && !(value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX))) {
          config.params.emplace_back(param, tune::ParamValue(value.get<int64_t>()));
        } else if (value.is_string() && tune::CheckCategoricalText(value.get<std::string>()).ok()) {
          config.params.emplace_back(param, tune::ParamValue::String(value.get<std::string>()));
        } else {
          return Status::InvalidArgument(where + " " + param + ": expected an int, a bool or a token string, not " +
                                         value.dump());
        }
      }
    } else {
      return Status::InvalidArgument(where + ": expected a dict of param to value, or \"BM=128,...\"");
    }
    out.push_back(std::move(config));
  }
  return out;
}

Result<tune::SweepSubmit> SweepOf(const Json& j) {
  const char* what = "submit";
  ASSIGN_OR_RETURN(std::string ops_dir, Field<std::string>(j, "ops_dir", "ops", what));
  ASSIGN_OR_RETURN(std::string file, Field<std::string>(j, "sweep_file", "", what));
  Result<tune::SweepSubmit> sweep = Status::Error("");
  if (!file.empty()) {
    sweep = tune::LoadSweepFile(file, ops_dir);
  } else {
    ASSIGN_OR_RETURN(auto ops, Field<std::vector<std::string>>(j, "ops", {}, what));
    if (ops.empty()) return Status::InvalidArgument("submit: name \"ops\" (or a \"sweep_file\")");
    ASSIGN_OR_RETURN(auto dtypes, Field<std::vector<std::string>>(j, "dtypes", {"f16"}, what));
    ASSIGN_OR_RETURN(auto gpus, Field<std::vector<std::string>>(j, "gpus", {"*"}, what));
    ASSIGN_OR_RETURN(auto shapes, ShapeTexts(j));
    if (shapes.empty()) return Status::InvalidArgument("submit: name \"shapes\"");
    ASSIGN_OR_RETURN(std::string name, Field<std::string>(j, "name", "py-" + ops.front(), what));
    sweep = tune::MakeSweep(name, ops, dtypes, shapes, gpus, ops_dir);
  }
  if (!sweep.ok()) return sweep.status();
  tune::SweepSubmit& s = *sweep;
  ASSIGN_OR_RETURN(s.strategy, Field<std::string>(j, "strategy", s.strategy, what));
  ASSIGN_OR_RETURN(int64_t seed, IntField(j, "seed", int64_t(s.seed), 0, INT64_MAX, what));
  s.seed = uint64_t(seed);
  // Given here, a budget is asked for: 0 is not "the default".
  ASSIGN_OR_RETURN(int64_t budget, IntField(j, "budget", int64_t(s.budget), 1, int64_t(tune::kMaxSearchBudget), what));
  s.budget = uint64_t(budget);
  ASSIGN_OR_RETURN(s.budget_seconds, Field<double>(j, "budget_seconds", s.budget_seconds, what));
  if (j.contains("budget_seconds") && !(s.budget_seconds > 0))
    return Status::InvalidArgument("submit: \"budget_seconds\" must be > 0");
  ASSIGN_OR_RETURN(int64_t confirm_top, IntField(j, "confirm_top", s.confirm_top, 0, tune::kMaxConfirmTop, what));
  s.confirm_top = uint32_t(confirm_top);
  if (s.confirm_top > 0 && s.confirm_seconds == 0) s.confirm_seconds = tune::kDefaultConfirmSeconds;
  ASSIGN_OR_RETURN(s.retry, Field<std::vector<std::string>>(j, "retry", s.retry, what));
  ASSIGN_OR_RETURN(s.retime, Field<bool>(j, "retime", s.retime, what));
  ASSIGN_OR_RETURN(std::string timing, Field<std::string>(j, "timing", "", what));
  TUNE_RETURN_IF_ERROR(tune::ApplySweepTiming(&s, timing, "submit: timing"));
  ASSIGN_OR_RETURN(bool one_pass, Field<bool>(j, "one_pass", false, what));
  if (one_pass) s.refine_pass = false;
  ASSIGN_OR_RETURN(int64_t priority, IntField(j, "priority", s.priority, tune::kMinSweepPriority,
                                              tune::kMaxSweepPriority, what));
  s.priority = uint32_t(priority);
  ASSIGN_OR_RETURN(s.objective, Field<std::string>(j, "objective", s.objective, what));
  TUNE_RETURN_IF_ERROR(tune::CheckSearchFields(s, "submit: "));
  if (j.contains("configs")) {
    ASSIGN_OR_RETURN(s.configs, ConfigsOf(j));
  }
  TUNE_RETURN_IF_ERROR(tune::CheckListedSweep(&s, j.contains("configs") ? "submit: configs" : file + ": [sweep] configs"));
  return sweep;
}

Result<tune::Command> Ask(tunefarm_farm_t* farm, tune::Command request) {
  if (farm->opened)
    return Status::InvalidArgument("a farm opened on a store (" + farm->store +
                                   ") reads results only: open a local farm or connect to a coordinator to tune");
  tune::CoordinatorClient client(farm->to, farm->timeout);
  return client.Call(std::move(request));
}

Result<tune::SweepStatus> AskStatus(tunefarm_farm_t* farm, tune::Command request) {
  ASSIGN_OR_RETURN(auto reply, Ask(farm, std::move(request)));
  auto* status = std::get_if<tune::SweepStatus>(&reply);
  if (!status) return Status::Error("coordinator " + farm->to.endpoint + " sent " + tune::CommandName(reply));
  return *status;
}

// The store a read sees: a local farm's own (its coordinator's, which
// takes reads from any thread), a connected farm's fetched from its
// coordinator.
Result<std::shared_ptr<tune::ResultStore>> StoreOf(tunefarm_farm_t* farm, const tune::ResultFilter& filter) {
  if (farm->local) return std::shared_ptr<tune::ResultStore>(&farm->local->store(), [](tune::ResultStore*) {});
  if (farm->opened) return farm->opened;
  // An export may take minutes once connected; the connection itself is
  // held to the farm's timeout (Farm.connect(timeout=)).
  tune::CoordinatorClient client(farm->to, std::max(tune::kStoreReadTimeoutSeconds, farm->timeout));
  client.SetConnectSeconds(farm->timeout);
  ASSIGN_OR_RETURN(std::unique_ptr<tune::ResultStore> fetched,
                   tune::FetchStore(client, {filter}, !farm->to.curve_secret_key.empty()));
  return std::shared_ptr<tune::ResultStore>(std::move(fetched));
}

Result<tune::ResultFilter> FilterOf(const Json& j, const char* what) {
  tune::ResultFilter f;
  ASSIGN_OR_RETURN(f.gpu_model, Field<std::string>(j, "gpu_model", "", what));
  ASSIGN_OR_RETURN(f.op, Field<std::string>(j, "op", "", what));
  ASSIGN_OR_RETURN(f.dtype, Field<std::string>(j, "dtype", "", what));
  ASSIGN_OR_RETURN(f.shape, Field<std::string>(j, "shape", "", what));
  return f;
}

// A request's "objective" (time | energy | edp; default time).
Result<tune::Objective> ObjectiveOf(const Json& j, const char* what) {
  ASSIGN_OR_RETURN(std::string name, Field<std::string>(j, "objective", "time", what));
  tune::Objective o = tune::Objective::kTime;
  if (!tune::ParseObjective(name, &o))
    return Status::InvalidArgument(std::string(what) + ": \"objective\" '" + tune::ToValidUtf8(name) +
                                   "': expected time, energy or edp");
  return o;
}

}  // namespace

extern "C" {

tunefarm_farm_t* tunefarm_farm_local(const char* options_json, char** errptr) {
  return Guard<tunefarm_farm_t*>(errptr, nullptr, [&]() -> Result<tunefarm_farm_t*> {
    const char* what = "local farm options";
    ASSIGN_OR_RETURN(Json j, ParseRequest(options_json, what));
    tune::LocalFarmOptions o;
    ASSIGN_OR_RETURN(o.store, Field<std::string>(j, "store", "tunefarm.db", what));
    ASSIGN_OR_RETURN(o.worker.backend, Field<std::string>(j, "backend", "auto", what));
    if (o.worker.backend != "auto" && !tune::FindBackendKind(o.worker.backend))
      return Status::InvalidArgument("local farm: backend '" + o.worker.backend + "': auto, " + tune::BackendNamesText());
    ASSIGN_OR_RETURN(o.worker.sim_models, Field<std::vector<std::string>>(j, "sim_models", o.worker.sim_models, what));
    if (auto d = j.find("devices"); d != j.end() && !d->is_null()) {
      if (!d->is_array()) return Status::InvalidArgument("local farm: \"devices\" must be a list of CUDA ordinals");
      for (const Json& v : *d) {
        ASSIGN_OR_RETURN(int64_t ordinal, IntField(Json{{"devices", v}}, "devices", 0, 0, 1023, what));
        o.worker.cuda_devices.push_back(int(ordinal));
      }
    }
    ASSIGN_OR_RETURN(int64_t workers, IntField(j, "workers", 1, 1, 64, what));
    o.sim_workers = unsigned(workers);
    ASSIGN_OR_RETURN(int64_t max_raw, IntField(j, "max_raw_configs", int64_t(o.max_raw_configs), 1,
                                               int64_t(tune::kMaxRawConfigPoints), what));
    o.max_raw_configs = uint64_t(max_raw);
    ASSIGN_OR_RETURN(o.worker.timing.energy_seconds, Field<double>(j, "energy_seconds", 0.0, what));
    if (!(o.worker.timing.energy_seconds >= 0 && o.worker.timing.energy_seconds <= tune::kMaxEnergySeconds))
      return Status::InvalidArgument("local farm: \"energy_seconds\" must be a number of seconds in [0, 10]");
    // The CUDA backend's runner is a process of the `tunefarm` program (in
    // Python, /proc/self/exe is the interpreter).
    ASSIGN_OR_RETURN(o.worker.runner_exe, Field<std::string>(j, "tunefarm_binary", "", what));
    ASSIGN_OR_RETURN(o.worker.allow_programs, Field<bool>(j, "allow_programs", false, what));
    // The farm's log lines on stderr: warnings and errors unless asked.
    ASSIGN_OR_RETURN(std::string log_level, Field<std::string>(j, "log_level", "warn", what));
    TUNE_RETURN_IF_ERROR(tune::log::Configure(log_level, "text"));
    ASSIGN_OR_RETURN(auto farm, tune::LocalFarm::Start(o));
    auto handle = std::make_unique<tunefarm_farm_t>();
    handle->store = o.store;
    handle->local = std::move(farm);
    handle->local->Serve();
    handle->to.endpoint = handle->local->endpoint();
    return handle.release();
  });
}

tunefarm_farm_t* tunefarm_farm_connect(const char* endpoint, const char* client_secret_key, const char* coordinator_key,
                                       double timeout_seconds, char** errptr) {
  return Guard<tunefarm_farm_t*>(errptr, nullptr, [&]() -> Result<tunefarm_farm_t*> {
    if (!endpoint || !*endpoint) return Status::InvalidArgument("connect: no endpoint");
    if (!client_secret_key != !coordinator_key)
      return Status::InvalidArgument("connect: CURVE needs both this client's secret key and the coordinator's public key");
    if (!(timeout_seconds >= 0 && timeout_seconds <= 3600))
      return Status::InvalidArgument("connect: timeout must be 0..3600 s");
    auto handle = std::make_unique<tunefarm_farm_t>();
    handle->to.endpoint = endpoint;
    handle->to.curve_secret_key = client_secret_key ? client_secret_key : "";
    handle->to.coordinator_key = coordinator_key ? coordinator_key : "";
    handle->timeout = timeout_seconds > 0 ? timeout_seconds : 10;
    return handle.release();
  });
}

tunefarm_farm_t* tunefarm_farm_open_store(const char* path, char** errptr) {
  return Guard<tunefarm_farm_t*>(errptr, nullptr, [&]() -> Result<tunefarm_farm_t*> {
    if (!path || !*path) return Status::InvalidArgument("open store: no path");
    ASSIGN_OR_RETURN(std::unique_ptr<tune::ResultStore> store, tune::OpenStore(path));
    auto handle = std::make_unique<tunefarm_farm_t>();
    handle->store = path;
    handle->opened = std::move(store);
    return handle.release();
  });
}

void tunefarm_farm_destroy(tunefarm_farm_t* farm) { delete farm; }

char* tunefarm_farm_info(tunefarm_farm_t* farm, char** errptr) {
  return Guard<char*>(errptr, nullptr, [&]() -> Result<char*> {
    Json j = {{"endpoint", farm->to.endpoint}, {"local", farm->local != nullptr}};
    if (farm->opened) j["store"] = farm->store;
    if (farm->local) {
      j["store"] = farm->store;
      j["simulated"] = farm->local->simulated();
      Json devices = Json::array();
      for (const tune::DeviceInfo& d : farm->local->devices())
        devices.push_back(Json{{"index", d.index},
                               {"name", d.name},
                               {"model", d.model},
                               {"backend", d.backend},
                               {"arch", TargetOf(d).arch}});
      j["devices"] = devices;
    }
    return CopyString(tune::DumpJson(j));
  });
}

char* tunefarm_farm_submit(tunefarm_farm_t* farm, const char* sweep_json, char** errptr) {
  return Guard<char*>(errptr, nullptr, [&]() -> Result<char*> {
    ASSIGN_OR_RETURN(Json j, ParseRequest(sweep_json, "submit"));
    ASSIGN_OR_RETURN(auto sweep, SweepOf(j));
    std::string note;
    if (farm->local) {
      ASSIGN_OR_RETURN(note, farm->local->KeepModelsHere(&sweep));
    }
    Json answer = {{"name", sweep.name}, {"ops", sweep.ops}, {"dtypes", sweep.dtypes}, {"shapes", Json::array()},
                   {"strategy", sweep.strategy}, {"objective", sweep.objective}};
    if (!note.empty()) answer["note"] = note;
    for (const tune::Shape& shape : sweep.shapes) answer["shapes"].push_back(shape.Canonical());
    // How each op is timed (its package's [op] timing, a sweep's override
    // written there): its rows are those of that timing.
    answer["timing"] = Json::object();
    for (size_t i = 0; i < sweep.ops.size(); ++i) {
      ASSIGN_OR_RETURN(auto spec, tune::SharedOpSpec(sweep.op_packages[i], sweep.ops[i]));
      answer["timing"][sweep.ops[i]] = tune::L2TimingName(spec->timing);
    }
    ASSIGN_OR_RETURN(auto reply, Ask(farm, std::move(sweep)));
    auto* accepted = std::get_if<tune::SweepAccepted>(&reply);
    if (!accepted) return Status::Error("coordinator " + farm->to.endpoint + " sent " + tune::CommandName(reply));
    answer["sweep_id"] = accepted->sweep_id;
    return CopyString(tune::DumpJson(answer));
  });
}

char* tunefarm_farm_status(tunefarm_farm_t* farm, const char* sweep_id, char** errptr) {
  return Guard<char*>(errptr, nullptr, [&]() -> Result<char*> {
    const std::string id = sweep_id ? sweep_id : "";
    ASSIGN_OR_RETURN(auto status, AskStatus(farm, tune::SweepStatusRequest{id}));
    if (!id.empty()) {
      if (status.sweeps.empty()) return Status::Error("coordinator sent no status of sweep " + id);
      return CopyString(tune::DumpJson(tune::ProgressJson(status.sweeps.front())));
    }
    return CopyString(tune::DumpJson(tune::StatusJson(status)));
  });
}

char* tunefarm_farm_cancel(tunefarm_farm_t* farm, const char* sweep_id, char** errptr) {
  return Guard<char*>(errptr, nullptr, [&]() -> Result<char*> {
    if (!sweep_id || !*sweep_id) return Status::InvalidArgument("cancel: no sweep id");
    ASSIGN_OR_RETURN(auto status, AskStatus(farm, tune::SweepCancel{sweep_id}));
    if (status.sweeps.empty()) return Status::Error("coordinator sent no status of sweep " + std::string(sweep_id));
    return CopyString(tune::DumpJson(tune::ProgressJson(status.sweeps.front())));
  });
}

char* tunefarm_farm_results(tunefarm_farm_t* farm, const char* query_json, char** errptr) {
  return Guard<char*>(errptr, nullptr, [&]() -> Result<char*> {
    ASSIGN_OR_RETURN(Json j, ParseRequest(query_json, "results"));
    ASSIGN_OR_RETURN(auto filter, FilterOf(j, "results"));
    ASSIGN_OR_RETURN(bool best, Field<bool>(j, "best", false, "results"));
    ASSIGN_OR_RETURN(tune::Objective objective, ObjectiveOf(j, "results"));
    ASSIGN_OR_RETURN(auto store, StoreOf(farm, filter));
    std::vector<tune::Measurement> rows;
    if (best) {
      ASSIGN_OR_RETURN(rows, tune::Winners(*store, filter, {}, objective));
    } else {
      TUNE_RETURN_IF_ERROR(store->Scan(filter, [&](const tune::Measurement& m) {
        rows.push_back(m);
        return true;
      }));
    }
    const tune::RowNotes notes = tune::NotesOf(*store, rows, objective);
    return CopyString(
        tune::RenderReport(tune::MeasurementReport(std::move(rows), tune::OpsFromStore(*store), notes),
                           tune::RowFormat::kJson));
  });
}

char* tunefarm_farm_publish(tunefarm_farm_t* farm, const char* request_json, char** errptr) {
  return Guard<char*>(errptr, nullptr, [&]() -> Result<char*> {
    const char* what = "publish";
    ASSIGN_OR_RETURN(Json j, ParseRequest(request_json, what));
    ASSIGN_OR_RETURN(std::string out, Field<std::string>(j, "out", "", what));
    if (out.empty()) return Status::InvalidArgument("publish: name \"out\" (the bundle's path without extension)");
    ASSIGN_OR_RETURN(auto filter, FilterOf(j, what));
    ASSIGN_OR_RETURN(std::string name, Field<std::string>(j, "name", std::filesystem::path(out).filename().string(), what));
    ASSIGN_OR_RETURN(std::string sign_key, Field<std::string>(j, "sign_key", "", what));
    ASSIGN_OR_RETURN(bool unsigned_bundle, Field<bool>(j, "unsigned", false, what));
    tune::PublishOptions options = tune::PublishOptionsHere(true);
    ASSIGN_OR_RETURN(options.min_vs_baseline, Field<double>(j, "min_vs_baseline", 0.0, what));
    ASSIGN_OR_RETURN(options.objective, ObjectiveOf(j, what));
    if (!(options.min_vs_baseline >= 0 && options.min_vs_baseline < 1e6))
      return Status::InvalidArgument("publish: \"min_vs_baseline\" must be a number >= 0");
    std::vector<std::string> notes;
    tune::Bundle bundle;
    {
      ASSIGN_OR_RETURN(auto store, StoreOf(farm, filter));
      ASSIGN_OR_RETURN(bundle, tune::BuildBundle(*store, filter, name, options, &notes));
    }
    TUNE_RETURN_IF_ERROR(tune::WriteBundle(bundle, out, sign_key, unsigned_bundle));
    return CopyString(tune::DumpJson(
        Json{{"bundle", out + ".tfb"}, {"json", out + ".json"}, {"entries", bundle.entries.size()}, {"notes", notes}}));
  });
}

void tunefarm_farm_free(void* ptr) { std::free(ptr); }

}  // extern "C"
