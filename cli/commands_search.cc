// `tunefarm search replay`: search strategies scored against stored
// exhaustive sweeps, with no GPU (search/replay.h).
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <memory>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/json_text.h"
#include "base/limits.h"
#include "command_util.h"
#include "commands.h"
#include "search/features.h"
#include "search/registry.h"
#include "search/replay.h"
#include "bundle/shape_selector.h"
#include "report/t4.h"

namespace tune {
namespace {

struct ReplayArgs {
  std::string store, results, format = "table";
  std::string warm_from;     // priors from this file's keys of the same op and dtype
  bool warm_shapes = false;  // priors from the other shapes of the same GPU model
  std::vector<std::string> strategies = SearchingStrategyNames();
  uint64_t budget = 0;
  uint32_t seeds = 20, batch = 16;
  uint32_t in_flight = 0;  // 0: lock-step
  uint64_t seed = 0;
  ResultFilter filter;
  ClientArgs remote{.endpoint = "", .curve_secret_key = "", .coordinator_key = ""};  // --coordinator: read into memory
};

// The lines of a text file, gzip-compressed or not (zlib reads both), one
// at a time. Decompressed bytes are counted as they are inflated and
// refused past kMaxReplayInputBytes; a line past kMaxInputLineBytes is
// refused by its number. Memory is one buffer and one line, whatever the
// file holds. Errors name the file (and the line), and say so on a stop.
class InputLines {
 public:
  InputLines(std::string path, const std::atomic<bool>* stop) : path_(std::move(path)), stop_(stop) {}
  ~InputLines() {
    if (f_) gzclose(f_);
  }
  InputLines(const InputLines&) = delete;
  InputLines& operator=(const InputLines&) = delete;

  Status Open() {
    f_ = gzopen(path_.c_str(), "rb");
    return f_ ? Status::OK() : Status::IOError(path_ + ": cannot open");
  }

  // The next line, without its end, into `*line`; false at the end of the
  // file or on an error (status() says which).
  bool Next(std::string* line) {
    line->clear();
    for (;;) {
      if (pos_ == len_ && !Fill()) {
        if (!status_.ok() || line->empty()) return false;
        break;  // a last line with no end
      }
      const char* begin = buf_.data() + pos_;
      const void* nl = std::memchr(begin, '\n', len_ - pos_);
      const size_t take = nl ? static_cast<const char*>(nl) - begin : len_ - pos_;
      if (line->size() + take > kMaxInputLineBytes) {
        status_ = Status::InvalidArgument(path_ + ":" + std::to_string(number_ + 1) + ": a line over " +
                                          std::to_string(kMaxInputLineBytes) + " bytes (kMaxInputLineBytes)");
        return false;
      }
      line->append(begin, take);
      pos_ += take;
      if (nl) {
        ++pos_;
        break;
      }
    }
    ++number_;
    if (!line->empty() && line->back() == '\r') line->pop_back();
    return true;
  }

  size_t number() const { return number_; }  // of the line Next gave last
  const Status& status() const { return status_; }

 private:
  // Inflates the next buffer; false at the end or on an error.
  bool Fill() {
    if (done_) return false;
    if (stop_ && stop_->load()) {
      status_ = Status::Error(path_ + ": stopped (SIGINT or SIGTERM) while reading");
      return false;
    }
    const int n = gzread(f_, buf_.data(), static_cast<unsigned>(buf_.size()));
    int err = Z_OK;
    gzerror(f_, &err);
    if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) {
      status_ = Status::IOError(path_ + ": not a readable text or gzip file");
      return false;
    }
    if (n == 0) {
      done_ = true;
      return false;
    }
    bytes_ += static_cast<uint64_t>(n);
    if (bytes_ > kMaxReplayInputBytes) {
      status_ = Status::InvalidArgument(path_ + ": over " + std::to_string(kMaxReplayInputBytes) +
                                        " bytes decompressed (kMaxReplayInputBytes); refused at line " +
                                        std::to_string(number_ + 1));
      return false;
    }
    pos_ = 0;
    len_ = static_cast<size_t>(n);
    return true;
  }

