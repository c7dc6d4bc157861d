// The C API (tune/c.h) over tune::runtime and tune::launcher.
#include "tune/c.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/c_strings.h"
#include "base/json_text.h"
#include "base/types.h"
#include "tune/launcher.h"
#include "tune/runtime.h"

using tune::Result;
using tune::Status;
namespace launcher = tune::launcher;
namespace runtime = tune::runtime;
using Json = nlohmann::ordered_json;

// A launcher and a kernel keep the bundle they were made from (declared
// first, released last), so that handles may be destroyed in any order: a
// garbage collector finalises what it collects in no order of ours.
struct tunefarm_bundle_t {
  std::shared_ptr<runtime::Bundle> bundle;
};
struct tunefarm_launcher_t {
  std::shared_ptr<runtime::Bundle> bundle;
  launcher::Launcher launcher;
};

namespace {

// A NamedInts laid out as tunefarm_params_t: arrays of pointers into the
// bundle's strings, which never move (a Bundle is immutable).
struct ParamsView {
  std::vector<const char*> names, texts;
  std::vector<int64_t> values;
  std::vector<int> kinds;
  tunefarm_params_t c{};

  explicit ParamsView(const runtime::NamedInts& v) {
    for (size_t i = 0; i < v.size(); ++i) {
      names.push_back(v.name(i).c_str());
      texts.push_back(v.text(i).c_str());
      values.push_back(v.value(i));
      switch (tune::ParamValue::Of(v.value(i), v.text(i)).kind()) {
        case tune::ParamValue::Kind::kBool: kinds.push_back(TUNEFARM_PARAM_BOOL); break;
        case tune::ParamValue::Kind::kString: kinds.push_back(TUNEFARM_PARAM_STRING); break;
        default: kinds.push_back(TUNEFARM_PARAM_INT); break;
      }
    }
    c = tunefarm_params_t{v.size(), names.data(), values.data(), texts.data(), kinds.data()};
  }
};

struct EntryView {
  ParamsView shape, config;
  tunefarm_entry_t c{};

  explicit EntryView(const runtime::Entry& e) : shape(e.shape), config(e.config) {
    c = tunefarm_entry_t{e.gpu_model.c_str(), shape.c,          config.c,         e.config_id.c_str(),
                         e.kernel_hash.c_str(), e.arch.c_str(), e.backend.c_str(), e.median_us,
                         e.baseline.c_str(),    e.baseline_median_us};
  }
};

}  // namespace

// Answers laid out once per config, entry and candidate list, kept by their
// address in the bundle: a lookup that answers as before allocates nothing,
// and an answer's pointers live as long as the handle.
struct tunefarm_lookup_t {
  std::shared_ptr<runtime::Bundle> bundle;
  runtime::PreparedLookup prepared;
  std::vector<std::string> dim_names;  // as bound, for errors
  // What tunefarm_bundle_lookup answers where the chain ends at the op's
  // default: the arch's default when the bundle has one (Bundle::lookup
  // with `arch`), which a PreparedLookup by dim order does not consult.
  runtime::Answer op_default;
  // Whether the bound names are the op's dims: otherwise every lookup
  // answers op_default, uncounted, as a plain lookup of those names does.
  bool names_are_ops = false;
  // The prepared lookup takes dims in the op's order, so that misses are
  // counted under the key a plain lookup counts them: dims[from[j]] is the
  // op's dim j.
  std::vector<size_t> from;
  std::unordered_map<const runtime::NamedInts*, std::unique_ptr<ParamsView>> configs;
  std::unordered_map<const runtime::Entry*, std::unique_ptr<EntryView>> entries;
  std::map<std::pair<const void*, size_t>, std::vector<const tunefarm_entry_t*>> candidates;

  const tunefarm_params_t& ConfigOf(const runtime::NamedInts* c) {
    auto& v = configs[c];
    if (!v) v = std::make_unique<ParamsView>(*c);
    return v->c;
  }
  const tunefarm_entry_t* EntryOf(const runtime::Entry* e) {
    if (!e) return nullptr;
    auto& v = entries[e];
    if (!v) v = std::make_unique<EntryView>(*e);
    return &v->c;
  }
  void Fill(const runtime::Answer& a, tunefarm_answer_t* out) {
    out->level = static_cast<int>(a.level);
    out->level_name = runtime::LevelName(a.level);
    out->config = a.config ? ConfigOf(a.config) : tunefarm_params_t{};
    out->entry = EntryOf(a.entry);
    out->ncandidates = a.candidates.size();
    out->candidates = nullptr;
    if (!a.candidates.empty()) {
      auto [it, fresh] = candidates.try_emplace({a.candidates.data(), a.candidates.size()});
      if (fresh)
        for (const runtime::Entry* e : a.candidates) it->second.push_back(EntryOf(e));
      out->candidates = it->second.data();
    }
  }
};

