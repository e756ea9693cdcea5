// Float32 matrix products through oneDNN's sgemm, where the process has one.
//
// Why: libtorch 1.13 sends float32 `mm` to the system BLAS (OpenBLAS here).
// Debian's libtorch links oneDNN (libdnnl.so.2) for other uses, and oneDNN's
// JIT sgemm runs the training step's shapes faster on an AVX-512 core (the
// attention's batched tile products too: 76-104 against 67-89 GFLOP/s).
// Measured on an AMD EPYC with AVX-512, single-threaded, bench-medium's
// linear shapes (512 tokens x hidden 512 / intermediate 1376 / vocab 8192):
// OpenBLAS 0.3.21 85-100 GFLOP/s, oneDNN 2.6 94-109; the training step 8%
// shorter (docs/bench/vs_pytorch.md). With both capped to AVX2 on that CPU
// (DNNL_MAX_CPU_ISA=AVX2, OPENBLAS_CORETYPE=Haswell) oneDNN's step was the
// slower in three of four pairs, so by default it is used only where the
// CPU has AVX-512.
//
// oneDNN is looked up at run time, as compute_threads looks up OpenBLAS:
// tessel links neither itself. PyPI's libtorch 2.x carries oneDNN without
// exporting it, so that build keeps libtorch's `mm` (MKL there).
// TESSEL_GEMM: auto (default, as above), onednn (wherever found) or aten
// (never).
#pragma once

#include <ATen/core/Tensor.h>

namespace tessel::nn {

// Whether Linear should use oneDNN's sgemm, given TESSEL_GEMM's value (null:
// unset), whether the process has it and whether the CPU has AVX-512.
// Throws a UsageError for an unknown value, and for `onednn` where the
// process has no oneDNN sgemm.
bool use_onednn_sgemm(const char* choice, bool found, bool cpu_has_avx512);

// True when oneDNN's sgemm is in the process (onednn_mm can run).
bool onednn_sgemm_found();

// True when it is found and use_onednn_sgemm chose it for this process's
// TESSEL_GEMM and CPU (read once; a bad TESSEL_GEMM throws on every call,
// and cli/environment_check.h calls it before any rank starts).
bool onednn_sgemm_preferred();

// True when onednn_mm takes these: sgemm found, both float32 on the CPU,
// 2-D with matching inner sizes, no size zero.
bool onednn_mm_applies(const at::Tensor& a, const at::Tensor& b);

// a [M, K] · b [K, N] -> a new contiguous [M, N], like at::mm. Operands whose
// rows or columns are evenly strided (a transposed view, a row slice) are
// read where they lie; any other layout is made contiguous first.
at::Tensor onednn_mm(const at::Tensor& a, const at::Tensor& b);

// The batched form, like at::bmm: a [B, M, K] · b [B, K, N] -> a new
// contiguous [B, M, N], one sgemm per batch. The batches' matrices share
// the first one's layout; a batch stride of 0 (an expanded operand) is read
// as such.
bool onednn_bmm_applies(const at::Tensor& a, const at::Tensor& b);
at::Tensor onednn_bmm(const at::Tensor& a, const at::Tensor& b);

}  // namespace tessel::nn
