#include "policy/generation.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "nn/format.h"
#include "policy/kv_cache.h"

namespace tessel::policy {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The largest of each value over `group` (as whole microseconds / bytes).
std::vector<int64_t> max_over(const dist::CommunicatorPtr& group, std::vector<int64_t> values) {
  at::Tensor t = at::tensor(values, at::kLong);
  group->all_reduce(t, dist::ReduceOp::Max);
  for (size_t i = 0; i < values.size(); ++i) values[i] = t[static_cast<int64_t>(i)].item<int64_t>();
  return values;
}

}  // namespace

PromptBatch pad_prompts(const std::vector<std::vector<int64_t>>& prompts, Padding padding, int64_t pad_id) {
  TESSEL_CHECK(!prompts.empty(), "no prompts to generate from");
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  const int64_t rows = static_cast<int64_t>(prompts.size());
  PromptBatch batch;
  batch.input_ids = at::full({rows, longest}, pad_id, at::kLong);
  batch.input_lengths = at::empty({rows}, at::kLong);
  batch.padding = padding;
  for (int64_t r = 0; r < rows; ++r) {
    const auto& p = prompts[static_cast<size_t>(r)];
    const int64_t n = static_cast<int64_t>(p.size());
    TESSEL_CHECK(n > 0, "prompt {} is empty: generation needs at least one token to start from", r);
    const int64_t first = padding == Padding::Right ? 0 : longest - n;
    batch.input_ids[r].narrow(0, first, n).copy_(at::tensor(p, at::kLong));
    batch.input_lengths[r] = n;
    batch.streams.push_back(r);
  }
  return batch;
}

