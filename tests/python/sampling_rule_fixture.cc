// The C++ sampling rule (measure/sampling.h, base/stats.h) on requests, one JSON
// object a line on stdin, one answer a line on stdout, for
// test_sampling_rule.py to hold tunefarm.harness's rule to it:
//
//   {"defaults": true}  -> TimingPolicy{}'s rule fields and kMaxSampleBatch
//   {"dof": [d, ...]}   -> {"t95": [StudentT95(d), ...]}
//   {"policy": {...}, "samples": [us, ...], "steps": [[best_so_far_us, wall_cap, timed_s, wall_s], ...]}
//                       -> {"median", "mean", "ci95", "steps": [[stop name, batch], ...]}
//
// A malformed line gets a one-line error on stderr and exit status 2.
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "measure/sampling.h"
#include "base/stats.h"

namespace {

using nlohmann::json;

tune::TimingPolicy PolicyOf(const json& j) {
  tune::TimingPolicy p;
  p.warmup = j.value("warmup", p.warmup);
  p.min_samples = j.value("min_samples", p.min_samples);
  p.max_samples = j.value("max_samples", p.max_samples);
  p.target_rel_ci = j.value("target_rel_ci", p.target_rel_ci);
  p.rank_rel_ci = j.value("rank_rel_ci", p.rank_rel_ci);
  p.refine_within = j.value("refine_within", p.refine_within);
  p.max_seconds = j.value("max_seconds", p.max_seconds);
  p.early_stop_factor = j.value("early_stop_factor", p.early_stop_factor);
  return p;
}

json Answer(const json& req) {
  if (req.contains("defaults")) {
    const tune::TimingPolicy p;
    return {{"max_batch", tune::kMaxSampleBatch},
            {"policy",
             {{"warmup", p.warmup},
              {"min_samples", p.min_samples},
              {"max_samples", p.max_samples},
              {"target_rel_ci", p.target_rel_ci},
              {"rank_rel_ci", p.rank_rel_ci},
              {"refine_within", p.refine_within},
              {"max_seconds", p.max_seconds},
              {"early_stop_factor", p.early_stop_factor}}}};
  }
  if (req.contains("dof")) {
    json t = json::array();
    for (const json& d : req.at("dof")) t.push_back(tune::StudentT95(d.get<size_t>()));
    return {{"t95", t}};
  }
  const tune::TimingPolicy policy = PolicyOf(req.at("policy"));
  tune::SamplingProgress progress;
  progress.stats = tune::ComputeStats(req.at("samples").get<std::vector<double>>());
  json steps = json::array();
  for (const json& s : req.at("steps")) {
    progress.timed_seconds = s.at(2).get<double>();
    progress.wall_seconds = s.at(3).get<double>();
    const tune::SamplingStep step = tune::NextSampling(policy, s.at(0).get<double>(), s.at(1).get<double>(), progress);
    steps.push_back({tune::SamplingStopName(step.stop), step.batch});
  }
  return {{"median", progress.stats.median}, {"mean", progress.stats.mean}, {"ci95", progress.stats.ci95},
          {"steps", steps}};
}

}  // namespace

int main() {
  std::string line;
  for (int number = 1; std::getline(std::cin, line); ++number) {
    try {
      std::cout << Answer(json::parse(line)).dump() << '\n';
    } catch (const json::exception& e) {
      std::fprintf(stderr, "sampling_rule_fixture: stdin line %d: %s\n", number, e.what());
      return 2;
    }
  }
  return 0;
}
