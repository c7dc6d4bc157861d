// runtime_consumer BUNDLE.tfb TRUSTED_KEY OP DTYPE GPU_MODEL NAME=VALUE...
// Prints "<level> <config>" of the lookup, and fails when the prepared and
// the plain lookup disagree or the bundle does not load.
#include <tune/runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s BUNDLE KEY OP DTYPE GPU_MODEL NAME=VALUE...\n", argv[0]);
    return 2;
  }
  auto bundle = tune::runtime::Bundle::Load(argv[1], {argv[2]});
  if (!bundle.ok()) {
    std::fprintf(stderr, "%s\n", bundle.status().message().c_str());
    return 1;
  }
  std::vector<tune::runtime::Dim> dims;
  std::vector<std::string_view> names;
  std::vector<int64_t> values;
  for (int i = 6; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const size_t eq = arg.find('=');
    names.push_back(arg.substr(0, eq));
    values.push_back(std::strtoll(argv[i] + eq + 1, nullptr, 10));
    dims.push_back({names.back(), values.back()});
  }
  const tune::runtime::Answer a = bundle->lookup(argv[3], argv[4], argv[5], dims);
  tune::runtime::PreparedLookup p = bundle->prepare(argv[3], argv[4], argv[5], names);
  const tune::runtime::Answer b = p.lookup(values);
  if (a.config != b.config || a.level != b.level) {
    std::fprintf(stderr, "prepared and plain lookups disagree\n");
    return 1;
  }
  std::printf("%s %s\n", tune::runtime::LevelName(a.level), a.config ? a.config->ToString().c_str() : "-");
  return 0;
}
