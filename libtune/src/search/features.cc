#include "search/features.h"

#include <algorithm>
#include <cmath>

#include "base/known_gpus.h"

namespace tune {

std::vector<float> KeyFeatures(const Shape& shape, const std::string& gpu_model, const DeviceInfo* device) {
  const DeviceInfo* known = FindKnownGpu(gpu_model);
  const DeviceInfo d = known ? *known : device ? *device : DeviceInfo{};
  std::vector<float> f;
  for (const auto& [name, value] : shape.dims) f.push_back(value > 0 ? static_cast<float>(std::log2(double(value))) : 0.f);
  f.push_back(static_cast<float>(d.num_sms));
  f.push_back(static_cast<float>(d.smem_per_block_optin / 1024));
  f.push_back(static_cast<float>(d.l2_bytes >> 20));
  f.push_back(static_cast<float>(d.cc_major * 10 + d.cc_minor));
  f.push_back(static_cast<float>(d.total_mem_bytes >> 30));
  return f;
}

std::vector<PriorTrial> PriorsOfKey(std::vector<std::pair<Config, double>> valid, const std::vector<float>& features,
                                    size_t cap) {
  std::vector<PriorTrial> out;
  if (valid.empty()) return out;
  std::stable_sort(valid.begin(), valid.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  const double best = valid.front().second;
  const size_t head = std::min(valid.size(), cap / 2);
  for (size_t i = 0; i < head; ++i) out.push_back(PriorTrial{valid[i].first, valid[i].second / best, features});
  const size_t rest = valid.size() - head, room = cap - head;
  for (size_t k = 0; k < std::min(rest, room); ++k) {
    const size_t i = head + k * rest / std::min(rest, room);
    out.push_back(PriorTrial{valid[i].first, valid[i].second / best, features});
  }
  return out;
}

}  // namespace tune
