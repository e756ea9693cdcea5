// Sliding-window attention over bands of queries, each with only the keys
// its window can reach.
//
// Why: on a device a sliding window (Mistral, Gemma 3's local layers) is a
// mask for the library's kernel (nn/library_attention.h), and a masked
// kernel computes every query against every key of the row: T x T scores
// where the window needs T x w (Gemma 3 1B: w = 512, so 16x the work at
// T = 8192 on five layers of six), plus a [T, T] mask. Cut the row into
// bands of w queries: band i's queries see keys from w - 1 before its first
// query to its last, so each band is a w x (2w - 1) block with its own
// small mask, and all bands go to the kernel as one batch (the band index
// joins the batch dimension): T x (2w - 1) scores, one call.
//
// The keys of consecutive bands overlap by w - 1 (each band's keys are
// copied out: K and V take ~2x their bytes while the call runs); the row is
// padded to whole bands, and the padding keys carry an id no document has,
// so no real query sees them.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

namespace tessel::nn {

// A masked attention kernel: q [N, Hq, Lq, D], k and v [N, Hkv, Lk, D] (Hkv
// divides Hq), visible [N, 1, Lq, Lk] bool (true: the query may see the key;
// every query sees at least one) -> [N, Hq, Lq, D].
using MaskedAttentionCore =
    std::function<at::Tensor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& visible)>;

// Whether bands cost less than one masked pass over rows of `row_length`
// with this window: T x (2w - 1) scores against T x T, asked to be at most
// two thirds (the bands' copies of K and V and their masks are work the
// whole-row pass does not do): rows at least 3w long. Measured on the CPU's
// library kernel (docs/bench/attention.md, w 512): 1.29x faster at 3w, 1.66x
// at 4w, none at 2w; on a device not yet.
bool window_bands_pay(int64_t row_length, int64_t window);

// q [B, Hq, T, D], k and v [B, Hkv, T, D]: causal attention within
// `window` (query i sees keys i - window < j <= i) and, where document_ids
// [B, T] (integer, on q's device) is given, within each query's document,
// computed band by band through `core`. Equal to the masked whole-row
// pass, differentiable in q, k and v.
at::Tensor attend_in_window_bands(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t window,
                                  const at::Tensor& document_ids, const MaskedAttentionCore& core);

}  // namespace tessel::nn