  const std::string path_;
  const std::atomic<bool>* const stop_;
  gzFile f_ = nullptr;
  std::vector<char> buf_ = std::vector<char>(size_t(64) << 10);
  size_t pos_ = 0, len_ = 0, number_ = 0;
  uint64_t bytes_ = 0;
  bool done_ = false;
  Status status_;
};

// A shape as `results --format csv` writes it: NAME=VALUE parts joined by
// ',', each name an identifier ([A-Za-z_][A-Za-z0-9_]*, at most 64 bytes)
// given once, each value a positive integer, at most kMaxOpDims parts. An
// error names the part.
Status ParseShapeText(const std::string& text, Shape* out) {
  out->dims.clear();
  if (text.empty()) return Status::InvalidArgument("empty");
  for (size_t pos = 0;;) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(pos, end - pos);
    const size_t eq = part.find('=');
    const std::string name = part.substr(0, eq);
    bool ident = !name.empty() && name.size() <= 64 && !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (eq == std::string::npos || !ident)
      return Status::InvalidArgument("'" + part.substr(0, 80) + "' is not NAME=VALUE with an identifier NAME");
    int64_t v = 0;
    const char* first = part.data() + eq + 1;
    const char* last = part.data() + part.size();
    const auto [ptr, ec] = std::from_chars(first, last, v);
    if (first == last || ec != std::errc() || ptr != last || v < 1)
      return Status::InvalidArgument(name + ": '" + part.substr(eq + 1, 80) + "' is not a positive integer");
    for (const auto& [n, _] : out->dims)
      if (n == name) return Status::InvalidArgument(name + " given twice");
    if (out->dims.size() >= kMaxOpDims)
      return Status::InvalidArgument("over " + std::to_string(kMaxOpDims) + " dims (kMaxOpDims)");
    out->dims.emplace_back(name, v);
    if (end == text.size()) return Status::OK();
    pos = end + 1;
  }
}

// One CSV record (RFC 4180 quoting); false on an unclosed quote.
bool SplitCsv(const std::string& line, std::vector<std::string>* out) {
  out->clear();
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out->push_back(std::move(field));
      field.clear();
    } else {
      field += c;
    }
  }
  out->push_back(std::move(field));
  return !quoted;
}

using KeyOf = std::tuple<std::string, std::string, std::string, std::string>;  // model, op, dtype, shape

// Adds a row to its key's ground truth; a config seen twice keeps its
// faster valid figure (a refined row beside a screening one). Errors: a
// shape that ParseShapeText refuses, a key past kMaxReplayKeyConfigs
// configs (each message without the file or line; the caller adds them).
Status AddRow(std::map<KeyOf, GroundTruth>& keys, std::map<KeyOf, std::map<std::string, size_t>>& index,
              const KeyOf& key, const Config& config, std::optional<double> us) {
  auto found = keys.find(key);
  if (found == keys.end()) {
    GroundTruth t;
    if (Status st = ParseShapeText(std::get<3>(key), &t.shape); !st.ok())
      return Status::InvalidArgument("shape: " + st.message());
    t.key = std::get<0>(key) + " " + std::get<1>(key) + "/" + std::get<2>(key) + " " + std::get<3>(key);
    t.gpu_model = std::get<0>(key);
    t.op = std::get<1>(key);
    t.dtype = std::get<2>(key);
    found = keys.emplace(key, std::move(t)).first;
  }
  GroundTruth& t = found->second;
  auto [it, fresh] = index[key].emplace(config.Canonical(), t.configs.size());
  if (fresh) {
    if (t.configs.size() >= kMaxReplayKeyConfigs) {
      index[key].erase(it);
      return Status::InvalidArgument("key " + t.key.substr(0, 200) + ": over " + std::to_string(kMaxReplayKeyConfigs) +
                                     " configs (kMaxReplayKeyConfigs)");
    }
    t.configs.push_back(config);
    t.us.push_back(us);
  } else if (us && (!t.us[it->second] || *us < *t.us[it->second])) {
    t.us[it->second] = us;
  }
  return Status::OK();
}

bool Matches(const ResultFilter& f, const KeyOf& k) {
  return (f.gpu_model.empty() || f.gpu_model == std::get<0>(k)) && (f.op.empty() || f.op == std::get<1>(k)) &&
         (f.dtype.empty() || f.dtype == std::get<2>(k)) && (f.shape.empty() || f.shape == std::get<3>(k));
}

