#include "measure/cuda/cuda_driver.h"

#include <atomic>

#include "base/shared_library.h"

namespace tune::cuda {
namespace {

// Two levels so that the argument is macro-expanded first: cuda.h turns
// cuMemAlloc into cuMemAlloc_v2, and that is the symbol to look up.
#define TUNE_CU_STR2(x) #x
#define TUNE_CU_STR(x) TUNE_CU_STR2(x)

struct Loaded {
  Driver driver;
  Status status;
};

// Set once the error-text functions are resolved, so that messages name the
// CUresult even for a failing cuInit.
std::atomic<const Driver*> g_driver_for_text{nullptr};

void LoadOnce(Loaded& out) {
  auto lib = OpenSharedLibrary("the CUDA driver", {kCudaDriverLibrary});
  if (!lib.ok()) {
    out.status = lib.status();
    return;
  }
  std::string missing;
  // The versioned name comes first; the base name is a fallback for drivers
  // older than the toolkit's headers, where every function of this table kept
  // its signature.
#define TUNE_CU_LOAD(name)                                                          \
  {                                                                                 \
    void* sym = lib->Symbol(TUNE_CU_STR(name));                                     \
    if (!sym) sym = lib->Symbol(#name);                                             \
    if (!sym) missing += std::string(missing.empty() ? "" : ", ") + TUNE_CU_STR(name); \
    out.driver.name = reinterpret_cast<decltype(out.driver.name)>(sym);             \
  }
  TUNE_CU_FUNCTIONS(TUNE_CU_LOAD)
#undef TUNE_CU_LOAD
  out.driver.cuTensorMapEncodeTiled =
      reinterpret_cast<decltype(out.driver.cuTensorMapEncodeTiled)>(lib->Symbol("cuTensorMapEncodeTiled"));
  if (!missing.empty()) {
    out.status = Status::Error("CUDA driver too old: " + lib->name + " lacks " + missing);
    return;
  }
  g_driver_for_text.store(&out.driver);
  CUresult r = out.driver.cuInit(0);
  if (r != CUDA_SUCCESS) {
    // cuGetErrorName works before a successful cuInit.
    out.status = Status::Error(CuErrorText(r, "cuInit(0)", __FILE__, __LINE__));
  }
}

}  // namespace

Result<const Driver*> LoadDriver() {
  // Never destroyed: runner threads may still call through it at exit.
  static Loaded* loaded = [] {
    auto* l = new Loaded();
    LoadOnce(*l);
    return l;
  }();
  if (!loaded->status.ok()) return loaded->status;
  return &loaded->driver;
}

std::string CuResultText(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (const Driver* d = g_driver_for_text.load()) {
    if (d->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
    if (d->cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  }
  std::string s = name ? name : "CUresult " + std::to_string(static_cast<int>(r));
  if (text) s += std::string(" (") + text + ")";
  return s;
}

std::string CuErrorText(CUresult r, const char* call, const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + CuResultText(r);
}

bool IsStickyError(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_UNKNOWN:
      return true;
    default:
      return false;
  }
}

}  // namespace tune::cuda