struct tunefarm_kernel_t {
  std::shared_ptr<runtime::Bundle> bundle;
  launcher::Kernel kernel;
  std::string error;  // of the last tunefarm_kernel_launch_args that failed
};

namespace {

using tune::CopyString;
using tune::SetError;

using tune::Guard;

Json NamedIntsJson(const runtime::NamedInts& v) {
  tune::ParamValues params;  // a categorical param's spelling makes it a string or boolean
  for (size_t i = 0; i < v.size(); ++i) params.emplace_back(v.name(i), tune::ParamValue::Of(v.value(i), v.text(i)));
  return tune::ParamsJson<Json>(params);
}

Json EntryJson(const runtime::Entry& entry) {
  Json j{{"gpu_model", entry.gpu_model}, {"shape", NamedIntsJson(entry.shape)},
         {"config_id", entry.config_id}, {"kernel_hash", entry.kernel_hash},
         {"arch", entry.arch},           {"backend", entry.backend},
         {"median_us", entry.median_us}};
  if (!entry.baseline.empty()) {
    j["baseline"] = entry.baseline;
    j["baseline_median_us"] = entry.baseline_median_us;
  }
  return j;
}

Json AnswerJson(runtime::Level level, const runtime::NamedInts* config, const runtime::Entry* entry,
                std::span<const runtime::Entry* const> candidates) {
  Json j;
  j["level"] = runtime::LevelName(level);
  j["config"] = config ? NamedIntsJson(*config) : Json(nullptr);
  j["entry"] = entry ? EntryJson(*entry) : Json(nullptr);
  if (!candidates.empty()) {
    Json list = Json::array();
    for (const runtime::Entry* c : candidates) list.push_back(Json{{"config", NamedIntsJson(c->config)}, {"entry", EntryJson(*c)}});
    j["candidates"] = std::move(list);
  }
  return j;
}

}  // namespace