// Ground truth from `tunefarm results --format csv` output (gzip or not),
// read a line at a time within the bounds of InputLines; a config of more
// than kMaxOpParams params is refused by its line.
Result<std::vector<GroundTruth>> TruthFromCsv(const std::string& path, const ResultFilter& filter,
                                              const std::atomic<bool>* stop) {
  InputLines lines(path, stop);
  if (Status st = lines.Open(); !st.ok()) return st;
  std::string line;
  if (!lines.Next(&line)) return lines.status().ok() ? Status::InvalidArgument(path + ": empty") : lines.status();
  std::vector<std::string> header, f;
  SplitCsv(line, &header);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* need : {"gpu_model", "op", "dtype", "shape", "config", "status", "median_us"})
    if (!col.count(need))
      return Status::InvalidArgument(path + ": line 1: no column '" + need +
                                     "' (expected `tunefarm results --format csv` output)");
  std::map<KeyOf, GroundTruth> keys;
  std::map<KeyOf, std::map<std::string, size_t>> index;
  while (lines.Next(&line)) {
    const std::string where = path + ":" + std::to_string(lines.number()) + ": ";
    if (line.empty()) continue;
    if (!SplitCsv(line, &f) || f.size() != header.size())
      return Status::InvalidArgument(where + "not a record of " + std::to_string(header.size()) + " fields");
    const KeyOf key{f[col["gpu_model"]], f[col["op"]], f[col["dtype"]], f[col["shape"]]};
    if (!Matches(filter, key)) continue;
    Config config;
    if (!ParseParamValues(f[col["config"]], &config.params) || config.params.empty())
      return Status::InvalidArgument(where + "config: not NAME=VALUE,... ('" + f[col["config"]].substr(0, 80) + "')");
    if (config.params.size() > kMaxOpParams)
      return Status::InvalidArgument(where + "config: " + std::to_string(config.params.size()) +
                                     " params, over the bound of " + std::to_string(kMaxOpParams) + " (kMaxOpParams)");
    std::optional<double> us;
    // "ok" and "unchecked" rows have a figure ("none": files written before
    // the outputs shared one status vocabulary).
    const std::string& status = f[col["status"]];
    if (status == "ok" || status == "unchecked" || status == "none") {
      char* end = nullptr;
      const double v = std::strtod(f[col["median_us"]].c_str(), &end);
      if (end == f[col["median_us"]].c_str() || *end != '\0' || !std::isfinite(v) || v <= 0)
        return Status::InvalidArgument(where + "median_us: not a finite positive number");
      us = v;
    }
    if (Status st = AddRow(keys, index, key, config, us); !st.ok()) return Status::InvalidArgument(where + st.message());
  }
  if (!lines.status().ok()) return lines.status();
  std::vector<GroundTruth> out;
  for (auto& [k, t] : keys) out.push_back(std::move(t));
  return out;
}

// The whole of a file, gzip-compressed or not (zlib reads both), refused
// past kMaxReplayInputBytes decompressed; at most `limit` bytes when given
// (a peek at the head). Errors name the file, and say so on a stop.
Result<std::string> ReadInput(const std::string& path, const std::atomic<bool>* stop, uint64_t limit = 0) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return Status::IOError(path + ": cannot open");
  std::string out;
  std::vector<char> buf(size_t(64) << 10);
  Status st;
  for (;;) {
    if (stop && stop->load()) {
      st = Status::Error(path + ": stopped (SIGINT or SIGTERM) while reading");
      break;
    }
    const int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    int err = Z_OK;
    gzerror(f, &err);
    if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) {
      st = Status::IOError(path + ": not a readable text or gzip file");
      break;
    }
    if (n == 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
    if (limit && out.size() >= limit) break;
    if (out.size() > kMaxReplayInputBytes) {
      st = Status::InvalidArgument(path + ": over " + std::to_string(kMaxReplayInputBytes) +
                                   " bytes decompressed (kMaxReplayInputBytes)");
      break;
    }
  }
  gzclose(f);
  if (!st.ok()) return st;
  return out;
}

