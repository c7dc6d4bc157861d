// The op's [baseline] as a kernel every backend measures (measure/backend.h).
#include "measure/backend.h"

namespace tune {

CompiledKernel BaselineKernel(const OpSpec& spec, const std::string& kernel_hash) {
  CompiledKernel k;
  k.config = spec.default_config;
  k.config_id = spec.default_config.Id();
  k.kernel_hash = kernel_hash;
  k.baseline = spec.baseline ? spec.baseline->library : std::string();
  return k;
}

}  // namespace tune
