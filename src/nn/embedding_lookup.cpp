#include "nn/embedding_lookup.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace tessel::nn {

namespace {

struct WeightHolder : torch::CustomClassHolder {
  at::Tensor weight;
};

struct EmbeddingInPlaceGrad : public torch::autograd::Function<EmbeddingInPlaceGrad> {
  // `anchor` must be a TensorList: a single tensor would bind to the
  // catch-all overload of autograd's ExtractVariables and get no edge. The
  // weight comes in a holder, so that no edge to it is recorded.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                c10::intrusive_ptr<WeightHolder> holder, at::Tensor ids,
                                                at::TensorList anchor) {
    at::Tensor out = at::embedding(holder->weight, ids);
    ctx->saved_data["weight"] = holder->weight;
    ctx->saved_data["ids"] = ids;
    return {out};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    at::NoGradGuard no_grad;
    at::Tensor weight = ctx->saved_data["weight"].toTensor();
    const at::Tensor ids = ctx->saved_data["ids"].toTensor().reshape({-1});
    if (grads[0].defined()) {
      at::Tensor& slot = weight.mutable_grad();
      const at::Tensor rows = grads[0].reshape({-1, weight.size(-1)});
      const bool half_width = weight.scalar_type() == at::kBFloat16 || weight.scalar_type() == at::kHalf;
      if (!weight.device().is_cpu() && half_width) {
        // On a device in bf16/fp16: the library's embedding backward sums each
        // row's tokens in float32 and rounds once; index_add_ would round at
        // every token (a frequent token's row summed hundreds of times in
        // bf16), and in an order its atomics choose.
        const at::Tensor summed =
            at::embedding_dense_backward(rows.to(weight.scalar_type()), ids, weight.size(0), -1, false);
        if (slot.defined()) {
          slot.add_(summed);
        } else {
          slot = summed;
        }
      } else {
        if (!slot.defined()) slot = at::zeros_like(weight, at::MemoryFormat::Contiguous);
        slot.index_add_(0, ids, rows.to(slot.scalar_type()));
      }
    }
    return {at::Tensor(), at::Tensor(), at::Tensor()};  // holder, ids, the anchor
  }
};

}  // namespace

at::Tensor embedding_with_inplace_grad(const at::Tensor& weight, const at::Tensor& ids, const at::Tensor& anchor) {
  auto holder = c10::make_intrusive<WeightHolder>();
  holder->weight = weight;
  return EmbeddingInPlaceGrad::apply(holder, ids, at::TensorList(anchor))[0];
}

}  // namespace tessel::nn