// Ground truth from a T4 results document (report/t4.h: Kernel Tuner's
// format, or `tunefarm results --format t4`), gzip or not. A result without
// tunefarm metadata belongs to the key `defaults` names.
Result<std::vector<GroundTruth>> TruthFromT4(const std::string& path, const ResultFilter& filter, const T4Key& defaults,
                                             const std::atomic<bool>* stop) {
  auto text = ReadInput(path, stop);
  if (!text.ok()) return text.status();
  std::map<KeyOf, GroundTruth> keys;
  std::map<KeyOf, std::map<std::string, size_t>> index;
  Status st = ReadT4Results(*text, path, defaults, [&](const T4Row& r) {
    const KeyOf key{r.gpu_model, r.op, r.dtype, r.shape};
    if (!Matches(filter, key)) return Status::OK();
    return AddRow(keys, index, key, r.config, r.us);
  });
  if (!st.ok()) return st;
  std::vector<GroundTruth> out;
  for (auto& [k, t] : keys) out.push_back(std::move(t));
  return out;
}

// Ground truth from a file, by its content: a T4 document (JSON) or
// `tunefarm results --format csv` output.
Result<std::vector<GroundTruth>> TruthFromFile(const std::string& path, const ResultFilter& filter,
                                               const std::atomic<bool>* stop) {
  auto head = ReadInput(path, stop, 4096);
  if (!head.ok()) return head.status();
  if (!LooksLikeT4(*head)) return TruthFromCsv(path, filter, stop);
  // A T4 result without tunefarm metadata is of the key the filter names.
  T4Key defaults;
  if (!filter.gpu_model.empty()) defaults.gpu_model = filter.gpu_model;
  if (!filter.op.empty()) defaults.op = filter.op;
  if (!filter.dtype.empty()) defaults.dtype = filter.dtype;
  if (!filter.shape.empty()) defaults.shape = filter.shape;
  return TruthFromT4(path, filter, defaults, stop);
}

// Ground truth from a store (a folder's, or a farm's rows in memory): the
// rows of each key's newest kernel, for the keys whose coverage says
// exhausted. `name` names the store in errors.
Result<std::vector<GroundTruth>> TruthFromStore(ResultReader& store, const std::string& name,
                                                const ResultFilter& filter) {
  std::vector<Measurement> rows;
  Status st = store.Scan(filter, [&](const Measurement& m) {
    rows.push_back(m);
    return true;
  });
  if (!st.ok()) return st;
  rows = NewestKernelOnly(std::move(rows));
  // Only keys whose sweep measured every legal config are ground truth.
  std::map<KeyOf, bool> exhausted;
  for (const Measurement& m : rows) {
    const KeyOf key{m.gpu_model, m.op, m.dtype, m.shape};
    if (exhausted.count(key)) continue;
    auto c = store.GetCoverage(m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash);
    exhausted[key] = c.ok() && *c && (*c)->state == KeyCoverage::State::kExhausted;
  }
  std::map<KeyOf, GroundTruth> keys;
  std::map<KeyOf, std::map<std::string, size_t>> index;
  for (const Measurement& m : rows) {
    const KeyOf key{m.gpu_model, m.op, m.dtype, m.shape};
    if (!exhausted[key]) continue;
    const bool valid = m.Valid() && m.median_us > 0;
    if (Status st = AddRow(keys, index, key, m.config, valid ? std::optional<double>(m.median_us) : std::nullopt);
        !st.ok())
      return Status::InvalidArgument(name + ": " + st.message());
  }
  std::vector<GroundTruth> out;
  for (auto& [k, t] : keys) out.push_back(std::move(t));
  return out;
}

// The priors of `t` (warm start): what the `sources` keys of its op and
// dtype measured, other than `t` itself; with `same_model`, only those of
// its GPU model (other shapes).
std::vector<PriorTrial> PriorsFor(const GroundTruth& t, const std::vector<GroundTruth>& sources, bool same_model) {
  std::vector<PriorTrial> out;
  for (const GroundTruth& s : sources) {
    if (s.op != t.op || s.dtype != t.dtype) continue;
    if (s.gpu_model == t.gpu_model && s.shape.Canonical() == t.shape.Canonical()) continue;
    if (same_model && s.gpu_model != t.gpu_model) continue;
    std::vector<std::pair<Config, double>> valid;
    for (size_t i = 0; i < s.configs.size(); ++i)
      if (s.us[i]) valid.emplace_back(s.configs[i], *s.us[i]);
    for (PriorTrial& p : PriorsOfKey(std::move(valid), KeyFeatures(s.shape, s.gpu_model))) out.push_back(std::move(p));
  }
  return out;
}

