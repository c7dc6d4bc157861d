// Launch plans evaluated (bundle/bundle.h): what the launcher and publish's
// check of each plan share. Part of tunefarm::runtime: standard library only.
#include <algorithm>
#include <cmath>

#include "bundle/bundle.h"

namespace tune {

Result<std::vector<double>> LaunchVariables(const BundleLaunchPlan& plan, const ParamValues& config,
                                            const NamedValues& dims, const std::string& dtype,
                                            const LaunchDevice& device) {
  const double device_values[] = {double(DTypeSize(dtype)),      double(device.smem_optin), double(device.max_threads),
                                  double(device.num_sms),        double(device.sm),         double(device.l2_bytes)};
  std::vector<double> out;
  out.reserve(plan.vars.size());
  for (const std::string& name : plan.vars) {
    const auto param = std::find_if(config.begin(), config.end(), [&](const auto& p) { return p.first == name; });
    if (param != config.end()) {
      out.push_back(double(param->second.Number()));
      continue;
    }
    const auto dim = std::find_if(dims.begin(), dims.end(), [&](const auto& d) { return d.first == name; });
    if (dim != dims.end()) {
      out.push_back(double(dim->second));
      continue;
    }
    size_t d = 0;
    while (d < std::size(kLaunchDeviceVars) && name != kLaunchDeviceVars[d]) ++d;
    if (d == std::size(kLaunchDeviceVars))
      return Status::InvalidArgument("launch plan " + plan.op + ": no value for '" + name + "'");
    out.push_back(device_values[d]);
  }
  return out;
}

Result<LaunchGeometry> EvaluateLaunchPlan(const BundleLaunchPlan& plan, std::span<const double> vars) {
  if (vars.size() != plan.vars.size())
    return Status::InvalidArgument("launch plan " + plan.op + ": " + std::to_string(vars.size()) + " values for " +
                                   std::to_string(plan.vars.size()) + " variables");
  LaunchGeometry g;
  constexpr int64_t kMaxGrid[3] = {0x7FFFFFFF, 65535, 65535};
  for (int i = 0; i < 3; ++i) {
    g.grid[i] = ProgramValueToInt(EvalLaunchProgram(plan.grid[i], vars));
    g.block[i] = ProgramValueToInt(EvalLaunchProgram(plan.block[i], vars));
    if (g.grid[i] < 1 || g.grid[i] > kMaxGrid[i] || g.block[i] < 1 || g.block[i] > 1024) {
      return Status::InvalidArgument("launch plan " + plan.op + ": grid (" + std::to_string(g.grid[0]) + "," +
                                     std::to_string(g.grid[1]) + "," + std::to_string(g.grid[2]) + ") block (" +
                                     std::to_string(g.block[0]) + "," + std::to_string(g.block[1]) + "," +
                                     std::to_string(g.block[2]) + ") out of range");
    }
  }
  const double smem = EvalLaunchProgram(plan.smem, vars);
  if (!std::isfinite(smem) || smem < 0)
    return Status::InvalidArgument("launch plan " + plan.op + ": shared memory " + std::to_string(smem));
  g.smem_bytes = ProgramValueToInt(smem);
  g.scalars.assign(plan.args.size(), 0);
  g.map_extents.assign(plan.args.size(), {});
  g.map_box.assign(plan.args.size(), {});
  for (size_t i = 0; i < plan.args.size(); ++i) {
    if (plan.args[i].buffer) continue;
    if (plan.args[i].tensor_map()) {
      // Extents of 1 and more, box dims of 1 to 256 (base/tensor_map.h
      // checks the rest against the dtype).
      const std::pair<const std::vector<LaunchProgram>*, std::vector<int64_t>*> lists[] = {
          {&plan.args[i].extents, &g.map_extents[i]}, {&plan.args[i].box, &g.map_box[i]}};
      for (const auto& [programs, out] : lists) {
        for (const LaunchProgram& p : *programs) {
          const double v = EvalLaunchProgram(p, vars);
          if (!std::isfinite(v) || v < 1 || v >= 0x1p62)
            return Status::InvalidArgument("launch plan " + plan.op + ": tensor map " + plan.args[i].name + ": '" +
                                           p.text + "' gives " + std::to_string(v));
          out->push_back(ProgramValueToInt(v));
        }
      }
      continue;
    }
    g.scalars[i] = EvalLaunchProgram(plan.args[i].value, vars);
    if (!std::isfinite(g.scalars[i]))
      return Status::InvalidArgument("launch plan " + plan.op + ": arg " + plan.args[i].name + " is not finite");
  }
  return g;
}

}  // namespace tune
