#include "parallel/activation_tags.h"

#include <c10/core/TensorImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <iterator>
#include <mutex>
#include <unordered_map>

namespace tessel::parallel {

namespace {

using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

struct Entry {
  WeakImpl impl;
  ActivationTag tag;
};

struct Tags {
  std::mutex mutex;
  std::unordered_map<const c10::TensorImpl*, Entry> entries;
  std::size_t prune_at = 64;
};

Tags& tags() {
  static Tags t;
  return t;
}

void prune(Tags& t) {
  for (auto it = t.entries.begin(); it != t.entries.end();) {
    it = it->second.impl.expired() ? t.entries.erase(it) : std::next(it);
  }
  t.prune_at = std::max<std::size_t>(64, 2 * t.entries.size());
}

}  // namespace

void tag_activation(const at::Tensor& x, const ActivationTag& tag) {
  if (!x.defined()) return;
  Tags& t = tags();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (t.entries.size() >= t.prune_at) prune(t);
  t.entries.insert_or_assign(x.unsafeGetTensorImpl(), Entry{WeakImpl(x.getIntrusivePtr()), tag});
}

std::optional<ActivationTag> activation_tag(const at::Tensor& x) {
  if (!x.defined()) return std::nullopt;
  Tags& t = tags();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.entries.find(x.unsafeGetTensorImpl());
  if (it == t.entries.end()) return std::nullopt;
  if (it->second.impl.expired()) {
    t.entries.erase(it);
    return std::nullopt;
  }
  return it->second.tag;
}

std::size_t num_activation_tags() {
  Tags& t = tags();
  std::lock_guard<std::mutex> lock(t.mutex);
  prune(t);
  return t.entries.size();
}

}  // namespace tessel::parallel
