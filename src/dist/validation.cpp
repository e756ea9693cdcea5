#include "dist/validation.h"

#include <ATen/ATen.h>

#include "core/error.h"

namespace tessel::dist {
namespace {

void check_tensor(const char* collective, const std::string& group, const at::Tensor& t,
                  const char* what) {
  TESSEL_CHECK(t.defined(), "{} on group '{}': {} is an undefined tensor; pass an allocated tensor",
               collective, group, what);
  TESSEL_CHECK(t.is_contiguous(),
               "{} on group '{}': {} (sizes {}) is not contiguous; pass .contiguous() or a "
               "flat buffer",
               collective, group, what, c10::str(t.sizes()));
}

void check_same(const char* collective, const std::string& group, const at::Tensor& out,
                const at::Tensor& in) {
  TESSEL_CHECK(out.scalar_type() == in.scalar_type(),
               "{} on group '{}': out has dtype {} but in has dtype {}; both must have the same "
               "dtype",
               collective, group, c10::toString(out.scalar_type()),
               c10::toString(in.scalar_type()));
  TESSEL_CHECK(out.device() == in.device(),
               "{} on group '{}': out is on {} but in is on {}; both must be on the same device",
               collective, group, out.device().str(), in.device().str());
}

void check_reducible(const char* collective, const std::string& group, const at::Tensor& t) {
  TESSEL_CHECK(is_reducible_dtype(t.scalar_type()),
               "{} on group '{}': dtype {} cannot be reduced; reductions support float32, "
               "float64, bfloat16, float16, int32 and int64",
               collective, group, c10::toString(t.scalar_type()));
}

}  // namespace

bool bytes_overlap(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

bool is_reducible_dtype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kDouble:
    case at::kBFloat16:
    case at::kHalf:
    case at::kInt:
    case at::kLong:
      return true;
    default:
      return false;
  }
}

void check_cpu(const char* collective, const std::string& group, const at::Tensor& tensor,
               const char* what) {
  TESSEL_CHECK(tensor.device().is_cpu(),
               "{} on group '{}': {} is on {}, but the MPI backend moves CPU tensors only; copy it "
               "to the CPU first",
               collective, group, what, tensor.device().str());
}

void check_all_gather(const std::string& group, int size, int rank, const at::Tensor& out,
                      const at::Tensor& in) {
  check_tensor("all_gather", group, out, "out");
  check_tensor("all_gather", group, in, "in");
  check_same("all_gather", group, out, in);
  TESSEL_CHECK(out.numel() == in.numel() * size,
               "all_gather on group '{}': out has {} elements but must hold group size {} x "
               "in.numel() {} = {}; allocate out with that many elements",
               group, out.numel(), size, in.numel(), in.numel() * size);
  // In place is allowed when `in` is exactly this rank's slot of `out`.
  const bool in_place = in.numel() > 0 && static_cast<const char*>(in.data_ptr()) ==
                                              static_cast<const char*>(out.data_ptr()) +
                                                  static_cast<int64_t>(rank) * in.nbytes();
  TESSEL_CHECK(in_place || !bytes_overlap(out, in),
               "all_gather on group '{}': in overlaps out but is not rank {}'s slot of out; pass "
               "a separate in tensor or out.narrow(0, rank * n, n)",
               group, rank);
}

void check_all_gather_segments(const std::string& group, int size, int rank, const at::Tensor& out,
                               const at::Tensor& in, const std::vector<int64_t>& segment_numels) {
  check_all_gather(group, size, rank, out, in);
  int64_t covered = 0;
  for (int64_t n : segment_numels) {
    TESSEL_CHECK(n >= 0, "all_gather on group '{}': a segment of {} elements; segments must not be negative",
                 group, n);
    covered += n;
  }
  TESSEL_CHECK(covered == in.numel(),
               "all_gather on group '{}': the segments cover {} elements but in has {}; they must tile in",
               group, covered, in.numel());
  TESSEL_CHECK(!bytes_overlap(out, in),
               "all_gather on group '{}': in overlaps out; a segment-wise gather needs a separate in tensor", group);
}

void check_reduce_scatter(const std::string& group, int size, const at::Tensor& out,
                          const at::Tensor& in) {
  check_tensor("reduce_scatter", group, out, "out");
  check_tensor("reduce_scatter", group, in, "in");
  check_same("reduce_scatter", group, out, in);
  check_reducible("reduce_scatter", group, in);
  TESSEL_CHECK(in.numel() == out.numel() * size,
               "reduce_scatter on group '{}': in has {} elements but must hold group size {} x "
               "out.numel() {} = {}; pad in to that many elements",
               group, in.numel(), size, out.numel(), out.numel() * size);
}

