#include "loss/chunked_softmax.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>

#include "loss/softmax_rows_kernel.h"

namespace tessel::loss {

namespace {

// Calls fn(begin, len) for consecutive row blocks of logits [N, V].
template <typename Fn>
void for_each_chunk(const at::Tensor& logits, Fn&& fn) {
  const int64_t n = logits.size(0), step = rows_per_chunk(logits.size(1), logits.device());
  for (int64_t begin = 0; begin < n; begin += step) fn(begin, std::min(step, n - begin));
}

at::Tensor float_rows(const at::Tensor& logits, int64_t begin, int64_t len) {
  return logits.narrow(0, begin, len).to(at::kFloat);
}

// Contiguous float32 logits on the CPU go through the row loops
// (loss/softmax_rows_kernel.h): one read of each row per pass.
bool row_kernels_apply(const at::Tensor& logits) {
  return logits.scalar_type() == at::kFloat && logits.device().is_cpu() && logits.is_contiguous() &&
         logits.size(1) > 0;
}

// fn(begin, end) over row ranges, in parallel on the compute threads.
template <typename Fn>
void for_row_ranges(const at::Tensor& logits, Fn&& fn) {
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / logits.size(1));
  at::parallel_for(0, logits.size(0), grain, fn);
}

}  // namespace

int64_t rows_per_chunk(int64_t vocab, c10::Device device) {
  constexpr int64_t kHostChunkElements = int64_t{1} << 20;    // 4 MiB of float32
  constexpr int64_t kDeviceChunkElements = int64_t{1} << 25;  // 128 MiB of float32
  const int64_t elements = device.is_cpu() ? kHostChunkElements : kDeviceChunkElements;
  return std::max<int64_t>(1, elements / std::max<int64_t>(vocab, 1));
}

at::Tensor row_max(const at::Tensor& logits) {
  at::Tensor out = at::full({logits.size(0)}, -std::numeric_limits<float>::infinity(),
                            logits.options().dtype(at::kFloat));
  if (logits.size(1) == 0) return out;
  if (row_kernels_apply(logits)) {
    const float* x = logits.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = logits.size(1);
    for_row_ranges(logits, [&](int64_t begin, int64_t end) { row_max_fp32(x + begin * n, end - begin, n, o + begin); });
    return out;
  }
  for_each_chunk(logits, [&](int64_t begin, int64_t len) {
    out.narrow(0, begin, len).copy_(std::get<0>(float_rows(logits, begin, len).max(1)));
  });
  return out;
}

at::Tensor row_sum_exp(const at::Tensor& logits, const at::Tensor& shift) {
  at::Tensor out = at::zeros({logits.size(0)}, logits.options().dtype(at::kFloat));
  if (logits.size(1) == 0) return out;
  if (row_kernels_apply(logits)) {
    const at::Tensor s = shift.to(at::kFloat).contiguous();
    const float* x = logits.data_ptr<float>();
    const float* sp = s.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = logits.size(1);
    for_row_ranges(logits, [&](int64_t begin, int64_t end) {
      row_sum_exp_fp32(x + begin * n, sp + begin, end - begin, n, o + begin);
    });
    return out;
  }
  for_each_chunk(logits, [&](int64_t begin, int64_t len) {
    // One new float32 block (sub promotes 16-bit logits against the float shift).
    at::Tensor block = at::sub(logits.narrow(0, begin, len), shift.narrow(0, begin, len).unsqueeze(1));
    out.narrow(0, begin, len).copy_(block.exp_().sum(1));
  });
  return out;
}

at::Tensor picked_logits(const at::Tensor& logits, const at::Tensor& column, const at::Tensor& take) {
  if (logits.size(1) == 0) return at::zeros({logits.size(0)}, logits.options().dtype(at::kFloat));
  const at::Tensor picked = logits.gather(1, column.unsqueeze(1)).squeeze(1).to(at::kFloat);
  return at::where(take, picked, at::zeros_like(picked));
}

at::Tensor softmax_cross_entropy_grad(const at::Tensor& logits, const at::Tensor& lse, const at::Tensor& column,
                                      const at::Tensor& take, const at::Tensor& scale) {
  const bool in_float = logits.scalar_type() == at::kFloat;
  at::Tensor grad = at::empty(logits.sizes(), logits.options());
  if (logits.size(1) == 0) return grad;
  if (row_kernels_apply(logits)) {
    const at::Tensor l = lse.to(at::kFloat).contiguous(), sc = scale.to(at::kFloat).contiguous();
    const at::Tensor col = column.to(at::kLong).contiguous(), tk = take.to(at::kBool).contiguous();
    const float* x = logits.data_ptr<float>();
    const float* lp = l.data_ptr<float>();
    const float* sp = sc.data_ptr<float>();
    const int64_t* cp = col.data_ptr<int64_t>();
    const bool* tp = tk.data_ptr<bool>();
    float* g = grad.data_ptr<float>();
    const int64_t n = logits.size(1);
    for_row_ranges(logits, [&](int64_t begin, int64_t end) {
      softmax_cross_entropy_grad_fp32(x + begin * n, lp + begin, cp + begin, tp + begin, sp + begin, end - begin, n,
                                      g + begin * n);
    });
    return grad;
  }
  for_each_chunk(logits, [&](int64_t begin, int64_t len) {
    // float32 logits: the block is computed in the gradient's own memory.
    at::Tensor block = in_float ? grad.narrow(0, begin, len) : at::empty({len, logits.size(1)}, grad.options().dtype(at::kFloat));
    at::sub_out(block, logits.narrow(0, begin, len), lse.narrow(0, begin, len).unsqueeze(1));
    block.exp_();
    const at::Tensor rows_take = take.narrow(0, begin, len);
    block.scatter_add_(1, column.narrow(0, begin, len).unsqueeze(1), -rows_take.to(at::kFloat).unsqueeze(1));
    block.mul_(scale.narrow(0, begin, len).unsqueeze(1));
    if (!in_float) grad.narrow(0, begin, len).copy_(block);
  });
  return grad;
}

}  // namespace tessel::loss