Generation generate(DecodingModel& decoder, const PromptBatch& prompts, const GenerationOptions& options) {
  at::NoGradGuard no_grad;
  const at::Tensor& ids_in = prompts.input_ids;
  TESSEL_CHECK(ids_in.dim() == 2 && prompts.input_lengths.dim() == 1 &&
                   prompts.input_lengths.size(0) == ids_in.size(0),
               "generate: input_ids {} and input_lengths {} must be [B, S] and [B]", nn::shape_string(ids_in.sizes()),
               nn::shape_string(prompts.input_lengths.sizes()));
  TESSEL_CHECK(options.max_new_tokens > 0, "generate: max_new_tokens must be positive, got {}",
               options.max_new_tokens);
  const int64_t B = ids_in.size(0), S = ids_in.size(1);
  std::vector<int64_t> streams = prompts.streams;
  if (streams.empty()) {
    for (int64_t r = 0; r < B; ++r) streams.push_back(r);
  }
  TESSEL_CHECK(static_cast<int64_t>(streams.size()) == B, "generate: {} streams for {} rows", streams.size(), B);
  const at::Tensor lengths = prompts.input_lengths.to(at::kLong).cpu();
  std::vector<int64_t> length(B), limit(B);
  int64_t steps = 0;
  for (int64_t r = 0; r < B; ++r) {
    length[r] = lengths[r].item<int64_t>();
    if (length[r] < 1 || length[r] > S) {
      throw UsageError(fmt::format("prompt {}: length {} is outside [1, {}] (the padded width)", r, length[r], S));
    }
    limit[r] = options.max_new_tokens;
    if (options.max_total_length > 0) limit[r] = std::min(limit[r], options.max_total_length - length[r]);
    if (limit[r] < 1) {
      throw UsageError(fmt::format("prompt {} has {} tokens: no room for a new one within the total length {} "
                                   "(policy.max_total_sequence_length); shorten the prompt or raise the limit",
                                   r, length[r], options.max_total_length));
    }
    steps = std::max(steps, limit[r]);
  }

  const c10::Device device = decoder.device();
  const auto on_device = at::TensorOptions().device(device);
  const at::Tensor column = at::arange(S, on_device.dtype(at::kLong)).unsqueeze(0);
  const at::Tensor len = lengths.to(device).unsqueeze(1);
  const at::Tensor real = prompts.padding == Padding::Right ? column.lt(len) : column.ge(S - len);
  // Padding columns hold any id (a caller's -100, say): a real one goes through the embedding.
  const at::Tensor ids = ids_in.to(at::kLong).to(device).masked_fill(real.logical_not(), 0);
  const at::Tensor positions = (real.to(at::kLong).cumsum(1) - 1).clamp_min(0);
  // Each row's last prompt token: the one the first new token follows.
  const at::Tensor last = prompts.padding == Padding::Right ? len.squeeze(1) - 1 : at::full({B}, S - 1, on_device.dtype(at::kLong));

  models::CausalLM& lm = decoder.model();
  // The last sampled token is never fed back: S + steps - 1 slots.
  const auto cache = KvCache::install(lm, B, S + steps - 1);
  auto forward_hidden = [&](const at::Tensor& tokens, const at::Tensor& pos, const at::Tensor& is_real) {
    cache->begin_forward(pos, is_real);
    at::Tensor h = lm.model()->call(nn::Tensors{tokens, pos})[0];
    cache->end_forward();
    return h;
  };
  auto whole_logits = [&](const at::Tensor& hidden_rows) {  // [B, H] -> [B, V]
    return decoder.whole_vocabulary(lm.logits_of_hidden(hidden_rows.unsqueeze(1)).squeeze(1));
  };

  const at::Tensor prefill = forward_hidden(ids, positions, real);
  at::Tensor logits = whole_logits(prefill.index({at::arange(B, on_device.dtype(at::kLong)), last}));

  std::vector<std::vector<int64_t>> tokens(B);
  std::vector<std::vector<float>> logprobs(B);
  std::vector<uint8_t> done(B, 0), stopped(B, 0);
  for (int64_t step = 0; step < steps; ++step) {
    const SampledTokens next = sample_tokens(logits, options.sampling, streams, step);
    const at::Tensor next_tokens = next.tokens.cpu(), next_logprobs = next.logprobs.cpu();
    bool all_done = true;
    for (int64_t r = 0; r < B; ++r) {
      if (done[r]) continue;
      const int64_t t = next_tokens[r].item<int64_t>();
      tokens[r].push_back(t);
      logprobs[r].push_back(next_logprobs[r].item<float>());
      const bool stop = std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), t) !=
                        options.stop_token_ids.end();
      if (stop) stopped[r] = 1;
      if (stop || static_cast<int64_t>(tokens[r].size()) == limit[r]) done[r] = 1;
      all_done = all_done && done[r];
    }
    if (all_done || step + 1 == steps) break;
    // Every row's sampled token at its next position (finished rows ride along).
    const at::Tensor pos = (len + step).to(at::kLong);
    const at::Tensor h = forward_hidden(next.tokens.view({B, 1}), pos, at::ones({B, 1}, on_device.dtype(at::kBool)));
    logits = whole_logits(h.select(1, 0));
  }

  int64_t width = 1;
  for (const auto& t : tokens) width = std::max<int64_t>(width, static_cast<int64_t>(t.size()));
  Generation out;
  out.tokens = at::full({B, width}, options.pad_id, at::kLong);
  out.logprobs = at::zeros({B, width}, at::kFloat);
  out.lengths = at::empty({B}, at::kLong);
  out.stopped = at::empty({B}, at::kBool);
  for (int64_t r = 0; r < B; ++r) {
    const int64_t n = static_cast<int64_t>(tokens[r].size());
    out.tokens[r].narrow(0, 0, n).copy_(at::tensor(tokens[r], at::kLong));
    out.logprobs[r].narrow(0, 0, n).copy_(at::tensor(logprobs[r], at::kFloat));
    out.lengths[r] = n;
    out.stopped[r] = static_cast<bool>(stopped[r]);
  }
  out.kv_cache_bytes = cache->bytes();
  return out;
}

