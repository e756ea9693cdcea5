#include "nn/window_bands.h"

#include <ATen/ATen.h>

#include <limits>

#include "core/error.h"
#include "nn/format.h"

namespace tessel::nn {

namespace {

// The padding's document id: collate numbers documents from 0 and pads with
// -1, so no query of a real row has it.
constexpr int64_t kPaddingDocument = std::numeric_limits<int64_t>::min();

// [B, H, n * band, D] -> [B * n, H, band, D]: band i of row b at b * n + i.
at::Tensor bands_of_rows(const at::Tensor& x, int64_t bands, int64_t band) {
  const int64_t B = x.size(0), H = x.size(1), D = x.size(3);
  return x.reshape({B, H, bands, band, D}).permute({0, 2, 1, 3, 4}).reshape({B * bands, H, band, D});
}

}  // namespace

bool window_bands_pay(int64_t row_length, int64_t window) { return window > 0 && row_length >= 3 * window; }

at::Tensor attend_in_window_bands(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t window,
                                  const at::Tensor& document_ids, const MaskedAttentionCore& core) {
  TESSEL_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "window bands: q, k, v must be [B, H, T, D]");
  TESSEL_CHECK(window > 0, "window bands: the window must be positive, got {}", window);
  const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3);
  TESSEL_CHECK(k.size(2) == T && v.size(2) == T, "window bands: q has {} positions, k {} and v {}", T, k.size(2),
               v.size(2));
  TESSEL_CHECK(!document_ids.defined() || (document_ids.dim() == 2 && document_ids.size(0) == B &&
                                           document_ids.size(1) == T),
               "window bands: document ids must be [{}, {}]", B, T);

  // Bands of `band` queries; band i's keys start w - 1 before its first
  // query, so each band sees L = band + w - 1 keys, the first band's
  // leading ones padding.
  const int64_t band = std::min(window, T);
  const int64_t bands = (T + band - 1) / band;
  const int64_t padded = bands * band;
  const int64_t lead = window - 1;
  const int64_t L = band + lead;

  // Rows padded to whole bands at the end (queries and keys), and the keys
  // also by w - 1 at the front; then each band's keys as one slice.
  auto pad_positions = [](const at::Tensor& x, int64_t before, int64_t after) {
    return (before == 0 && after == 0) ? x : at::constant_pad_nd(x, {0, 0, before, after});
  };
  const at::Tensor band_q = bands_of_rows(pad_positions(q, 0, padded - T), bands, band);
  auto band_keys = [&](const at::Tensor& x) {
    // [B, H, lead + padded, D] -> unfold: [B, H, bands, D, L] -> [B * bands, H, L, D]
    const at::Tensor slices = pad_positions(x, lead, padded - T).unfold(2, L, band);
    return slices.permute({0, 2, 1, 4, 3}).reshape({B * bands, x.size(1), L, D});
  };
  const at::Tensor band_k = band_keys(k), band_v = band_keys(v);

  // Who sees whom inside a band: query a (position i * band + a) sees key b
  // (position i * band + b - lead) for a <= b <= a + lead (causal, within
  // the window), and only keys of its own document; padding is its own
  // document, so padded queries still see a key (themselves).
  const auto long_options = at::TensorOptions().dtype(at::kLong).device(q.device());
  const at::Tensor a = at::arange(band, long_options).unsqueeze(1);
  const at::Tensor b = at::arange(L, long_options).unsqueeze(0);
  const at::Tensor in_window = b.ge(a).logical_and(b.le(a + lead));  // [band, L]
  const at::Tensor ids = document_ids.defined() ? document_ids.to(long_options) : at::zeros({1, T}, long_options);
  const int64_t id_rows = ids.size(0);
  const at::Tensor query_ids = at::constant_pad_nd(ids, {0, padded - T}, static_cast<double>(kPaddingDocument));
  // constant_pad_nd takes its value as a Scalar through double; int64's
  // minimum is a power of two, so it comes back exact.
  const at::Tensor key_ids =
      at::constant_pad_nd(ids, {lead, padded - T}, static_cast<double>(kPaddingDocument)).unfold(1, L, band);
  const at::Tensor same_document =
      query_ids.reshape({id_rows, bands, band, 1}).eq(key_ids.reshape({id_rows, bands, 1, L}));
  const at::Tensor visible =
      same_document.logical_and(in_window).expand({B, bands, band, L}).reshape({B * bands, 1, band, L});

  const at::Tensor out = core(band_q, band_k, band_v, visible);  // [B * bands, Hq, band, D]
  TESSEL_CHECK(out.dim() == 4 && out.size(0) == B * bands && out.size(1) == Hq && out.size(2) == band,
               "window bands: the attention core returned {}", shape_string(out.sizes()));
  return out.reshape({B, bands, Hq, band, out.size(3)})
      .permute({0, 2, 1, 3, 4})
      .reshape({B, Hq, padded, out.size(3)})
      .narrow(2, 0, T);
}

}  // namespace tessel::nn
