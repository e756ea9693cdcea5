#include "tensor/saved_group.h"

#include "core/error.h"

namespace tessel::tensor::detail {

namespace {
struct GroupHolder : torch::CustomClassHolder {
  explicit GroupHolder(dist::CommunicatorPtr g) : group(std::move(g)) {}
  dist::CommunicatorPtr group;
};
}  // namespace

at::IValue save_group(dist::CommunicatorPtr group) {
  TESSEL_CHECK(group != nullptr, "a collective was given a null communicator");
  return at::IValue::make_capsule(c10::make_intrusive<GroupHolder>(std::move(group)));
}

dist::CommunicatorPtr load_group(const at::IValue& saved) {
  TESSEL_CHECK(saved.isCapsule(), "autograd context holds no communicator (internal error)");
  c10::intrusive_ptr<torch::CustomClassHolder> holder = saved.toCapsule();
  return static_cast<GroupHolder*>(holder.get())->group;
}

}  // namespace tessel::tensor::detail
