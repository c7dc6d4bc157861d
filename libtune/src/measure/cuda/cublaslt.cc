#include "measure/cuda/cublaslt.h"

#include <cublasLt.h>

#include <vector>

#include "base/shared_library.h"

namespace tune::cuda {

#define TUNE_LT_FUNCTIONS(X)                                                                                    \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtMatmulDescCreate)                        \
  X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate)                  \
  X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)           \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

struct CublasLt::Impl {
#define TUNE_LT_MEMBER(name) decltype(&::name) name = nullptr;
  TUNE_LT_FUNCTIONS(TUNE_LT_MEMBER)
#undef TUNE_LT_MEMBER
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool planned = false;
  size_t workspace = 0;

  void Release() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (op) cublasLtMatmulDescDestroy(op);
    a = b = c = nullptr;
    op = nullptr;
    planned = false;
  }
  ~Impl() {
    Release();
    if (handle) cublasLtDestroy(handle);
  }
};

Result<std::unique_ptr<CublasLt>> CublasLt::Open() {
  auto impl = std::make_unique<Impl>();
  auto lib = OpenSharedLibrary("cuBLASLt", LibraryNames("TUNEFARM_CUBLASLT", {"libcublasLt.so.13", "libcublasLt.so.12",
                                                                              "libcublasLt.so.11", "libcublasLt.so"}));
  if (!lib.ok()) return lib.status();
  const std::string opened = lib->name;
#define TUNE_LT_LOAD(fn) \
  if (!lib->Resolve(impl->fn, #fn)) return Status::Error(opened + " lacks " #fn);
  TUNE_LT_FUNCTIONS(TUNE_LT_LOAD)
#undef TUNE_LT_LOAD
  if (cublasStatus_t st = impl->cublasLtCreate(&impl->handle); st != CUBLAS_STATUS_SUCCESS)
    return Status::Error("cublasLtCreate failed with status " + std::to_string(int(st)));
  return std::unique_ptr<CublasLt>(new CublasLt(std::move(impl)));
}

CublasLt::CublasLt(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CublasLt::~CublasLt() = default;

std::string CublasLt::Version() const {
  const size_t v = impl_->cublasLtGetVersion();  // major*10000 + minor*100 + patch
  return "cublaslt " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

Status CublasLt::Plan(const std::string& dtype, int64_t m, int64_t n, int64_t k, size_t workspace_bytes) {
  Impl& x = *impl_;
  x.Release();
  cudaDataType_t type;
  if (dtype == "f16") type = CUDA_R_16F;
  else if (dtype == "bf16") type = CUDA_R_16BF;
  else if (dtype == "f32") type = CUDA_R_32F;
  else return Status::Error("cuBLASLt baseline: no GEMM of dtype " + dtype);
  if (m <= 0 || n <= 0 || k <= 0) return Status::Error("cuBLASLt baseline: empty product");
  auto fail = [](const char* step, cublasStatus_t st) {
    return Status::Error(std::string("cuBLASLt baseline: ") + step + " failed with status " + std::to_string(int(st)));
  };
  // Row-major C[M,N] = A[M,K] * B[N,K]^T is, column-major, C^T[N,M] =
  // op(B) * A^T with B stored K x N (transposed: N x K) and A stored K x M.
  const cublasOperation_t trans = CUBLAS_OP_T, none = CUBLAS_OP_N;
  cublasStatus_t st = x.cublasLtMatmulDescCreate(&x.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (st != CUBLAS_STATUS_SUCCESS) return fail("cublasLtMatmulDescCreate", st);
  st = x.cublasLtMatmulDescSetAttribute(x.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans);
  if (st == CUBLAS_STATUS_SUCCESS) st = x.cublasLtMatmulDescSetAttribute(x.op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none);
  if (st != CUBLAS_STATUS_SUCCESS) return fail("cublasLtMatmulDescSetAttribute", st);
  st = x.cublasLtMatrixLayoutCreate(&x.a, type, uint64_t(k), uint64_t(n), k);  // the B buffer
  if (st == CUBLAS_STATUS_SUCCESS) st = x.cublasLtMatrixLayoutCreate(&x.b, type, uint64_t(k), uint64_t(m), k);  // A
  if (st == CUBLAS_STATUS_SUCCESS) st = x.cublasLtMatrixLayoutCreate(&x.c, type, uint64_t(n), uint64_t(m), n);
  if (st != CUBLAS_STATUS_SUCCESS) return fail("cublasLtMatrixLayoutCreate", st);
  cublasLtMatmulPreference_t pref = nullptr;
  st = x.cublasLtMatmulPreferenceCreate(&pref);
  if (st != CUBLAS_STATUS_SUCCESS) return fail("cublasLtMatmulPreferenceCreate", st);
  st = x.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                              sizeof workspace_bytes);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = x.cublasLtMatmulAlgoGetHeuristic(x.handle, x.op, x.a, x.b, x.c, x.c, pref, 1, &result, &found);
  x.cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) return fail("cublasLtMatmulAlgoGetHeuristic", st);
  if (found < 1) return Status::Error("cuBLASLt baseline: no algorithm for this product");
  x.algo = result.algo;
  x.workspace = workspace_bytes;
  x.planned = true;
  return Status::OK();
}

Status CublasLt::Run(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr workspace, CUstream stream) {
  Impl& x = *impl_;
  if (!x.planned) return Status::Error("cuBLASLt baseline: run before a plan");
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st =
      x.cublasLtMatmul(x.handle, x.op, &alpha, reinterpret_cast<const void*>(b), x.a, reinterpret_cast<const void*>(a),
                       x.b, &beta, reinterpret_cast<const void*>(c), x.c, reinterpret_cast<void*>(c), x.c, &x.algo,
                       reinterpret_cast<void*>(workspace), x.workspace, reinterpret_cast<cudaStream_t>(stream));
  if (st != CUBLAS_STATUS_SUCCESS) return Status::Error("cuBLASLt baseline: cublasLtMatmul failed with status " + std::to_string(int(st)));
  return Status::OK();
}

}  // namespace tune::cuda
