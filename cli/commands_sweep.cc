// `tunefarm sweep from-misses`: the shapes deployments asked for that no
// bundle had tuned (the runtime's misses, tune/runtime.h), as the next
// sweep file, most asked first.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/dim_names.h"
#include "base/env.h"
#include "base/limits.h"
#include "base/text.h"
#include "base/types.h"
#include "command_util.h"
#include "commands.h"

namespace tune {
namespace {

struct FromMissesArgs {
  std::vector<std::string> files;
  std::string out, name = "from-misses", gpus;
  uint32_t top = 0;
};

// Names that go into the sweep file as they are: short, of the farm's
// characters only (a misses file is written by deployments, so read as
// untrusted).
bool IsName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}



// The next line of `f`, without its end, into `*line`: false at the end of
// the file. A line over kMaxInputLineBytes is not read on (`*too_long`), so
// memory stays one line's bound whatever the file holds.
bool ReadLine(std::FILE* f, std::string* line, bool* too_long) {
  line->clear();
  *too_long = false;
  int c;
  while ((c = getc_unlocked(f)) != EOF) {
    if (c == '\n') return true;
    if (line->size() == kMaxInputLineBytes) {
      *too_long = true;
      return true;
    }
    line->push_back(static_cast<char>(c));
  }
  return !line->empty();
}

struct Asked {
  uint64_t count = 0;
  std::set<std::string> by;  // "op dtype model level"
};

int RunFromMisses(const FromMissesArgs& args) {
  if (!IsName(args.name)) return Usage("--name '" + args.name + "': letters, digits, '_', '-' or '.'");
  if (!args.gpus.empty() && args.gpus != "*" && !IsName(args.gpus))
    return Usage("--gpus '" + args.gpus + "': \"*\" or a GPU model");
  std::set<std::string> ops, dtypes, models;
  std::map<std::string, Asked> shapes;  // canonical shape -> asked
  size_t lines = 0;
  for (const std::string& file : args.files) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(file.c_str(), "rb"), std::fclose);
    if (!in) return Fail("misses file " + file + ": cannot read it");
    std::string line;
    bool too_long = false;
    for (size_t n = 1; ReadLine(in.get(), &line, &too_long); ++n) {
      const std::string at = file + ":" + std::to_string(n) + ": ";
      if (too_long) return Fail(at + "a line over " + std::to_string(kMaxInputLineBytes) + " bytes (kMaxInputLineBytes)");
      if (++lines > kMaxMissLines)
        return Fail(at + "more than " + std::to_string(kMaxMissLines) + " lines (kMaxMissLines)");
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const auto j = nlohmann::ordered_json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) return Fail(at + "not a JSON object");
      std::string fields[4];
      const char* names[4] = {"op", "dtype", "gpu_model", "level"};
      for (int f = 0; f < 4; ++f) {
        const auto it = j.find(names[f]);
        if (it == j.end() || !it->is_string() || !IsName(it->get<std::string>()))
          return Fail(at + "field '" + names[f] + "': expected a name of letters, digits, '_', '-' or '.'");
        fields[f] = it->get<std::string>();
      }
      if (DTypeSize(fields[1]) == 0) return Fail(at + "field 'dtype': unknown dtype '" + fields[1] + "'");
      const auto count = j.find("count");
      if (count == j.end() || !count->is_number_unsigned() || count->get<uint64_t>() == 0 ||
          count->get<uint64_t>() > (uint64_t(1) << 53))
        return Fail(at + "field 'count': expected a whole number from 1 to 2^53");
      const auto shape = j.find("shape");
      if (shape == j.end() || !shape->is_object() || shape->empty() || shape->size() > kMaxOpDims)
        return Fail(at + "field 'shape': expected an object of 1 to 16 dims");
      Shape s;
      for (const auto& [dim, value] : shape->items()) {
        if (!IsDimName(dim))
          return Fail(at + "field 'shape': dim name '" + dim.substr(0, 80) +
                      "' is not an identifier (letters, digits and '_', not first a digit)");
        if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > kMaxDimValue)
          return Fail(at + "field 'shape." + dim + "': expected a whole number from 1 to 2^40");
        s.dims.emplace_back(dim, value.get<int64_t>());
      }
      ops.insert(fields[0]);
      dtypes.insert(fields[1]);
      models.insert(fields[2]);
      Asked& a = shapes[s.Canonical()];
      // Saturating: a shape asked past UINT64_MAX times is printed "or more".
      const uint64_t add = count->get<uint64_t>();
      a.count = a.count > UINT64_MAX - add ? UINT64_MAX : a.count + add;
      a.by.insert(fields[0] + " " + fields[1] + " " + fields[2] + " (" + fields[3] + ")");
    }
  }
  if (shapes.empty()) return Fail("no misses in " + Join(args.files, ", "));
  std::vector<std::pair<std::string, const Asked*>> order;
  for (const auto& [shape, asked] : shapes) order.emplace_back(shape, &asked);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second->count > b.second->count; });
  if (args.top > 0 && order.size() > args.top) order.resize(args.top);
  auto list = [](const std::set<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "\"" : ", \"") + n + "\"";
    return out;
  };
  std::string text = "# The shapes deployments asked for that their bundles had not tuned, most asked\n"
                     "# first: `tunefarm sweep from-misses` over " + std::to_string(lines) + " lines of " +
                     Join(args.files, ", ") + ".\n[sweep]\nname   = \"" + args.name + "\"\nops    = [" + list(ops) +
                     "]\ndtypes = [" + list(dtypes) + "]\ngpus   = [" +
                     (args.gpus.empty() ? list(models) : list({args.gpus})) + "]\nshapes = [\n";
  for (const auto& [canonical, asked] : order) {
    Shape s;
    ParseNamedValues(canonical, &s.dims);
    std::string row = "  {";
    for (size_t i = 0; i < s.dims.size(); ++i)
      row += std::string(i ? ", " : " ") + s.dims[i].first + " = " + std::to_string(s.dims[i].second);
    text += row + " },  # asked " + std::to_string(asked->count) + (asked->count == UINT64_MAX ? " or more" : "") +
            " times: " + Join({asked->by.begin(), asked->by.end()}, "; ") + "\n";
  }
  text += "]\n";
  if (args.out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  if (Status st = Env::Default()->WriteFileAtomically(args.out, text); !st.ok()) return Fail(st.message());
  std::printf("%s: %zu shapes of %zu asked, %s\n", args.out.c_str(), order.size(), shapes.size(),
              ("submit it: tunefarm submit " + args.out).c_str());
  return 0;
}

}  // namespace

void AddSweepCommands(CLI::App& app, std::vector<CliCommand>* out) {
  auto* sweep = app.add_subcommand("sweep", "Write sweep files");
  sweep->require_subcommand(1);
  const auto args = std::make_shared<FromMissesArgs>();
  auto* from = sweep->add_subcommand(
      "from-misses",
      "The next sweep file from the misses deployments wrote (TUNEFARM_MISSES, Bundle::WriteMisses): the shapes "
      "their bundles answered below exact, most asked first");
  from->add_option("files", args->files, "Misses files (JSON lines)")->required()->check(CLI::ExistingFile);
  from->add_option("--out", args->out, "Sweep file to write (default: standard output)");
  from->add_option("--name", args->name, "The sweep's name")->capture_default_str();
  from->add_option("--top", args->top, "Keep the N most asked shapes (default: all)");
  from->add_option("--gpus", args->gpus, "The sweep's GPU models: \"*\" for every model present (default: the "
                                         "models that asked)");
  out->push_back({.app = from, .run = [args](const std::atomic<bool>*) { return RunFromMisses(*args); }});
}

}  // namespace tune