std::string Evals(uint64_t n, bool reached, uint64_t legal) {
  if (!reached) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%llu (%.1f%%)", static_cast<unsigned long long>(n), 100.0 * n / legal);
  return buf;
}

int RunReplay(const ReplayArgs& args, const std::atomic<bool>* stop) {
  const bool from_store = !args.store.empty() || !args.remote.endpoint.empty();
  if (from_store == !args.results.empty())
    return Usage("search replay: name one of --store, --coordinator and --results");
  for (const std::string& s : args.strategies)
    if (Status st = CheckStrategyName(s, "--strategy"); !st.ok()) return Usage(st.message());
  if (args.budget > kMaxSearchBudget)
    return Usage("--budget: at most " + std::to_string(kMaxSearchBudget) + " evaluations per key");
  if (args.in_flight != 0 && args.in_flight < args.batch)
    return Usage("--in-flight: " + std::to_string(args.in_flight) + " is fewer than a batch (--batch " +
                 std::to_string(args.batch) + ")");
  const std::string source = args.remote.endpoint.empty() ? args.store : "the farm at " + args.remote.endpoint;
  Result<std::vector<GroundTruth>> truth = std::vector<GroundTruth>{};
  if (from_store) {
    auto store = OpenStoreOf(args.store, args.remote, {args.filter});
    if (!store.ok()) return Fail(store.status().message());
    truth = TruthFromStore(**store, source, args.filter);
  } else {
    truth = TruthFromFile(args.results, args.filter, stop);
  }
  if (!truth.ok()) return Fail(truth.status().message());
  if (truth->empty() && from_store)
    return Fail(source + ": no exhaustive key to replay (coverage 'exhausted': a sweep that measured every legal "
                "config; `best --format json` shows each key's coverage)");
  if (truth->empty()) return Fail(args.results + ": no key to replay (none matches the filter)");
  std::vector<GroundTruth> warm;
  if (!args.warm_from.empty()) {
    auto w = TruthFromFile(args.warm_from, ResultFilter{}, stop);
    if (!w.ok()) return Fail(w.status().message());
    warm = std::move(w).value();
  }

  nlohmann::json out = nlohmann::json::array();
  if (args.format == "table") {
    if (args.in_flight > args.batch)
      std::printf("batch %u, %u in flight (%u units measured at a time, finishing in a seeded order), %u seeds\n",
                  args.batch, args.in_flight, args.in_flight / args.batch, args.seeds);
    else
      std::printf("batch %u, lock-step (each batch proposed once the one before is measured), %u seeds\n",
                  args.batch, args.seeds);
    std::printf("%-58s %6s  %-13s %-22s %-22s %-22s %s\n", "key", "legal", "strategy", "to 1%: median / p90",
                "to 2%: median / p90", "to 5%: median / p90", "vs random (2%)");
  }
  // Where it is, on stderr: a terminal's line redrawn, else a line every
  // ten seconds (a replay of many keys runs for minutes).
  const bool tty = isatty(fileno(stderr));
  double last_said = -1e9;  // the first seed is said at once
  size_t key_index = 0;
  for (const GroundTruth& t : *truth) {
    ++key_index;
    std::map<std::string, ReplayResult> by_name;
    std::vector<std::string> names = args.strategies;
    if (std::find(names.begin(), names.end(), kBaselineStrategy) == names.end()) names.push_back(kBaselineStrategy);
    for (const std::string& name : names) {
      ReplayOptions o;
      if (!args.warm_from.empty() || args.warm_shapes) {
        o.priors = PriorsFor(t, args.warm_shapes ? *truth : warm, args.warm_shapes);
        if (!args.warm_from.empty() && args.warm_shapes) {
          for (PriorTrial& p : PriorsFor(t, warm, false)) o.priors.push_back(std::move(p));
        }
        o.key_features = KeyFeatures(t.shape, t.gpu_model);
      }
      o.search.strategy = name;
      o.search.budget = args.budget;
      o.search.seed = args.seed;
      o.seeds = args.seeds;
      o.batch = args.batch;
      o.in_flight = args.in_flight;
      o.stop = stop;
      o.on_seed = [&](uint32_t done) {
        const double now = NowSeconds();
        if (!tty && now - last_said < 10) return;
        last_said = now;
        std::fprintf(stderr, "%sreplay: key %zu of %zu (%s), %s: seed %u of %u%s", tty ? "\r\033[K" : "", key_index,
                     truth->size(), t.key.c_str(), name.c_str(), done, args.seeds, tty ? "" : "\n");
        std::fflush(stderr);
      };
      auto r = Replay(t, o);
      if (!r.ok()) return Fail(r.status().message());
      for (const std::string& w : r->warnings) std::fprintf(stderr, "tunefarm: warning: %s: %s\n", t.key.c_str(), w.c_str());
      by_name[name] = std::move(r).value();
    }
    if (tty) std::fprintf(stderr, "\r\033[K");  // the key's rows print where the progress line was
    const ReplayFigure& random2 = by_name[kBaselineStrategy].figures[1];
    for (const std::string& name : args.strategies) {
      const ReplayResult& r = by_name[name];
      const ReplayFigure& f2 = r.figures[1];
      double ratio = 0;
      if (f2.median_reached && random2.median_reached && f2.median > 0)
        ratio = static_cast<double>(random2.median) / static_cast<double>(f2.median);
      if (args.format == "table") {
        std::string cells[3];
        for (int w = 0; w < 3; ++w) {
          const ReplayFigure& f = r.figures[w];
          cells[w] = Evals(f.median, f.median_reached, r.legal) + " / " + Evals(f.p90, f.p90_reached, r.legal);
        }
        char ratio_text[32] = "-";
        if (ratio > 0) std::snprintf(ratio_text, sizeof ratio_text, "%.1fx fewer", ratio);
        std::printf("%-58s %6llu  %-13s %-22s %-22s %-22s %s\n", r.key.c_str(),
                    static_cast<unsigned long long>(r.legal), r.strategy.c_str(), cells[0].c_str(), cells[1].c_str(),
                    cells[2].c_str(), ratio_text);
      } else {
        nlohmann::json j = {{"key", r.key},           {"legal", r.legal},      {"valid", r.valid},
                            {"best_us", r.best_us},   {"strategy", r.strategy}, {"seeds", args.seeds},
                            {"batch", args.batch},    {"in_flight", std::max(args.in_flight, args.batch)},
                            {"budget", args.budget},  {"vs_random_at_2pct", ratio}};
        for (const ReplayFigure& f : r.figures) {
          j["within"].push_back({{"within", f.within},
                                 {"reached", f.reached},
                                 {"median", f.median_reached ? nlohmann::json(f.median) : nlohmann::json()},
                                 {"p90", f.p90_reached ? nlohmann::json(f.p90) : nlohmann::json()}});
        }
        out.push_back(std::move(j));
      }
    }
  }
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (args.format == "json") std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

// `search predict`: each tuned shape held out in turn, the selector fitted on
// the others answers it; its config's figure there against the shape's
// best, and against the nearest tuned shape's own winner (what lookups
// answered before), in geometric mean.
int RunPredict(const std::string& results, uint32_t top, const std::string& format, const std::atomic<bool>* stop) {
  const bool json = format == "json";
  nlohmann::ordered_json held_out = nlohmann::ordered_json::array();
  auto truth = TruthFromFile(results, ResultFilter{}, stop);
  if (!truth.ok()) return Fail(truth.status().message());
  std::map<std::string, std::vector<const GroundTruth*>> groups;  // model op/dtype
  for (const GroundTruth& t : *truth) groups[t.gpu_model + " " + t.op + "/" + t.dtype].push_back(&t);
  // Each group's fits cost its shapes cubed in all: refused before any runs.
  for (const auto& [name, keys] : groups)
    if (keys.size() > kMaxFitShapes)
      return Fail(results + ": " + name.substr(0, 200) + ": " + std::to_string(keys.size()) +
                  " tuned shapes, over the bound of " + std::to_string(kMaxFitShapes) +
                  " a shape selector is fitted on (kMaxFitShapes)");
  // Per key, once: its valid figures by config, and its configs fastest first.
  struct Figures {
    std::map<std::string, double> us;  // canonical config -> figure
    std::vector<const Config*> fastest;
  };
  std::map<const GroundTruth*, Figures> figures;
  for (const GroundTruth& t : *truth) {
    Figures& f = figures[&t];
    std::vector<std::pair<double, size_t>> v;
    for (size_t i = 0; i < t.configs.size(); ++i)
      if (t.us[i]) v.emplace_back(*t.us[i], i), f.us.emplace(t.configs[i].Canonical(), *t.us[i]);
    std::sort(v.begin(), v.end());
    for (size_t i = 0; i < std::min<size_t>(top, v.size()); ++i) f.fastest.push_back(&t.configs[v[i].second]);
  }
  auto figure = [&](const GroundTruth* t, const std::string& canonical) {
    const auto& us = figures[t].us;
    const auto it = us.find(canonical);
    return it == us.end() ? std::numeric_limits<double>::infinity() : it->second;
  };
  if (!json)
    std::printf("%-36s %-22s %-52s %10s %12s\n", "group", "held-out shape", "predicted config", "vs best", "nearest's");
  double log_pred = 0, log_near = 0;
  size_t cases = 0;
  for (const auto& [name, keys] : groups) {
    if (keys.size() < 2) continue;
    for (size_t h = 0; h < keys.size(); ++h) {
      if (stop && stop->load()) return Fail("search predict: stopped (SIGINT or SIGTERM)");
      if (figures[keys[h]].fastest.empty()) continue;  // nothing valid to score against
      SelectorInput in;
      std::vector<const GroundTruth*> train;
      for (size_t s = 0; s < keys.size(); ++s)
        if (s != h) train.push_back(keys[s]), in.shapes.push_back(keys[s]->shape);
      std::vector<std::string> canonical;
      std::set<std::string> have;
      for (const GroundTruth* t : train)
        for (const Config* c : figures[t].fastest)
          if (have.insert(c->Canonical()).second) in.candidates.push_back(*c), canonical.push_back(c->Canonical());
      if (in.candidates.size() > kMaxSelectorCandidates) continue;  // more than a selector takes: no fit
      for (const std::string& c : canonical) {
        in.us.emplace_back();
        for (const GroundTruth* t : train) in.us.back().push_back(figure(t, c));
      }
      const ShapeSelector sel = FitShapeSelector(in);
      const size_t near = NearestShape(in.shapes, keys[h]->shape);
      if (near == SIZE_MAX || sel.nodes.empty()) continue;
      const std::vector<double> features = ShapeFeatures(sel.dims, keys[h]->shape);
      const size_t answer = sel.candidates[SelectorAnswer(sel.nodes, features.data())];
      const Config& predicted = in.candidates[answer];
      const double best = figure(keys[h], figures[keys[h]].fastest.front()->Canonical());
      const double pred = figure(keys[h], canonical[answer]) / best;
      const double nearest = figures[train[near]].fastest.empty()
                                 ? std::numeric_limits<double>::infinity()
                                 : figure(keys[h], figures[train[near]].fastest.front()->Canonical()) / best;
      if (json) {
        held_out.push_back({{"group", name}, {"shape", keys[h]->shape.Canonical()},
                            {"predicted", predicted.Canonical()}, {"vs_best", pred}, {"nearest_vs_best", nearest}});
      } else {
        std::printf("%-36s %-22s %-52s %9.3fx %11.3fx\n", name.c_str(), keys[h]->shape.Canonical().c_str(),
                    predicted.Canonical().c_str(), pred, nearest);
        std::fflush(stdout);
      }
      log_pred += std::log(pred);
      log_near += std::log(nearest);
      ++cases;
    }
  }
  if (cases == 0) return Fail(results + ": no (GPU model, op, dtype) with two or more shapes to hold out");
  if (json) {
    const nlohmann::ordered_json doc = {{"held_out", held_out},
                                        {"geomean_vs_best", std::exp(log_pred / cases)},
                                        {"nearest_geomean_vs_best", std::exp(log_near / cases)}};
    std::printf("%s\n", DumpJson(doc, 2).c_str());
    return 0;
  }
  std::printf("geometric mean over %zu held-out shapes: predicted %.3fx of the best, nearest tuned shape's winner %.3fx\n",
              cases, std::exp(log_pred / cases), std::exp(log_near / cases));
  return 0;
}

}  // namespace

