#include "policy/sampling.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "nn/format.h"

namespace tessel::policy {

namespace {

// SplitMix64's finaliser: a bijection of 64-bit words whose outputs for
// consecutive inputs are statistically independent.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

void check_sampling_options(const SamplingOptions& o, const std::string& where) {
  if (o.greedy) return;
  if (!(o.temperature > 0.0) || !std::isfinite(o.temperature)) {
    throw UsageError(fmt::format("{}temperature must be a positive number, got {}", where, o.temperature));
  }
  if (!(o.top_p > 0.0 && o.top_p <= 1.0)) {
    throw UsageError(fmt::format("{}top_p must be in (0, 1], got {} (1 keeps every token)", where, o.top_p));
  }
}

double uniform_draw(uint64_t seed, int64_t stream, int64_t step) {
  const uint64_t h = mix(mix(mix(seed) ^ static_cast<uint64_t>(stream)) ^ static_cast<uint64_t>(step));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

SampledTokens sample_tokens(const at::Tensor& logits, const SamplingOptions& options,
                            const std::vector<int64_t>& streams, int64_t step) {
  TESSEL_CHECK(logits.dim() == 2 && logits.size(0) == static_cast<int64_t>(streams.size()),
               "sample_tokens: logits {} for {} rows", nn::shape_string(logits.sizes()), streams.size());
  at::NoGradGuard no_grad;
  const int64_t vocab = logits.size(1);
  const double temperature = options.greedy ? 1.0 : options.temperature;
  at::Tensor z = logits.to(at::kFloat);
  if (temperature != 1.0) z = z / temperature;
  const at::Tensor logp = at::log_softmax(z, -1);
  at::Tensor tokens;
  if (options.greedy) {
    tokens = z.argmax(-1);
  } else {
    std::vector<double> draws(streams.size());
    for (size_t r = 0; r < streams.size(); ++r) draws[r] = uniform_draw(options.seed, streams[r], step);
    const at::Tensor u = at::tensor(draws, at::kDouble).to(z.device());
    // The draw in float64: the cumulative sums of a large vocabulary keep
    // their last bits, so a draw picks the same token wherever it is made.
    const at::Tensor probs = at::softmax(z.to(at::kDouble), -1);
    const bool top_k = options.top_k > 0 && options.top_k < vocab;
    const bool top_p = options.top_p < 1.0;
    if (!top_k && !top_p) {
      const at::Tensor cdf = probs.cumsum(-1);
      const at::Tensor target = u * cdf.select(1, vocab - 1);
      // The first token whose cumulative probability passes the target.
      tokens = cdf.le(target.unsqueeze(1)).sum(-1).clamp_max(vocab - 1);
    } else {
      const auto sorted = at::sort(probs, /*stable=*/true, /*dim=*/-1, /*descending=*/true);
      const at::Tensor& p = std::get<0>(sorted);
      const at::Tensor& order = std::get<1>(sorted);
      at::Tensor keep = at::ones_like(p, p.options().dtype(at::kBool));
      if (top_k) keep.narrow(1, options.top_k, vocab - options.top_k).fill_(false);
      at::Tensor kept = p * keep;
      if (top_p) {
        const at::Tensor renormalised = kept / kept.sum(-1, /*keepdim=*/true);
        const at::Tensor before = renormalised.cumsum(-1) - renormalised;  // mass of the more likely tokens
        keep = keep & before.lt(options.top_p);
        kept = p * keep;
      }
      const at::Tensor cdf = kept.cumsum(-1);
      const at::Tensor target = u * cdf.select(1, vocab - 1);
      const at::Tensor last_kept = keep.sum(-1) - 1;
      const at::Tensor position = at::minimum(cdf.le(target.unsqueeze(1)).sum(-1), last_kept);
      tokens = order.gather(1, position.unsqueeze(1)).squeeze(1);
    }
  }
  tokens = tokens.to(at::kLong);
  return {tokens, logp.gather(1, tokens.unsqueeze(1)).squeeze(1)};
}

}  // namespace tessel::policy
