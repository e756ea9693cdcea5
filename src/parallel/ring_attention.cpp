#include "parallel/ring_attention.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <chrono>
#include <limits>

#include "core/error.h"
#include "core/host_to_device.h"
#include "nn/attention_blocks.h"
#include "nn/document_runs.h"
#include "nn/format.h"
#include "parallel/load_balanced_chunks.h"

namespace tessel::parallel {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The call's group and options, kept in the autograd context for backward
// (the context stores IValues only; a capsule carries any object).
struct RingCall : torch::CustomClassHolder {
  RingCall(dist::CommunicatorPtr g, RingAttentionOptions o) : group(std::move(g)), options(std::move(o)) {}
  dist::CommunicatorPtr group;
  RingAttentionOptions options;
};

const RingCall& ring_call(AutogradContext* ctx) {
  c10::intrusive_ptr<torch::CustomClassHolder> holder = ctx->saved_data["call"].toCapsule();
  return *static_cast<const RingCall*>(holder.get());
}

// The geometry of one rank's tokens: two chunks of `chunk` tokens at the
// global chunk indices load_balanced_chunk(cp, rank, 0 / 1).
struct LocalChunks {
  int cp_size;
  int64_t chunk;
  int64_t start(int rank, int local) const { return load_balanced_chunk(cp_size, rank, local) * chunk; }
};

// The mask of query chunk `qc` of rank `q_rank` against key chunk `kc` of
// rank `k_rank`. `documents` [cp, B, T_local] (all ranks' ids) or undefined.
nn::AttentionBlockMask chunk_mask(const LocalChunks& geo, int q_rank, int qc, int k_rank, int kc,
                                  const RingAttentionOptions& o, const at::Tensor& documents) {
  nn::AttentionBlockMask m;
  m.query_start = geo.start(q_rank, qc);
  m.key_start = geo.start(k_rank, kc);
  m.sliding_window = o.sliding_window;
  if (documents.defined()) {
    m.query_documents = documents[q_rank].narrow(1, qc * geo.chunk, geo.chunk);
    m.key_documents = documents[k_rank].narrow(1, kc * geo.chunk, geo.chunk);
  }
  return m;
}

nn::AttentionScoring scoring_of(const RingAttentionOptions& o) { return {o.scale, o.logit_softcap}; }

// Every rank's document ids, [cp, B, T_local]; undefined without documents.
at::Tensor gather_documents(const at::Tensor& local, dist::Communicator& cp) {
  if (!local.defined()) return {};
  const at::Tensor mine = local.to(at::kLong).contiguous();
  at::Tensor all = at::empty({cp.size(), mine.size(0), mine.size(1)}, mine.options());
  cp.all_gather_into(all, mine);
  return all;
}

// Starts moving `current` to the next rank of the ring; returns the buffer
// the previous rank's block arrives in and the handle to wait on. The shift
// holds the outgoing tensor until it is waited (the communicator's contract).
struct Shift {
  at::Tensor outgoing, incoming;
  dist::WorkPtr work;
};
Shift start_shift(const at::Tensor& current, dist::Communicator& cp, RingAttentionStats* stats) {
  Shift s;
  s.outgoing = current;
  s.incoming = at::empty_like(current);
  s.work = cp.ring_shift_async(s.incoming, current);
  if (stats) {
    stats->bytes_sent += static_cast<int64_t>(current.nbytes());
    stats->shifts += 1;
  }
  return s;
}

at::Tensor finish_shift(Shift& s, RingAttentionStats* stats) {
  if (stats && s.work->is_completed()) stats->shifts_done_when_needed += 1;
  const auto start = Clock::now();
  s.work->wait();
  if (stats) stats->waiting_seconds += seconds_since(start);
  return s.incoming;
}

struct RingAttentionFunction : torch::autograd::Function<RingAttentionFunction> {
  // document_ids is optional: autograd takes an undefined tensor argument
  // for a differentiable input and fails on it; an empty optional it skips.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const c10::optional<at::Tensor>& document_ids, c10::intrusive_ptr<RingCall> call) {
    dist::Communicator& cp = *call->group;
    const RingAttentionOptions& o = call->options;
    RingAttentionStats* stats = o.stats.get();
    const int n = cp.size(), me = cp.rank();
    const LocalChunks geo{n, q.size(2) / 2};
    const at::ScalarType compute = at::promote_types(q.scalar_type(), at::kFloat);
    const at::Tensor documents = gather_documents(document_ids.value_or(at::Tensor()), cp);

