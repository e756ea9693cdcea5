// The hook point: hook order, replacement of inputs/outputs, removal, module
// paths, lookup errors and parameter replacement.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace tessel::nn {
namespace {

// y = 2 * x, so hooks' effects are easy to compute by hand.
class Doubler : public Module {
 public:
  Doubler() : Module("Doubler") {}
  int forwards = 0;

 protected:
  Tensors forward(const Tensors& inputs) override {
    ++forwards;
    return {inputs[0] * 2};
  }
};

class Tree : public Module {
 public:
  Tree() : Module("Tree") {
    auto opts = at::TensorOptions().dtype(at::kFloat);
    proj = register_module("proj", std::make_shared<Linear>(3, 2, true, opts));
    list = register_module("layers", std::make_shared<ModuleList>());
    list->push_back(std::make_shared<Doubler>());
    list->push_back(std::make_shared<Doubler>());
  }
  std::shared_ptr<Linear> proj;
  std::shared_ptr<ModuleList> list;

 protected:
  Tensors forward(const Tensors& inputs) override { return inputs; }
};

TEST(ModuleHooks, PreAndPostHooksRunInOrderAndReplaceTensors) {
  auto m = std::make_shared<Doubler>();
  std::vector<std::string> order;
  m->add_pre_hook([&](Module&, Tensors in) {
    order.push_back("pre1");
    return Tensors{in[0] + 1};  // x -> x + 1
  });
  m->add_pre_hook([&](Module&, Tensors in) {
    order.push_back("pre2");
    return Tensors{in[0] * 10};  // -> 10 (x + 1)
  });
  std::vector<double> post_saw;
  m->add_post_hook([&](Module&, const Tensors& in, Tensors out) {
    order.push_back("post1");
    post_saw.push_back(in[0].item<double>());
    return Tensors{out[0] - 3};
  });
  m->add_post_hook([&](Module&, const Tensors&, Tensors out) {
    order.push_back("post2");
    return Tensors{out[0], out[0] * 0};  // a post-hook may change the count too
  });
  Tensors out = m->call(Tensors{at::full({}, 3.0)});
  // ((3 + 1) * 10) * 2 - 3 = 77
  ASSERT_EQ(out.size(), 2u);
  EXPECT_DOUBLE_EQ(out[0].item<double>(), 77.0);
  EXPECT_EQ(order, (std::vector<std::string>{"pre1", "pre2", "post1", "post2"}));
  EXPECT_EQ(m->forwards, 1);
  EXPECT_EQ(post_saw, std::vector<double>{40.0});  // the inputs forward saw
  // Two outputs where one is expected is an error, not a silent pick.
  EXPECT_THROW(m->call(at::full({}, 1.0)), Error);
}

TEST(ModuleHooks, RemovedHooksNoLongerRun) {
  auto m = std::make_shared<Doubler>();
  int pre_calls = 0, post_calls = 0;
  HookHandle pre = m->add_pre_hook([&](Module&, Tensors in) {
    ++pre_calls;
    return in;
  });
  HookHandle post = m->add_post_hook([&](Module&, const Tensors&, Tensors out) {
    ++post_calls;
    return Tensors{out[0] + 100};
  });
  EXPECT_DOUBLE_EQ(m->call(at::full({}, 1.0)).item<double>(), 102.0);
  m->remove_hook(post);
  EXPECT_DOUBLE_EQ(m->call(at::full({}, 1.0)).item<double>(), 2.0);
  m->remove_hook(pre);
  m->call(at::full({}, 1.0));
  EXPECT_EQ(pre_calls, 2);
  EXPECT_EQ(post_calls, 1);
  EXPECT_EQ(m->num_hooks(), 0u);
  EXPECT_THROW(m->remove_hook(pre), Error);  // already removed
}

TEST(ModuleHooks, HookMayRemoveItselfDuringCall) {
  auto m = std::make_shared<Doubler>();
  int calls = 0;
  auto handle = std::make_shared<HookHandle>();
  *handle = m->add_pre_hook([&, handle](Module& self, Tensors in) {
    ++calls;
    self.remove_hook(*handle);
    return in;
  });
  m->call(at::full({}, 1.0));
  m->call(at::full({}, 1.0));
  EXPECT_EQ(calls, 1);
}

TEST(ModulePaths, AssignedFromNamedModules) {
  auto root = std::make_shared<Tree>();
  assign_module_paths(*root);
  EXPECT_EQ(root->path(), "");
  EXPECT_EQ(root->proj->path(), "proj");
  EXPECT_EQ((*root->list)[1]->path(), "layers.1");
  EXPECT_EQ(find_module(*root, "layers.0"), (*root->list)[0].get());
  EXPECT_EQ(find_module(*root, ""), root.get());

  std::vector<std::string> paths;
  for (const auto& item : named_tessel_modules(*root)) paths.push_back(item.first);
  EXPECT_EQ(paths, (std::vector<std::string>{"", "proj", "layers", "layers.0", "layers.1"}));

  std::vector<std::string> names;
  for (auto& p : root->named_parameters()) names.push_back(p.key());
  EXPECT_EQ(names, (std::vector<std::string>{"proj.weight", "proj.bias"}));
}

TEST(ModulePaths, MissingPathNamesNearestOnes) {
  auto root = std::make_shared<Tree>();
  try {
    find_module(*root, "layers.7");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("layers.7"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'layers.0'"), std::string::npos) << msg;
  }
}

TEST(ModuleParameters, ReplaceParameterIsSeenByNextCall) {
  auto opts = at::TensorOptions().dtype(at::kDouble);
  auto lin = std::make_shared<Linear>(3, 2, false, opts);
  lin->replace_parameter("weight", at::ones({2, 3}, opts));
  at::Tensor x = at::tensor({1.0, 2.0, 3.0}, opts);
  EXPECT_TRUE(at::equal(lin->call(x), at::tensor({6.0, 6.0}, opts)));
  // A shard with one output row (column-parallel TP) works unchanged.
  lin->replace_parameter("weight", at::full({1, 3}, 2.0, opts));
  EXPECT_TRUE(at::equal(lin->call(x), at::tensor({12.0}, opts)));
  EXPECT_EQ(lin->named_parameters().size(), 1u);
  EXPECT_THROW(lin->replace_parameter("bias", at::zeros({2}, opts)), Error);
  EXPECT_THROW(lin->parameter("bias"), Error);
}

TEST(ModuleParameters, TiedLinearReadsOwnersWeight) {
  auto opts = at::TensorOptions().dtype(at::kDouble);
  auto emb = std::make_shared<Embedding>(4, 3, opts);
  emb->replace_parameter("weight", at::arange(12, opts).view({4, 3}));
  auto head = Linear::tied_to(emb);
  EXPECT_TRUE(head->is_tied());
  EXPECT_EQ(head->named_parameters().size(), 0u);
  at::Tensor x = at::tensor({1.0, 0.0, 0.0}, opts);
  EXPECT_TRUE(at::equal(head->call(x), at::tensor({0.0, 3.0, 6.0, 9.0}, opts)));
  emb->replace_parameter("weight", at::ones({4, 3}, opts));
  EXPECT_TRUE(at::equal(head->call(x), at::ones({4}, opts)));
}

}  // namespace
}  // namespace tessel::nn