extern "C" {

tunefarm_bundle_t* tunefarm_bundle_load(const char* path, const char* const* trusted, size_t ntrusted,
                                        char** errptr) {
  return Guard(errptr, static_cast<tunefarm_bundle_t*>(nullptr), [&]() -> tunefarm_bundle_t* {
    if (!path || (ntrusted > 0 && !trusted)) {
      SetError(errptr, "tunefarm_bundle_load: a required argument is NULL");
      return nullptr;
    }
    std::vector<std::string> keys;
    for (size_t i = 0; i < ntrusted; ++i)
      if (trusted[i]) keys.emplace_back(trusted[i]);
    auto b = runtime::Bundle::Load(path, keys);
    if (!b.ok()) {
      SetError(errptr, b.status().message());
      return nullptr;
    }
    return new tunefarm_bundle_t{std::make_shared<runtime::Bundle>(std::move(b).value())};
  });
}

void tunefarm_bundle_destroy(tunefarm_bundle_t* bundle) { delete bundle; }

char* tunefarm_bundle_lookup(const tunefarm_bundle_t* bundle, const char* op, const char* dtype,
                             const char* gpu_model, const char* const* dim_names, const int64_t* dim_values,
                             size_t ndims, const char* arch, char** errptr) {
  return Guard(errptr, static_cast<char*>(nullptr), [&]() -> char* {
    if (!bundle || !op || !dtype || !gpu_model || (ndims > 0 && (!dim_names || !dim_values))) {
      SetError(errptr, "tunefarm_bundle_lookup: a required argument is NULL");
      return nullptr;
    }
    std::vector<runtime::Dim> dims;
    for (size_t i = 0; i < ndims; ++i) {
      if (!dim_names[i]) {
        SetError(errptr, "tunefarm_bundle_lookup: dim name " + std::to_string(i) + " is NULL");
        return nullptr;
      }
      dims.push_back(runtime::Dim{dim_names[i], dim_values[i]});
    }
    const runtime::Answer a = bundle->bundle->lookup(op, dtype, gpu_model, dims, arch ? arch : "");
    return CopyString(tune::DumpJson(AnswerJson(a.level, a.config, a.entry, a.candidates)));
  });
}

tunefarm_lookup_t* tunefarm_lookup_prepare(const tunefarm_bundle_t* bundle, const char* op, const char* dtype,
                                           const char* gpu_model, const char* arch, const char* const* dim_names,
                                           size_t ndims, char** errptr) {
  return Guard(errptr, static_cast<tunefarm_lookup_t*>(nullptr), [&]() -> tunefarm_lookup_t* {
    if (!bundle || !op || !dtype || !gpu_model || (ndims > 0 && !dim_names)) {
      SetError(errptr, "tunefarm_lookup_prepare: a required argument is NULL");
      return nullptr;
    }
    if (ndims > runtime::kMaxDims) {
      SetError(errptr, "tunefarm_lookup_prepare: " + std::string(op) + ": " + std::to_string(ndims) +
                           " dims, more than a shape has (at most " + std::to_string(runtime::kMaxDims) + ")");
      return nullptr;
    }
    std::vector<std::string_view> order;
    for (size_t i = 0; i < ndims; ++i) {
      if (!dim_names[i]) {
        SetError(errptr, "tunefarm_lookup_prepare: " + std::string(op) + ": dim name " + std::to_string(i) + " is NULL");
        return nullptr;
      }
      if (std::find(order.begin(), order.end(), dim_names[i]) != order.end()) {
        SetError(errptr, "tunefarm_lookup_prepare: " + std::string(op) + ": dim " + dim_names[i] + " named twice");
        return nullptr;
      }
      order.emplace_back(dim_names[i]);
    }
    const runtime::Bundle& b = *bundle->bundle;
    auto h = std::make_unique<tunefarm_lookup_t>();
    h->bundle = bundle->bundle;
    h->prepared = b.prepare(op, dtype, gpu_model);
    h->dim_names.assign(order.begin(), order.end());
    // A shape of a count no op has answers the chain's default, uncounted
    // (Bundle::lookup): that default, with `arch` taken into account.
    const std::vector<std::string>* op_dims = b.dims_of(op);
    const std::vector<runtime::Dim> none((op_dims ? op_dims->size() : 0) + 1, runtime::Dim{"", 0});
    h->op_default = b.lookup(op, dtype, gpu_model, none, arch ? arch : "");
    h->names_are_ops = op_dims && op_dims->size() == ndims && h->prepared.dim_names() == *op_dims;
    for (size_t j = 0; h->names_are_ops && j < ndims; ++j) {
      const auto at = std::find(order.begin(), order.end(), (*op_dims)[j]);
      h->names_are_ops = at != order.end();
      h->from.push_back(static_cast<size_t>(at - order.begin()));
    }
    return h.release();
  });
}

void tunefarm_lookup_destroy(tunefarm_lookup_t* lookup) { delete lookup; }

int tunefarm_lookup(tunefarm_lookup_t* h, const int64_t* dims, size_t ndims, tunefarm_answer_t* answer,
                    char** errptr) {
  return Guard(errptr, -1, [&]() -> int {
    if (!h || !answer || (ndims > 0 && !dims)) {
      SetError(errptr, "tunefarm_lookup: a required argument is NULL");
      return -1;
    }
    if (ndims != h->dim_names.size()) {
      std::string names;
      for (const std::string& n : h->dim_names) names += (names.empty() ? "" : ", ") + n;
      SetError(errptr, "tunefarm_lookup: " + std::to_string(ndims) + " dims for " +
                           std::to_string(h->dim_names.size()) + " (" + names + ")");
      return -1;
    }
    for (size_t i = 0; i < ndims; ++i) {
      if (dims[i] < 0) {
        SetError(errptr, "tunefarm_lookup: dim " + h->dim_names[i] + " = " + std::to_string(dims[i]) +
                             " is negative (a dim is a size, >= 0)");
        return -1;
      }
    }
    runtime::Answer a = h->op_default;
    if (h->names_are_ops) {
      int64_t in_order[runtime::kMaxDims];
      for (size_t j = 0; j < ndims; ++j) in_order[j] = dims[h->from[j]];
      a = h->prepared.lookup(std::span<const int64_t>(in_order, ndims));
      if (a.level == runtime::Level::kDefault && !a.entry) a = h->op_default;
    }
    h->Fill(a, answer);
    return 0;
  });
}

char* tunefarm_bundle_info(const tunefarm_bundle_t* bundle, char** errptr) {
  return Guard(errptr, static_cast<char*>(nullptr), [&]() -> char* {
    if (!bundle) {
      SetError(errptr, "tunefarm_bundle_info: no bundle");
      return nullptr;
    }
    const runtime::Bundle& b = *bundle->bundle;
    Json ops = Json::object();
    for (const runtime::Entry& e : b.entries()) {
      Json& op = ops[e.op];
      if (!op.contains("dims")) {
        const std::vector<std::string>* dims = b.dims_of(e.op);
        op["dims"] = dims ? *dims : std::vector<std::string>{};
        op["dtypes"] = Json::array();
      }
      if (std::find(op["dtypes"].begin(), op["dtypes"].end(), e.dtype) == op["dtypes"].end()) op["dtypes"].push_back(e.dtype);
    }
    Json dtypes = Json::array();
    for (const tune::DTypeInfo& d : tune::kDTypeTable) dtypes.push_back(d.name);
    return CopyString(tune::DumpJson(Json{{"name", b.name()},
                                          {"farm_version", b.farm_version()},
                                          {"created_unix", b.created_unix()},
                                          {"signer_key_id", b.signer_key_id()},
                                          {"entries", b.entries().size()},
                                          {"ops", std::move(ops)},
                                          {"dtypes", std::move(dtypes)}}));
  });
}

char* tunefarm_bundle_misses(const tunefarm_bundle_t* bundle, char** errptr) {
  return Guard(errptr, static_cast<char*>(nullptr), [&]() -> char* {
    if (!bundle) {
      SetError(errptr, "tunefarm_bundle_misses: no bundle");
      return nullptr;
    }
    uint64_t dropped = 0;
    Json list = Json::array();
    for (const runtime::Miss& m : bundle->bundle->misses(&dropped)) {
      list.push_back(Json{{"op", m.op},
                          {"dtype", m.dtype},
                          {"gpu_model", m.gpu_model},
                          {"shape", NamedIntsJson(m.shape)},
                          {"level", runtime::LevelName(m.level)},
                          {"count", m.count}});
    }
    return CopyString(tune::DumpJson(Json{{"misses", std::move(list)}, {"dropped", dropped}}));
  });
}

int tunefarm_bundle_write_misses(const tunefarm_bundle_t* bundle, const char* path, char** errptr) {
  return Guard(errptr, -1, [&]() -> int {
    if (!bundle || !path) {
      SetError(errptr, "tunefarm_bundle_write_misses: a required argument is NULL");
      return -1;
    }
    if (Status st = bundle->bundle->WriteMisses(path); !st.ok()) {
      SetError(errptr, st.message());
      return -1;
    }
    return 0;
  });
}

tunefarm_launcher_t* tunefarm_launcher_open(const tunefarm_bundle_t* bundle, int ordinal, char** errptr) {
  return Guard(errptr, static_cast<tunefarm_launcher_t*>(nullptr), [&]() -> tunefarm_launcher_t* {
    if (!bundle) {
      SetError(errptr, "tunefarm_launcher_open: no bundle");
      return nullptr;
    }
    auto l = launcher::Launcher::Open(*bundle->bundle, ordinal);
    if (!l.ok()) {
      SetError(errptr, l.status().message());
      return nullptr;
    }
    return new tunefarm_launcher_t{bundle->bundle, std::move(l).value()};
  });
}

void tunefarm_launcher_destroy(tunefarm_launcher_t* launcher) { delete launcher; }

char* tunefarm_launcher_device(const tunefarm_launcher_t* l) {
  return Guard(nullptr, static_cast<char*>(nullptr), [&]() -> char* {
    if (!l) return nullptr;
    const launcher::Device& d = l->launcher.device();
    return CopyString(tune::DumpJson(Json{{"ordinal", d.ordinal},   {"name", d.name},
                                          {"model", d.model},       {"arch", l->launcher.arch()},
                                          {"smem_optin", d.smem_optin}, {"num_sms", d.num_sms}}));
  });
}

tunefarm_kernel_t* tunefarm_kernel_prepare(tunefarm_launcher_t* l, const char* op, const char* dtype, char** errptr) {
  return Guard(errptr, static_cast<tunefarm_kernel_t*>(nullptr), [&]() -> tunefarm_kernel_t* {
    if (!l || !op || !dtype) {
      SetError(errptr, "tunefarm_kernel_prepare: a required argument is NULL");
      return nullptr;
    }
    auto k = l->launcher.prepare(op, dtype);
    if (!k.ok()) {
      SetError(errptr, k.status().message());
      return nullptr;
    }
    return new tunefarm_kernel_t{l->bundle, std::move(k).value(), ""};
  });
}

void tunefarm_kernel_destroy(tunefarm_kernel_t* kernel) { delete kernel; }

char* tunefarm_kernel_signature(const tunefarm_kernel_t* k) {
  return Guard(nullptr, static_cast<char*>(nullptr), [&]() -> char* {
    if (!k) return nullptr;
    return CopyString(
        tune::DumpJson(Json{{"dims", k->kernel.dim_names()},
                            {"buffers", k->kernel.buffer_names()},
                            {"dirs", k->kernel.buffer_dirs()}}));
  });
}

int tunefarm_kernel_launch(tunefarm_kernel_t* k, const int64_t* dims, size_t ndims, const uint64_t* buffers,
                           size_t nbuffers, void* stream, char** errptr) {
  return Guard(errptr, -1, [&]() -> int {
    if (!k || (ndims > 0 && !dims) || (nbuffers > 0 && !buffers)) {
      SetError(errptr, "tunefarm_kernel_launch: a required argument is NULL");
      return -1;
    }
    Status st = k->kernel.launch(std::span<const int64_t>(dims, ndims), std::span<const uint64_t>(buffers, nbuffers),
                                 stream);
    if (!st.ok()) {
      SetError(errptr, st.message());
      return -1;
    }
    return 0;
  });
}

// Python's ctypes mirror (tunefarm._LaunchArgs) lays the block out so.
static_assert(offsetof(tunefarm_launch_args_t, stream) == 16 && offsetof(tunefarm_launch_args_t, buffers) == 24 &&
              sizeof(tunefarm_launch_args_t) == 24 + 8 * TUNEFARM_LAUNCH_MAX_BUFFERS);

int tunefarm_kernel_launch_args(const tunefarm_launch_args_t* a) {
  if (!a || !a->kernel) return -1;
  tunefarm_kernel_t* k = a->kernel;
  // Guard's work without its string: nothing is allocated unless it fails.
  try {
    const size_t nbuffers = k->kernel.buffer_names().size();
    if (nbuffers > TUNEFARM_LAUNCH_MAX_BUFFERS) {
      k->error = "launch: " + std::to_string(nbuffers) + " buffers, more than a launch block holds (" +
                 std::to_string(TUNEFARM_LAUNCH_MAX_BUFFERS) + "): use tunefarm_kernel_launch";
      return -1;
    }
    Status st = k->kernel.launch(std::span<const int64_t>(a->dims, k->kernel.dim_names().size()),
                                 std::span<const uint64_t>(a->buffers, nbuffers), a->stream);
    if (st.ok()) return 0;
    k->error = st.message();
  } catch (const std::exception& e) {
    k->error = std::string("tunefarm: ") + e.what();
  } catch (...) {
    k->error = "tunefarm: unknown error";
  }
  return -1;
}

char* tunefarm_kernel_error(const tunefarm_kernel_t* k) { return CopyString(k ? k->error : "no kernel"); }

char* tunefarm_kernel_last(const tunefarm_kernel_t* k) {
  return Guard(nullptr, static_cast<char*>(nullptr), [&]() -> char* {
    if (!k) return nullptr;
    const launcher::Choice& c = k->kernel.last();
    Json j = AnswerJson(c.level, c.config, c.entry, c.candidates);
    j["arch"] = c.arch;
    j["grid"] = {c.grid[0], c.grid[1], c.grid[2]};
    j["block"] = {c.block[0], c.block[1], c.block[2]};
    j["smem_bytes"] = c.smem_bytes;
    j["replayed"] = c.replayed;
    return CopyString(tune::DumpJson(j));
  });
}

void tunefarm_free(void* ptr) { std::free(ptr); }

}  // extern "C"
