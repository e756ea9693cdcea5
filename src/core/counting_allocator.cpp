#include "core/counting_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include "core/cpu_allocator_base.h"

#include <atomic>
#include <mutex>

namespace tessel {

namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

struct Counted {
  c10::DataPtr inner;
  int64_t bytes;
};

void release(void* ctx) {
  auto* c = static_cast<Counted*>(ctx);
  g_live.fetch_sub(c->bytes);
  delete c;  // frees the inner allocation through its own deleter
}

class Counting final : public CpuAllocatorBase {
 public:
  explicit Counting(c10::Allocator* inner) : inner_(inner) {}
  c10::DataPtr allocate_bytes(size_t n) const override {
    c10::DataPtr p = inner_->allocate(n);
    void* data = p.get();
    const c10::Device device = p.device();
    const auto bytes = static_cast<int64_t>(n);
    const int64_t now = g_live.fetch_add(bytes) + bytes;
    int64_t peak = g_peak.load();
    while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
    }
    return {data, new Counted{std::move(p), bytes}, &release, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

 private:
  c10::Allocator* inner_;
};

}  // namespace

void CountingCpuAllocator::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    static Counting counting(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(&counting, /*priority=*/100);
  });
}

int64_t CountingCpuAllocator::live_bytes() { return g_live.load(); }
int64_t CountingCpuAllocator::peak_bytes() { return g_peak.load(); }
void CountingCpuAllocator::reset_peak() { g_peak.store(g_live.load()); }

}  // namespace tessel
