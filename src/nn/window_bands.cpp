#include "nn/window_bands.h"

#include <ATen/ATen.h>

#include <limits>
#include <vector>

#include "core/error.h"
#include "nn/format.h"

namespace tessel::nn {

namespace {

// [B, H, n * band, D] -> [B * n, H, band, D]: band i of row b at b * n + i.
at::Tensor bands_of_rows(const at::Tensor& x, int64_t bands, int64_t band) {
  const int64_t B = x.size(0), H = x.size(1), D = x.size(3);
  return x.reshape({B, H, bands, band, D}).permute({0, 2, 1, 3, 4}).reshape({B * bands, H, band, D});
}

}  // namespace

bool window_bands_pay(int64_t row_length, int64_t window) { return window > 0 && row_length >= 2 * window; }

at::Tensor attend_in_window_bands(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t window,
                                  const at::Tensor& document_ids, const MaskedAttentionCore& core) {
  TESSEL_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "window bands: q, k, v must be [B, H, T, D]");
  TESSEL_CHECK(window > 0, "window bands: the window must be positive, got {}", window);
  const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2);
  TESSEL_CHECK(k.size(2) == T && v.size(2) == T, "window bands: q has {} positions, k {} and v {}", T, k.size(2),
               v.size(2));
  TESSEL_CHECK(!document_ids.defined() || (document_ids.dim() == 2 && document_ids.size(0) == B &&
                                           document_ids.size(1) == T),
               "window bands: document ids must be [{}, {}]", B, T);
  auto check_out = [&](const at::Tensor& out, int64_t rows, int64_t queries) {
    TESSEL_CHECK(out.dim() == 4 && out.size(0) == rows && out.size(1) == Hq && out.size(2) == queries,
                 "window bands: the attention core returned {} for {} rows of {} queries",
                 shape_string(out.sizes()), rows, queries);
    return out;
  };

  // Bands of `band` queries. The first band's window reaches back past the
  // row's start, so it goes alone, causal over its own keys; band i >= 1
  // sees the keys from w - 1 before its first query to its last: L = band
  // + w - 1 of them, all in the row, and the same mask for every band.
  const int64_t band = std::min(window, T);
  const int64_t bands = (T + band - 1) / band;
  const int64_t padded = bands * band;
  const int64_t lead = window - 1;
  const int64_t L = band + lead;
  const auto long_options = at::TensorOptions().dtype(at::kLong).device(q.device());
  const at::Tensor a = at::arange(band, long_options).unsqueeze(1);  // a band's query
  const at::Tensor ids = document_ids.defined() ? document_ids.to(long_options) : at::Tensor();

  // Without documents the first band is plain causal: no mask (a causal
  // kernel skips the upper triangle a masked one computes).
  at::Tensor first_visible;
  if (ids.defined()) {
    const at::Tensor first_ids = ids.narrow(1, 0, band);
    first_visible = at::arange(band, long_options)
                        .unsqueeze(0)
                        .le(a)
                        .logical_and(first_ids.unsqueeze(2).eq(first_ids.unsqueeze(1)))
                        .unsqueeze(1);  // [B, 1, band, band]
  }
  const at::Tensor first = check_out(core(q.narrow(2, 0, band), k.narrow(2, 0, band), v.narrow(2, 0, band),
                                          first_visible),
                                     B, band);
  if (bands == 1) return first;

  // The other bands: queries from `band` on, keys from `band - lead` on
  // (position 1: band = w here), both padded at the end to whole bands; each
  // band's keys one slice of them. Padded queries see padded keys (their
  // own position), so no query sees nothing; their outputs are dropped.
  const int64_t tail = padded - T;
  auto pad_end = [tail](const at::Tensor& x, int64_t dim_from_end) {
    if (tail == 0) return x;
    std::vector<int64_t> pad(2 * dim_from_end, 0);
    pad.back() = tail;
    return at::constant_pad_nd(x, pad);
  };
  const at::Tensor rest_q = bands_of_rows(pad_end(q.narrow(2, band, T - band), 2), bands - 1, band);
  auto rest_keys = [&](const at::Tensor& x) {
    // [B, H, (bands - 1) * band + lead, D] -> unfold: [B, H, bands - 1, D, L] -> [B * (bands - 1), H, L, D]
    const at::Tensor slices = pad_end(x.narrow(2, band - lead, T - band + lead), 2).unfold(2, L, band);
    return slices.permute({0, 2, 1, 4, 3}).reshape({B * (bands - 1), x.size(1), L, x.size(3)});
  };
  // Query a of a band sees key b of its slice for a <= b <= a + lead: not
  // after itself, within the window.
  const at::Tensor b = at::arange(L, long_options).unsqueeze(0);
  at::Tensor rest_visible = b.ge(a).logical_and(b.le(a + lead)).view({1, 1, band, L});
  if (ids.defined()) {
    // The padding's id: one more than any real id would not do without a
    // sync to read them; collate numbers documents from 0 and pads with -1,
    // so int64's minimum is nobody's.
    const double padding = static_cast<double>(std::numeric_limits<int64_t>::min());  // exact: a power of two
    const at::Tensor query_ids = at::constant_pad_nd(ids.narrow(1, band, T - band), {0, tail}, padding);
    const at::Tensor key_ids =
        at::constant_pad_nd(ids.narrow(1, band - lead, T - band + lead), {0, tail}, padding).unfold(1, L, band);
    const at::Tensor same = query_ids.reshape({B, bands - 1, band, 1}).eq(key_ids.reshape({B, bands - 1, 1, L}));
    rest_visible = rest_visible.logical_and(same.reshape({B * (bands - 1), 1, band, L}));
  }
  const at::Tensor rest = check_out(core(rest_q, rest_keys(k), rest_keys(v), rest_visible), B * (bands - 1), band);
  const int64_t Dv = rest.size(3);
  const at::Tensor rest_rows =
      rest.reshape({B, bands - 1, Hq, band, Dv}).permute({0, 2, 1, 3, 4}).reshape({B, Hq, (bands - 1) * band, Dv});
  return at::cat({first, rest_rows.narrow(2, 0, T - band)}, 2);
}

}  // namespace tessel::nn