void check_all_reduce(const std::string& group, const at::Tensor& tensor) {
  check_tensor("all_reduce", group, tensor, "tensor");
  check_reducible("all_reduce", group, tensor);
}

void check_all_to_all(const std::string& group, int size, const at::Tensor& out,
                      const at::Tensor& in) {
  check_tensor("all_to_all", group, out, "out");
  check_tensor("all_to_all", group, in, "in");
  check_same("all_to_all", group, out, in);
  TESSEL_CHECK(out.numel() == in.numel(),
               "all_to_all on group '{}': out has {} elements but in has {}; they must match",
               group, out.numel(), in.numel());
  TESSEL_CHECK(in.numel() % size == 0,
               "all_to_all on group '{}': {} elements do not split evenly over group size {}; "
               "pad to a multiple of {}",
               group, in.numel(), size, size);
  TESSEL_CHECK(!bytes_overlap(out, in),
               "all_to_all on group '{}': out and in share memory; all_to_all is not in place, "
               "pass a separate out tensor",
               group);
}

namespace {

void check_row_counts(const std::string& group, int size, const at::Tensor& t, const std::vector<int64_t>& counts,
                      const char* what) {
  TESSEL_CHECK(static_cast<int64_t>(counts.size()) == size,
               "all_to_all_v on group '{}': {}_counts has {} entries for group size {}; pass one row count per "
               "group rank",
               group, what, counts.size(), size);
  int64_t rows = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    TESSEL_CHECK(counts[r] >= 0, "all_to_all_v on group '{}': {}_counts[{}] = {} is negative; counts are rows",
                 group, what, r, counts[r]);
    rows += counts[r];
  }
  TESSEL_CHECK(rows == t.size(0),
               "all_to_all_v on group '{}': {}_counts add up to {} rows but {} has {} rows (dim 0); they must "
               "match",
               group, what, rows, what, t.size(0));
}

}  // namespace

int64_t check_all_to_all_v(const std::string& group, int size, const at::Tensor& out,
                           const std::vector<int64_t>& out_counts, const at::Tensor& in,
                           const std::vector<int64_t>& in_counts) {
  check_tensor("all_to_all_v", group, out, "out");
  check_tensor("all_to_all_v", group, in, "in");
  check_same("all_to_all_v", group, out, in);
  TESSEL_CHECK(out.dim() >= 1 && in.dim() >= 1,
               "all_to_all_v on group '{}': out (sizes {}) and in (sizes {}) need a row dimension (dim 0); "
               "pass at least 1-d tensors",
               group, c10::str(out.sizes()), c10::str(in.sizes()));
  TESSEL_CHECK(out.sizes().slice(1) == in.sizes().slice(1),
               "all_to_all_v on group '{}': out rows (sizes {}) and in rows (sizes {}) differ past dim 0; rows "
               "must have one shape",
               group, c10::str(out.sizes()), c10::str(in.sizes()));
  check_row_counts(group, size, out, out_counts, "out");
  check_row_counts(group, size, in, in_counts, "in");
  TESSEL_CHECK(!bytes_overlap(out, in),
               "all_to_all_v on group '{}': out and in share memory; all_to_all_v is not in place, pass a "
               "separate out tensor",
               group);
  int64_t row = 1;
  for (int64_t d = 1; d < in.dim(); ++d) row *= in.size(d);
  return row;
}

void check_ring_shift(const std::string& group, const at::Tensor& out, const at::Tensor& in) {
  check_tensor("ring_shift", group, out, "out");
  check_tensor("ring_shift", group, in, "in");
  check_same("ring_shift", group, out, in);
  TESSEL_CHECK(out.numel() == in.numel(),
               "ring_shift on group '{}': out has {} elements but in has {}; they must match",
               group, out.numel(), in.numel());
  TESSEL_CHECK(!bytes_overlap(out, in),
               "ring_shift on group '{}': out and in share memory; the shift is not in place, pass "
               "a separate out tensor",
               group);
}

void check_broadcast(const std::string& group, int size, const at::Tensor& tensor, int root) {
  check_tensor("broadcast", group, tensor, "tensor");
  TESSEL_CHECK(root >= 0 && root < size,
               "broadcast on group '{}': root {} is not a rank of this group of size {}; pass a "
               "group rank in [0, {})",
               group, root, size, size);
}

}  // namespace tessel::dist