    const at::Tensor qc = q.to(compute);
    at::Tensor out = at::zeros(qc.sizes(), qc.options());
    at::Tensor lse = at::full(qc.sizes().slice(0, 3), -std::numeric_limits<double>::infinity(), qc.options());
    at::Tensor block = at::stack({k, v}).contiguous();  // travels in the input dtype
    for (int step = 0; step < n; ++step) {
      const int source = (me - step + n) % n;
      Shift next;
      if (step + 1 < n) next = start_shift(block, cp, stats);
      const auto start = Clock::now();
      const at::Tensor kb = block[0].to(compute), vb = block[1].to(compute);
      for (int qi = 0; qi < 2; ++qi) {
        const at::Tensor q_chunk = qc.narrow(2, qi * geo.chunk, geo.chunk);
        for (int ki = 0; ki < 2; ++ki) {
          const nn::AttentionBlockMask mask = chunk_mask(geo, me, qi, source, ki, o, documents);
          if (nn::block_visibility(mask, geo.chunk, geo.chunk) == nn::BlockVisibility::None) continue;
          const auto result = nn::attention_block_forward(q_chunk, kb.narrow(2, ki * geo.chunk, geo.chunk),
                                                          vb.narrow(2, ki * geo.chunk, geo.chunk), mask, scoring_of(o));
          nn::merge_attention_block(out.narrow(2, qi * geo.chunk, geo.chunk),
                                    lse.narrow(2, qi * geo.chunk, geo.chunk), result);
        }
      }
      if (stats) stats->compute_seconds += seconds_since(start);
      if (next.work) block = finish_shift(next, stats);
    }
    out = out.to(q.scalar_type());
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["documents"] = documents;
    ctx->saved_data["call"] = at::IValue::make_capsule(std::move(call));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const RingCall& call = ring_call(ctx);
    dist::Communicator& cp = *call.group;
    const RingAttentionOptions& o = call.options;
    RingAttentionStats* stats = o.stats.get();
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const at::Tensor documents = ctx->saved_data["documents"].toTensor();
    const int n = cp.size(), me = cp.rank();
    const LocalChunks geo{n, q.size(2) / 2};
    const at::ScalarType compute = lse.scalar_type();

    const at::Tensor qc = q.to(compute);
    const at::Tensor dout = grads[0].to(compute).contiguous();
    const at::Tensor delta = (dout * out.to(compute)).sum(-1);  // [B, Hq, T_local]
    at::Tensor dq = at::zeros_like(qc);
    at::Tensor block = at::stack({k, v}).contiguous();
    Shift block_gradient_in;  // the gradient of the block this rank holds next, from the previous rank
    at::Tensor block_gradient;
    for (int step = 0; step < n; ++step) {
      const int source = (me - step + n) % n;
      Shift next;
      if (step + 1 < n) next = start_shift(block, cp, stats);
      const auto start = Clock::now();
      const at::Tensor kb = block[0].to(compute), vb = block[1].to(compute);
      at::Tensor dkv = at::zeros({2, kb.size(0), kb.size(1), kb.size(2), kb.size(3)}, kb.options());
      for (int qi = 0; qi < 2; ++qi) {
        for (int ki = 0; ki < 2; ++ki) {
          const nn::AttentionBlockMask mask = chunk_mask(geo, me, qi, source, ki, o, documents);
          if (nn::block_visibility(mask, geo.chunk, geo.chunk) == nn::BlockVisibility::None) continue;
          const auto rows = [&](const at::Tensor& t) { return t.narrow(2, qi * geo.chunk, geo.chunk); };
          const auto keys = [&](const at::Tensor& t) { return t.narrow(2, ki * geo.chunk, geo.chunk); };
          const auto g = nn::attention_block_backward(rows(qc), keys(kb), keys(vb), rows(dout), rows(lse),
                                                      rows(delta), mask, scoring_of(o));
          rows(dq).add_(g.dq);
          keys(dkv[0]).add_(g.dk);
          keys(dkv[1]).add_(g.dv);
        }
      }
      if (stats) stats->compute_seconds += seconds_since(start);
      // The ranks before this one in the ring added their share to this
      // block's gradient; add it and pass the sum on. After the last step
      // the shift delivers each block's complete gradient to its owner.
      if (block_gradient_in.work) dkv.add_(finish_shift(block_gradient_in, stats));
      if (n > 1) {
        block_gradient_in = start_shift(dkv, cp, stats);
      } else {
        block_gradient = dkv;
      }
      if (next.work) block = finish_shift(next, stats);
    }
    if (n > 1) block_gradient = finish_shift(block_gradient_in, stats);
    return {dq.to(q.scalar_type()), block_gradient[0].to(k.scalar_type()), block_gradient[1].to(v.scalar_type()),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& document_ids, const dist::CommunicatorPtr& cp,
                          const RingAttentionOptions& options) {
  TESSEL_CHECK(cp != nullptr, "ring_attention: the cp communicator is null");
  TESSEL_CHECK(q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes() && q.size(0) == k.size(0) &&
                   q.size(2) == k.size(2) && q.size(3) == k.size(3),
               "ring_attention expects q [B, Hq, T, D] and k, v [B, Hkv, T, D]; got q {} k {} v {}",
               nn::shape_string(q.sizes()), nn::shape_string(k.sizes()), nn::shape_string(v.sizes()));
  TESSEL_CHECK(q.size(2) % 2 == 0,
               "ring_attention: a rank's {} tokens are not its two equal chunks of the row (context "
               "parallelism pads rows to a multiple of 2 x cp)",
               q.size(2));
  TESSEL_CHECK(!document_ids.defined() ||
                   (document_ids.dim() == 2 && document_ids.size(0) == q.size(0) && document_ids.size(1) == q.size(2)),
               "ring_attention: document_ids must be [{}, {}]", q.size(0), q.size(2));
  auto call = c10::make_intrusive<RingCall>(cp, options);
  // On q's device: the group gathers them (a no-op where they came along,
  // train_step's pieces under cp).
  const at::Tensor ids_here = to_device_without_waiting(document_ids, q.device());
  const c10::optional<at::Tensor> documents =
      ids_here.defined() ? c10::optional<at::Tensor>(ids_here) : c10::nullopt;
  return RingAttentionFunction::apply(q, k, v, documents, std::move(call));
}

}  // namespace tessel::parallel
