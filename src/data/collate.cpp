#include "data/collate.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace tessel::data {
namespace {

// Rows of documents (indices into the dataset).
using Rows = std::vector<std::vector<int64_t>>;

at::Tensor to_tensor(const std::vector<int64_t>& values, int64_t rows, int64_t cols) {
  return at::tensor(values, at::TensorOptions().dtype(at::kLong)).reshape({rows, cols});
}

Batch build(const Dataset& dataset, const Rows& rows, const CollateOptions& options,
            bool mask_document_starts) {
  TESSEL_CHECK(!rows.empty(), "cannot collate an empty micro batch");
  TESSEL_CHECK(options.divisible_by >= 1, "make_sequence_length_divisible_by must be >= 1, got {}",
               options.divisible_by);
  int64_t longest = 0;
  for (const auto& row : rows) {
    int64_t length = 0;
    for (int64_t index : row) length += dataset[index].size();
    longest = std::max(longest, length);
  }
  int64_t t = (longest + options.divisible_by - 1) / options.divisible_by * options.divisible_by;
  if (options.pad_to_length > 0) {
    if (options.pad_to_length < longest || options.pad_to_length % options.divisible_by != 0) {
      throw UsageError(
          fmt::format("pad_to_length {} must be >= the longest row ({}) and a multiple of {}",
                      options.pad_to_length, longest, options.divisible_by));
    }
    t = options.pad_to_length;
  }
  const auto b = static_cast<int64_t>(rows.size());
  const auto n = static_cast<std::size_t>(b * t);
  std::vector<int64_t> ids(n, options.pad_id), mask(n, 0), attention(n, 0), positions(n, 0),
      documents(n, -1);
  Batch batch;
  for (int64_t r = 0; r < b; ++r) {
    std::size_t at = static_cast<std::size_t>(r * t);
    const std::size_t row_end = at + static_cast<std::size_t>(t);
    int64_t document = 0;
    for (int64_t index : rows[static_cast<std::size_t>(r)]) {
      const Example& example = dataset[index];
      for (std::size_t k = 0; k < example.tokens.size(); ++k, ++at) {
        ids[at] = example.tokens[k];
        mask[at] = (k == 0 && mask_document_starts) ? 0 : example.loss_mask[k];
        attention[at] = 1;
        positions[at] = static_cast<int64_t>(k);
        documents[at] = document;
      }
      ++document;
    }
    // Padding continues the last position count so ids stay in [0, T).
    int64_t next_position = at > static_cast<std::size_t>(r * t) ? positions[at - 1] + 1 : 0;
    for (; at < row_end; ++at) positions[at] = next_position++;
  }
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t k = 0; k < t; ++k) {
      const auto i = static_cast<std::size_t>(r * t + k);
      batch.num_targets += (k > 0 && mask[i] != 0) ? 1 : 0;
      batch.num_tokens += attention[i];
    }
  }
  batch.input_ids = to_tensor(ids, b, t);
  batch.loss_mask = to_tensor(mask, b, t);
  batch.attention_mask = to_tensor(attention, b, t);
  batch.position_ids = to_tensor(positions, b, t);
  batch.document_ids = to_tensor(documents, b, t);
  return batch;
}

}  // namespace

Batch collate(const Dataset& dataset, const std::vector<int64_t>& indices,
              const CollateOptions& options) {
  Rows rows;
  for (int64_t index : indices) rows.push_back({index});
  return build(dataset, rows, options, /*mask_document_starts=*/false);
}

Batch pack(const Dataset& dataset, const std::vector<int64_t>& indices, int64_t row_capacity,
           const CollateOptions& options) {
  std::vector<int64_t> by_length = indices;
  std::stable_sort(by_length.begin(), by_length.end(),
                   [&](int64_t a, int64_t b) { return dataset[a].size() > dataset[b].size(); });
  Rows rows;
  std::vector<int64_t> fill;
  for (int64_t index : by_length) {
    const int64_t length = dataset[index].size();
    if (length > row_capacity) {
      throw UsageError(
          fmt::format("example {} has {} tokens, more than the packing row capacity {}; raise "
                      "policy.sequence_packing.train_mb_tokens or lower data.max_input_seq_length",
                      index, length, row_capacity));
    }
    std::size_t r = 0;
    while (r < rows.size() && fill[r] + length > row_capacity) ++r;
    if (r == rows.size()) {
      rows.emplace_back();
      fill.push_back(0);
    }
    rows[r].push_back(index);
    fill[r] += length;
  }
  return build(dataset, rows, options, /*mask_document_starts=*/true);
}

bool documents_are_whole_rows(const at::Tensor& document_ids) {
  if (!document_ids.defined()) return true;
  TESSEL_CHECK(document_ids.dim() == 2 && document_ids.device().is_cpu() && document_ids.scalar_type() == at::kLong,
               "documents_are_whole_rows takes [B, T] int64 document ids on the CPU");
  const at::Tensor ids = document_ids.contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  const int64_t rows = ids.size(0), t = ids.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = id + r * t;
    int64_t k = 0;
    while (k < t && row[k] == 0) ++k;
    while (k < t && row[k] == -1) ++k;
    if (k < t) return false;
  }
  return true;
}

}  // namespace tessel::data
