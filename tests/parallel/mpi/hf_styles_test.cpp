// Every HF style string on a small module under tp = world size, against the
// same module run whole in this process: forward output, the gradient of every
// parameter (gathered from the shards) and, where the style defines it, the
// input gradient. Sizes leave uneven and (at 4 ranks) empty shards: 6
// features, 5 sequence positions, a vocabulary of 10.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>

#include "nn/linear.h"
#include "nn/module.h"
#include "nn/rms_norm.h"
#include "parallel/mpi/tp_testing.h"
#include "parallel/parallelize.h"
#include "tensor/dim_collectives.h"

namespace tessel::parallel {
namespace {

using namespace testing;
using tensor::Layout;
const auto kF = at::TensorOptions().dtype(at::kFloat);

// Root holding the module under test as "m".
class Wrap : public nn::Module {
 public:
  explicit Wrap(std::shared_ptr<nn::Module> m) : nn::Module("Wrap"), m_(register_module("m", std::move(m))) {}

 protected:
  nn::Tensors forward(const nn::Tensors& in) override { return m_->call(in); }

 private:
  std::shared_ptr<nn::Module> m_;
};

// down(relu(up(x))): the children of `gather`.
class Mlp : public nn::Module {
 public:
  Mlp() : nn::Module("Mlp") {
    up_ = register_module("up", std::make_shared<nn::Linear>(8, 6, true, kF));
    down_ = register_module("down", std::make_shared<nn::Linear>(6, 8, true, kF));
  }

 protected:
  nn::Tensors forward(const nn::Tensors& in) override { return {down_->call(at::relu(up_->call(in[0])))}; }

 private:
  std::shared_ptr<nn::Linear> up_, down_;
};

// A fused gate||up projection: down(silu(gate) * up), or proj(gate_up(x)).
class Packed : public nn::Module {
 public:
  explicit Packed(bool gated) : nn::Module("Packed"), gated_(gated) {
    gate_up_ = register_module("gate_up", std::make_shared<nn::Linear>(8, 12, true, kF));
    out_ = register_module(gated ? "down" : "proj", std::make_shared<nn::Linear>(gated ? 6 : 12, 8, true, kF));
  }

 protected:
  nn::Tensors forward(const nn::Tensors& in) override {
    at::Tensor gu = gate_up_->call(in[0]);
    if (!gated_) return {out_->call(gu)};
    auto halves = gu.chunk(2, -1);
    return {out_->call(at::silu(halves[0]) * halves[1])};
  }