Generation generate_on_mesh(train::ShardedModel& model, const dist::DeviceMesh& mesh,
                            const config::ParallelismConfig& parallelism, at::ScalarType dtype,
                            const std::vector<std::vector<int64_t>>& prompts, const MeshGenerationOptions& options,
                            GenerationStats* stats) {
  TESSEL_CHECK(!prompts.empty(), "generate_on_mesh: no prompts");
  const int64_t rows = static_cast<int64_t>(prompts.size());
  const int64_t width = options.generation.max_new_tokens;
  const auto t0 = Clock::now();
  double refit_s = 0.0, decode_s = 0.0;
  int64_t weight_bytes = 0, cache_bytes = 0;
  DecodingLayout layout = DecodingLayout::Replicated;
  dist::CommunicatorPtr row_group;
  int64_t per_group = 0;
  // This group's rows: tokens and log-probs [per_group, width], then lengths and stop flags.
  at::Tensor my_tokens, my_logprobs, my_meta;
  {
    DecodingModel decoder(model, mesh, parallelism, options.layout, dtype);
    refit_s = seconds_since(t0);
    weight_bytes = decoder.weight_bytes();
    layout = decoder.layout();
    row_group = decoder.row_group();
    const int64_t groups = row_group->size(), group = row_group->rank();
    per_group = (rows + groups - 1) / groups;
    my_tokens = at::full({per_group, width}, options.generation.pad_id, at::kLong);
    my_logprobs = at::zeros({per_group, width}, at::kFloat);
    my_meta = at::zeros({per_group, 2}, at::kLong);
    const int64_t first = std::min(rows, group * per_group), end = std::min(rows, first + per_group);
    const int64_t batch = options.batch_size > 0 ? options.batch_size : per_group;
    const auto t1 = Clock::now();
    for (int64_t begin = first; begin < end; begin += batch) {
      const int64_t n = std::min(batch, end - begin);
      std::vector<std::vector<int64_t>> chunk(prompts.begin() + begin, prompts.begin() + begin + n);
      PromptBatch input = pad_prompts(chunk, Padding::Right, 0);
      for (auto& s : input.streams) s += begin;
      const Generation g = generate(decoder, input, options.generation);
      my_tokens.narrow(0, begin - first, n).narrow(1, 0, g.tokens.size(1)).copy_(g.tokens);
      my_logprobs.narrow(0, begin - first, n).narrow(1, 0, g.logprobs.size(1)).copy_(g.logprobs);
      my_meta.narrow(0, begin - first, n).select(1, 0).copy_(g.lengths);
      my_meta.narrow(0, begin - first, n).select(1, 1).copy_(g.stopped.to(at::kLong));
      cache_bytes = std::max(cache_bytes, g.kv_cache_bytes);
    }
    decode_s = seconds_since(t1);
  }  // the decoding copy and its caches are freed here, before anything else runs

  // Every group's rows on every rank (the tp ranks of a group hold the same).
  const int64_t groups = row_group->size();
  const dist::CommunicatorPtr& world = mesh.world();
  auto gather = [&](const at::Tensor& mine) {
    at::Tensor all = at::empty({groups * mine.numel()}, mine.options().device(mesh.device()));
    row_group->all_gather_into(all, mine.contiguous().view({-1}).to(mesh.device()));
    return all.cpu().view({groups * mine.size(0), mine.size(1)}).narrow(0, 0, rows);
  };
  const at::Tensor all_tokens = gather(my_tokens), all_logprobs = gather(my_logprobs), all_meta = gather(my_meta);
  const int64_t longest = std::max<int64_t>(1, all_meta.select(1, 0).max().item<int64_t>());
  Generation out;
  out.tokens = all_tokens.narrow(1, 0, longest).contiguous();
  out.logprobs = all_logprobs.narrow(1, 0, longest).contiguous();
  out.lengths = all_meta.select(1, 0).contiguous();
  out.stopped = all_meta.select(1, 1).to(at::kBool);
  const std::vector<int64_t> worst = max_over(
      world, {std::llround(refit_s * 1e6), std::llround(decode_s * 1e6), weight_bytes, cache_bytes});
  out.kv_cache_bytes = worst[3];
  if (stats != nullptr) {
    stats->refit_s = static_cast<double>(worst[0]) / 1e6;
    stats->decode_s = static_cast<double>(worst[1]) / 1e6;
    stats->weight_bytes = worst[2];
    stats->kv_cache_bytes = worst[3];
    stats->generated_tokens = out.lengths.sum().item<int64_t>();
    stats->layout = layout;
  }
  return out;
}

}  // namespace tessel::policy