Result<std::shared_ptr<const SimTruth>> SimTruthFromCsv(const std::string& path) {
  auto truth = TruthFromCsv(path, ResultFilter{}, nullptr);
  if (!truth.ok()) return truth.status();
  auto table = std::make_shared<SimTruth>();
  for (const GroundTruth& t : *truth)
    for (size_t i = 0; i < t.configs.size(); ++i)
      if (t.us[i]) table->Add(t.gpu_model, t.op, t.dtype, t.shape, t.configs[i], *t.us[i]);
  if (table->size() == 0) return Status::InvalidArgument(path + ": no row with a figure (status ok or unchecked)");
  return std::shared_ptr<const SimTruth>(std::move(table));
}

void AddSearchCommands(CLI::App& app, std::vector<CliCommand>* out) {
  const auto args = std::make_shared<ReplayArgs>();
  auto* search = app.add_subcommand("search", "Search strategies: replay them against stored exhaustive sweeps");
  search->require_subcommand(1);
  auto* replay = search->add_subcommand(
      "replay",
      "Run strategies against exhaustive sweeps with no GPU: evaluations each needs to come within 1%, 2% and 5% "
      "of the exhaustive best (median and p90 over seeds), and how many fewer than random search");
  AddRemoteReadOptions(replay, &args->remote,
                       replay->add_option("--store", args->store, "RocksDB store of exhaustive sweeps (opened read-only)"));
  replay->add_option("--results,--truth", args->results,
                     "Or: exhaustive sweeps as `tunefarm results --format csv` output or a T4 results document "
                     "(JSON: `results --format t4`, Kernel Tuner's); gzip or plain. A T4 result without tunefarm "
                     "metadata is of the key --gpu, --op, --dtype and --shape name (default t4, t4, t4, problem=1)");
  replay->add_option("--strategy", args->strategies, "Strategies to score: " + StrategyHelp())
      ->delimiter(',')
      ->capture_default_str();
  replay->add_option("--budget", args->budget, "Evaluations per key and seed (default: the whole space)");
  replay->add_option("--seeds", args->seeds, "Seeds per strategy and key")->capture_default_str()->check(CLI::Range(1, 1000));
  replay->add_option("--seed", args->seed, "First seed")->capture_default_str();
  replay->add_option("--batch", args->batch, "Configs proposed at a time, as a unit of a farm")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  replay->add_option("--in-flight", args->in_flight,
                     "Configs proposed and not yet measured, at most, as a farm's pipeline: a batch is proposed "
                     "whenever that leaves room for one, and units finish in an order seeded per seed (at least "
                     "--batch; default: lock-step, each batch proposed once the one before is measured)")
      ->check(CLI::Range(1, 4096));
  replay->add_option("--warm-from", args->warm_from,
                     "Warm start: what this file's keys of the same op and dtype measured (other GPU models, other "
                     "shapes) seeds each key's search");
  replay->add_flag("--warm-shapes", args->warm_shapes,
                   "Warm start from the other shapes of the same GPU model in the replayed file itself");
  replay->add_option("--gpu", args->filter.gpu_model, "Only this GPU model");
  replay->add_option("--op", args->filter.op, "Only this op");
  replay->add_option("--dtype", args->filter.dtype, "Only this dtype");
  replay->add_option("--shape", args->filter.shape, "Only this shape, like M=4096,N=4096,K=4096");
  replay->add_option("--format", args->format, "table or json")->capture_default_str()->check(CLI::IsMember({"table", "json"}));
  out->push_back({.app = replay, .run = [args](const std::atomic<bool>* stop) { return RunReplay(*args, stop); }});

  struct PredictArgs {
    std::string results, format = "table";
    uint32_t top = 5;
  };
  const auto pargs = std::make_shared<PredictArgs>();
  auto* predict = search->add_subcommand(
      "predict", "Hold out each tuned shape of exhaustive sweeps in turn and answer it with the shape selector "
                 "fitted on the others (what bundles answer at the predicted level): its config's figure against "
                 "the shape's best, and against the nearest tuned shape's winner");
  predict->add_option("--results", pargs->results, "`tunefarm results --format csv` output of exhaustive sweeps")
      ->required();
  predict->add_option("--top", pargs->top, "Candidates per tuned shape: its fastest N configs")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  predict->add_option("--format", pargs->format, "table or json (one document: each held-out shape, the means)")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));
  out->push_back({.app = predict, .run = [pargs](const std::atomic<bool>* stop) {
                     return RunPredict(pargs->results, pargs->top, pargs->format, stop);
                   }});
}

}  // namespace tune
