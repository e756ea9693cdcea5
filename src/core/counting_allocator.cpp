#include "core/counting_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include "core/cpu_allocator_base.h"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <cstdlib>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace tessel {

namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<bool> g_installed{false};

// Each counted block carries its size in a header in front of the bytes the
// tensor sees, so that the block is freed from its data pointer alone: the
// data pointer is also the DataPtr's context, as c10's raw_allocate (which
// some ATen kernels call for their scratch, e.g. bf16 products) requires.
// One alignment unit, so the tensor's bytes keep c10's alignment.
constexpr size_t kHeaderBytes = c10::gAlignment;
static_assert(kHeaderBytes >= sizeof(int64_t), "the header holds the block's size");

c10::DeleterFnPtr g_inner_free = nullptr;  // the wrapped allocator's raw deleter, set once by install()

void release(void* data) {
  if (data == nullptr) return;
  std::byte* base = static_cast<std::byte*>(data) - kHeaderBytes;
  int64_t bytes = 0;
  std::memcpy(&bytes, base, sizeof(bytes));
  g_live.fetch_sub(bytes);
  g_inner_free(base);
}

class Counting final : public CpuAllocatorBase {
 public:
  explicit Counting(c10::Allocator* inner) : inner_(inner) {}
  c10::DataPtr allocate_bytes(size_t n) const override {
    void* base = inner_->raw_allocate(n + kHeaderBytes);
    const auto bytes = static_cast<int64_t>(n);
    std::memcpy(base, &bytes, sizeof(bytes));
    void* data = static_cast<std::byte*>(base) + kHeaderBytes;
    const int64_t now = g_live.fetch_add(bytes) + bytes;
    int64_t peak = g_peak.load();
    while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
    }
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

 private:
  c10::Allocator* inner_;
};

}  // namespace

void CountingCpuAllocator::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::Allocator* inner = c10::GetDefaultCPUAllocator();
    g_inner_free = inner->raw_deleter();
    TESSEL_CHECK(g_inner_free != nullptr, "the default CPU allocator has no raw deleter to count around");
    static Counting counting(inner);
    c10::SetCPUAllocator(&counting, /*priority=*/100);
    g_installed.store(true);
  });
}

void CountingCpuAllocator::install_from_env() {
  const char* value = std::getenv("TESSEL_COUNT_TENSOR_BYTES");
  const std::string v = value != nullptr ? value : "";
  if (v.empty() || v == "0") return;
  if (v != "1") throw UsageError(fmt::format("TESSEL_COUNT_TENSOR_BYTES='{}' is not 0 or 1", v));
  install();
}

bool CountingCpuAllocator::installed() { return g_installed.load(); }

int64_t CountingCpuAllocator::live_bytes() { return g_live.load(); }
int64_t CountingCpuAllocator::peak_bytes() { return g_peak.load(); }
void CountingCpuAllocator::reset_peak() { g_peak.store(g_live.load()); }

}  // namespace tessel
