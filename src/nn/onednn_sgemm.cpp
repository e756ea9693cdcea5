#include "nn/onednn_sgemm.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "nn/format.h"

namespace tessel::nn {

namespace {

// oneDNN's C entry point (dnnl.h, stable since oneDNN 1.0): row-major
// C = alpha * op(A) * op(B) + beta * C, op given by 'N' or 'T'; returns
// dnnl_success (0) or an error code.
using Sgemm = int (*)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                      int64_t ldc);

Sgemm sgemm() {
  static const auto found = reinterpret_cast<Sgemm>(dlsym(RTLD_DEFAULT, "dnnl_sgemm"));
  return found;
}

// How sgemm reads a 2-D operand: as stored ('N', rows ld apart) or as the
// transpose of a row-major matrix ('T', columns ld apart).
struct Operand {
  at::Tensor tensor;  // the operand, or a contiguous copy of it
  char trans;
  int64_t ld;
};

Operand describe(const at::Tensor& t) {
  const int64_t rows = t.size(0), cols = t.size(1);
  // A size-1 dimension's stride is never used to step, so any value does.
  const bool unit_col_step = t.stride(1) == 1 || cols == 1;
  const bool unit_row_step = t.stride(0) == 1 || rows == 1;
  if (unit_col_step && (rows == 1 || t.stride(0) >= cols))
    return {t, 'N', rows == 1 ? cols : t.stride(0)};
  if (unit_row_step && (cols == 1 || t.stride(1) >= rows))
    return {t, 'T', cols == 1 ? rows : t.stride(1)};
  at::Tensor dense = t.contiguous();
  return {dense, 'N', cols};
}

}  // namespace

bool use_onednn_sgemm(const char* choice, bool found, bool cpu_has_avx512) {
  const std::string value = choice != nullptr ? choice : "";
  if (value.empty() || value == "auto") return found && cpu_has_avx512;
  if (value == "onednn") return found;
  if (value == "aten") return false;
  throw UsageError(fmt::format("TESSEL_GEMM='{}' is unknown; use auto, onednn or aten", value));
}

bool onednn_sgemm_found() { return sgemm() != nullptr; }

bool onednn_sgemm_preferred() {
  static const bool preferred =
      use_onednn_sgemm(std::getenv("TESSEL_GEMM"), onednn_sgemm_found(), __builtin_cpu_supports("avx512f"));
  return preferred;
}

bool onednn_mm_applies(const at::Tensor& a, const at::Tensor& b) {
  return onednn_sgemm_found() && a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0) &&
         a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat && a.device().is_cpu() &&
         b.device().is_cpu() && a.numel() > 0 && b.numel() > 0;
}

at::Tensor onednn_mm(const at::Tensor& a, const at::Tensor& b) {
  TESSEL_CHECK(onednn_mm_applies(a, b),
               "onednn_mm: needs oneDNN's sgemm and non-empty float32 CPU matrices [M, K] x [K, N], got {} x {}",
               shape_string(a.sizes()), shape_string(b.sizes()));
  // Named for libtorch's profiler (bench_profile_step), as at::mm would be.
  RECORD_FUNCTION("tessel::onednn_mm", std::vector<c10::IValue>{});
  const Operand lhs = describe(a), rhs = describe(b);
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  at::Tensor out = at::empty({m, n}, a.options());
  const int status = sgemm()(lhs.trans, rhs.trans, m, n, k, 1.0F, lhs.tensor.data_ptr<float>(), lhs.ld,
                             rhs.tensor.data_ptr<float>(), rhs.ld, 0.0F, out.data_ptr<float>(), n);
  TESSEL_CHECK(status == 0, "oneDNN sgemm failed (status {}) on [{}, {}] x [{}, {}]", status, m, k, k, n);
  return out;
}

}  // namespace tessel::nn
