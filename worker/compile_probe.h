// A simulated GPU that still compiles. Where this worker has the CUDA
// toolkit, each (op, dtype) a sim backend meets is compiled once with NVRTC
// for the simulated model's architecture: the op's default config (and its
// reference or checker). When that fails to compile, every config of the op
// and dtype fails with the compiler's line, class compile_error, as on a
// GPU, instead of a simulated figure for a kernel that cannot exist. A
// failure of another class (the default config too large for the device)
// tells nothing of the other configs, which keep their simulated figures.
// Program ops are not compiled here (their builds run on a GPU worker).
#pragma once

#include <memory>
#include <string>

#include "measure/backend.h"

namespace tune {

std::unique_ptr<Backend> WithCompileProbe(std::unique_ptr<Backend> sim, std::string cache_dir);

}  // namespace tune
