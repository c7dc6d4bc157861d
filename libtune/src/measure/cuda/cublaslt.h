// cuBLASLt opened at run time (dlopen), as the driver is: the baseline of GEMM
// ops ([baseline] library = "cublaslt", opspec/op_definition.h), timed in the
// runner on the problem's own buffers with the farm's method. A host
// without the library gets a one-line reason in the baseline's row; nothing
// else of a sweep depends on it.
#pragma once

#include <memory>
#include <string>

#include "measure/cuda/cuda_driver.h"
#include "tune/status.h"

namespace tune::cuda {

class CublasLt {
 public:
  // Errors: the library is not on the host (libcublasLt.so.13, .12, .11,
  // then libcublasLt.so on the loader's path; $TUNEFARM_CUBLASLT, where set,
  // is the one file tried; the loader's reason follows) or lacks a function
  // this code calls.
  static Result<std::unique_ptr<CublasLt>> Open();
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  // "cublaslt 13.0.0": the library and its version, as rows record it.
  std::string Version() const;

  // Prepares C[M,N] = A[M,K] * B[N,K]^T (row-major, `dtype` in and out:
  // f16, bf16 or f32; fp32 accumulation) and takes the library's first
  // heuristic algorithm within `workspace_bytes`. Errors name the step.
  Status Plan(const std::string& dtype, int64_t m, int64_t n, int64_t k, size_t workspace_bytes);
  // Enqueues the planned product on `stream` with `workspace` (of the size
  // given to Plan). Errors name the library's status.
  Status Run(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr workspace, CUstream stream);

 private:
  struct Impl;
  explicit CublasLt(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune::cuda