 private:
  bool gated_;
  std::shared_ptr<nn::Linear> gate_up_, out_;
};

enum class In { Full, ShardLast, ShardSeq, Ids };

struct StyleCase {
  std::string style;
  std::function<std::shared_ptr<nn::Module>()> make;
  std::vector<std::pair<std::string, std::string>> plan;  // relative to the root
  In in;
  Layout out;
  bool input_grad = true;
  int64_t features = 8;  // of the input
};

std::shared_ptr<nn::Module> linear(int64_t i, int64_t o) { return std::make_shared<nn::Linear>(i, o, true, kF); }
std::shared_ptr<nn::Module> embedding() { return std::make_shared<nn::Embedding>(10, 8, kF); }
std::shared_ptr<nn::Module> norm() {
  return std::make_shared<nn::RMSNorm>(8, 1e-6, nn::RMSNormStyle::Llama, kF);
}

std::vector<StyleCase> cases() {
  const Layout R = Layout::replicate(), S = Layout::shard(-1), Seq = Layout::shard(1), P = Layout::partial();
  auto one = [](const char* s) { return std::vector<std::pair<std::string, std::string>>{{"m", s}}; };
  std::vector<StyleCase> c;
  c.push_back({"colwise", [] { return linear(8, 6); }, one("colwise"), In::Full, S});
  c.push_back({"colwise (embedding, hidden-sharded)", embedding, one("colwise"), In::Ids, S, false});
  c.push_back({"rowwise", [] { return linear(6, 8); }, one("rowwise"), In::ShardLast, R, true, 6});
  c.push_back({"rowwise (embedding)", embedding, one("rowwise"), In::Ids, R, false});
  for (const char* s : {"colwise_rep", "colwise_gather_output"}) c.push_back({s, [] { return linear(8, 6); }, one(s), In::Full, R});
  for (const char* s : {"rowwise_rep", "rowwise_split_input"}) c.push_back({s, [] { return linear(6, 8); }, one(s), In::Full, R, true, 6});
  c.push_back({"rowwise_rep (embedding)", embedding, one("rowwise_rep"), In::Ids, R, false});
  c.push_back({"embedding_rowwise", embedding, one("embedding_rowwise"), In::Ids, R, false});
  c.push_back({"sequence_parallel", norm, one("sequence_parallel"), In::ShardSeq, Seq});
  c.push_back({"replicated_with_grad_allreduce", norm, one("replicated_with_grad_allreduce"), In::ShardSeq, Seq});
  c.push_back({"replicate", [] { return linear(8, 6); }, one("replicate"), In::Full, R});
  c.push_back({"local", [] { return linear(8, 6); }, one("local"), In::Full, R});
  c.push_back({"local_colwise/local_rowwise/gather", [] { return std::make_shared<Mlp>(); },
               {{"m", "gather"}, {"m.up", "local_colwise"}, {"m.down", "local_rowwise"}}, In::Full, R, false});
  c.push_back({"local_rowwise alone (partial output)", [] { return std::make_shared<Mlp>(); },
               {{"m.up", "local_colwise"}, {"m.down", "local_rowwise"}}, In::Full, P, false});
  c.push_back({"packed_colwise", [] { return std::make_shared<Packed>(true); },
               {{"m.gate_up", "packed_colwise"}, {"m.down", "rowwise"}}, In::Full, R});
  c.push_back({"packed_rowwise", [] { return std::make_shared<Packed>(false); },
               {{"m.gate_up", "packed_colwise"}, {"m.proj", "packed_rowwise"}}, In::Full, R});
  c.push_back({"local_packed_rowwise", [] { return std::make_shared<Packed>(false); },
               {{"m", "gather"}, {"m.gate_up", "packed_colwise"}, {"m.proj", "local_packed_rowwise"}}, In::Full, R});
  return c;
}

std::shared_ptr<Wrap> make_root(const StyleCase& c) {
  auto root = std::make_shared<Wrap>(c.make());
  nn::assign_module_paths(*root);
  init_params(*root, 17);
  return root;
}

void run_case(const StyleCase& c, const dist::CommunicatorPtr& g) {
  SCOPED_TRACE(c.style);
  auto ref = make_root(c);
  auto tp = make_root(c);
  at::Tensor x = c.in == In::Ids ? (at::arange(10, at::TensorOptions().dtype(at::kLong)) * 7 + 3).remainder(10).view({2, 5})
                                 : seeded({2, 5, c.features}, 5);
  const bool diff = c.in != In::Ids;
  at::Tensor xr = diff ? x.clone().requires_grad_() : x;
  at::Tensor out_ref = ref->call(xr);
  at::Tensor G = seeded(out_ref.sizes(), 99);
  (out_ref * G).sum().backward();

  Plan plan;
  for (const auto& [p, s] : c.plan) plan.add(p, s);
  ParallelizeResult res = parallelize(*tp, g, plan, ParallelizeOptions{.strict = true});
  at::Tensor xin = c.in == In::ShardLast ? chunk_of(x, -1, g) : c.in == In::ShardSeq ? chunk_of(x, 1, g) : x;
  xin = diff ? xin.clone().requires_grad_() : xin;
  at::Tensor out = tp->call(xin);

  at::Tensor want = out_ref.detach(), weight = G;
  at::Tensor got = out.detach();
  if (c.out.is_shard()) {
    want = chunk_of(want, c.out.dim(), g);
    weight = chunk_of(G, c.out.dim(), g);
  } else if (c.out.is_partial()) {
    got = tensor::all_reduce_sum(got, *g);
  }
  expect_close(got, want, "output");
  (out * weight).sum().backward();
  expect_same_grads(*ref, *tp, res.params, g, c.style);
  if (c.input_grad && diff) {
    at::Tensor gi = xr.grad();
    if (c.in == In::ShardLast) gi = chunk_of(gi, -1, g);
    if (c.in == In::ShardSeq) gi = chunk_of(gi, 1, g);
    ASSERT_TRUE(xin.grad().defined());
    expect_close(xin.grad(), gi, "input grad");
  }
}

TEST(HfStylesMpi, EveryStringMatchesSingleDevice) {
  auto g = dist::world();
  for (const auto& c : cases()) run_case(c, g);
}

}  // namespace
}  // namespace tessel::parallel
