// Sliding-window attention over bands of queries, each with only the keys
// its window can reach.
//
// Why: on a device a sliding window (Mistral, Gemma 3's local layers) is a
// mask for the library's kernel (nn/library_attention.h), and a masked
// kernel computes every query against every key of the row: T x T scores
// where the window needs T x w (Gemma 3 1B: w = 512, so 16x the work at
// T = 8192 on five layers of six), plus a [T, T] mask. Cut the row into
// bands of w queries: band i's queries see keys from w - 1 before its first
// query to its last, so each band is a w x (2w - 1) block, and all bands
// after the first go to the kernel as one batch (the band index joins the
// batch dimension) with one [w, 2w - 1] mask for them all (per row where
// documents restrict it too): T x (2w - 1) scores in two calls, the first
// band's w x w causal square being the other (its window reaches back past
// the row's start; without documents it needs no mask, so a causal kernel
// takes it).
//
// The keys of consecutive bands overlap by w - 1 (each band's keys are
// copied out: K and V take ~2x their bytes while the call runs); the row is
// padded at its end to whole bands, the padded queries' outputs dropped.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

namespace tessel::nn {

// A masked attention kernel: q [N, Hq, Lq, D], k and v [N, Hkv, Lk, D] (Hkv
// divides Hq), visible [N or 1, 1, Lq, Lk] bool (true: the query may see the
// key; every query sees at least one) -> [N, Hq, Lq, D]. An undefined
// `visible` means causal over Lq = Lk (the first band, without documents).
using MaskedAttentionCore =
    std::function<at::Tensor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& visible)>;

// Whether bands cost less than one masked pass over rows of `row_length`
// with this window: rows of two bands or more (at 2w the masked scores are
// under 3/4 of the whole row's: w x w for the first band, half of it with
// a causal kernel, w x (2w - 1) for the second).
// Measured on the CPU's library kernel (docs/bench/attention.md, w 512):
// 1.21x faster at 2w, 1.65x at 3w, 2.07x at 4w, 4.00x at 8w; on a device
// not yet.
bool window_bands_pay(int64_t row_length, int64_t window);

// q [B, Hq, T, D], k and v [B, Hkv, T, D]: causal attention within
// `window` (query i sees keys i - window < j <= i) and, where document_ids
// [B, T] (integer, on q's device) is given, within each query's document,
// computed band by band through `core`. Equal to the masked whole-row
// pass, differentiable in q, k and v. `core` is called twice (once where
// the row is one band).
at::Tensor attend_in_window_bands(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t window,
                                  const at::Tensor& document_ids, const MaskedAttentionCore& core);

}  // namespace tessel::nn
