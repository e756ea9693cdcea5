// The CUDA backend of device/backend.h: devices, memory counters and streams
// through c10's CUDA runtime (the same streams and caching allocator ATen's
// CUDA kernels use), events through the CUDA runtime API.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Backtrace.h>
#include <c10/util/Exception.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "core/error.h"
#include "device/backend.h"
#include "device/cuda/cuda_stream.h"

namespace tessel::device {
namespace {

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw Error(fmt::format("CUDA: {} failed: {}", call, cudaGetErrorString(status)));
}

class CudaStream : public Stream {
 public:
  explicit CudaStream(c10::cuda::CUDAStream s) : stream(s) {}
  std::string describe() const override {
    return fmt::format("cuda:{} stream {}", static_cast<int>(stream.device_index()), stream.id());
  }
  c10::cuda::CUDAStream stream;
};

class CudaEvent : public Event {
 public:
  CudaEvent(c10::DeviceIndex device, bool timing) : device_(device) {
    c10::cuda::CUDAGuard guard(device_);
    check_cuda(
        cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
  }
  ~CudaEvent() override {
    c10::cuda::CUDAGuard guard(device_);
    (void)cudaEventDestroy(event_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // Both under the event's device: the collective watch calls them from a
  // thread of its own, whose current device would otherwise be 0, and the
  // runtime's first call there would make a context on GPU 0 for every rank.
  bool query() override {
    c10::cuda::CUDAGuard guard(device_);
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaSuccess) return true;
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not ready" is an answer, not an error to report later
      return false;
    }
    check_cuda(status, "cudaEventQuery");
    return false;
  }
  void synchronize() override {
    c10::cuda::CUDAGuard guard(device_);
    check_cuda(cudaEventSynchronize(event_), "cudaEventSynchronize");
  }

  cudaEvent_t handle() const { return event_; }

 private:
  c10::DeviceIndex device_;
  cudaEvent_t event_ = nullptr;
};

const CudaStream& as_cuda(const Stream& s) {
  const auto* cuda = dynamic_cast<const CudaStream*>(&s);
  TESSEL_CHECK(cuda != nullptr, "CUDA stream operations got a stream of another device kind: {}",
               s.describe());
  return *cuda;
}

const CudaEvent& as_cuda(const Event& e) {
  const auto* cuda = dynamic_cast<const CudaEvent*>(&e);
  TESSEL_CHECK(cuda != nullptr, "CUDA stream operations got an event of another device kind");
  return *cuda;
}

class CudaStreamOps : public StreamOps {
 public:
  StreamPtr current_stream() override {
    return std::make_shared<CudaStream>(c10::cuda::getCurrentCUDAStream());
  }
  StreamPtr new_stream() override {
    // From c10's pool: created non-blocking, so they do not serialise with
    // the legacy default stream ATen computes on.
    return std::make_shared<CudaStream>(c10::cuda::getStreamFromPool(/*isHighPriority=*/true));
  }
  EventPtr record(const Stream& stream, bool timing) override {
    const c10::cuda::CUDAStream& s = as_cuda(stream).stream;
    auto event = std::make_shared<CudaEvent>(s.device_index(), timing);
    c10::cuda::CUDAGuard guard(s.device_index());
    check_cuda(cudaEventRecord(event->handle(), s.stream()), "cudaEventRecord");
    return event;
  }
  void wait(const Stream& stream, const Event& event) override {
    const c10::cuda::CUDAStream& s = as_cuda(stream).stream;
    c10::cuda::CUDAGuard guard(s.device_index());
    check_cuda(cudaStreamWaitEvent(s.stream(), as_cuda(event).handle(), 0), "cudaStreamWaitEvent");
  }
  double elapsed_ms(const Event& from, const Event& to) override {
    float ms = 0.0F;
    check_cuda(cudaEventElapsedTime(&ms, as_cuda(from).handle(), as_cuda(to).handle()),
               "cudaEventElapsedTime");
    return static_cast<double>(ms);
  }
};

class CudaBackend : public Backend {
 public:
  const char* name() const override { return "cuda"; }
  int device_count() const override { return static_cast<int>(c10::cuda::device_count()); }
  std::string unavailable_reason() const override {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    (void)cudaGetLastError();
    if (status != cudaSuccess)
      return fmt::format("the CUDA runtime finds no device: {}", cudaGetErrorString(status));
    return count > 0 ? std::string() : std::string("the CUDA runtime finds no device");
  }
  void set_current_device(int index) const override {
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
  }
  std::string describe(int index) const override {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    return fmt::format("{}, {:.1f} GiB, compute capability {}.{}", prop.name,
                       static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                       prop.major, prop.minor);
  }
  void synchronize(int index) const override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
    c10::cuda::device_synchronize();
  }
  MemoryStats memory_stats(int index) const override {
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
    constexpr auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return {stats.allocated_bytes[all].current, stats.allocated_bytes[all].peak,
            stats.reserved_bytes[all].current, stats.reserved_bytes[all].peak};
  }
  void reset_peak_memory(int index) const override {
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index));
  }
  StreamOps& stream_ops() const override { return streams_; }
  void start_profiler_range() const override { check_cuda(cudaProfilerStart(), "cudaProfilerStart"); }
  void stop_profiler_range() const override { check_cuda(cudaProfilerStop(), "cudaProfilerStop"); }

  std::vector<std::string> host_waits_during(const std::function<void()>& fn) const override {
    // c10 reports each synchronizing call as a warning in its sync debug
    // mode; this thread's warnings go to the recorder meanwhile (the
    // autograd engine replays a backward's warnings on the thread that ran
    // backward()). Other warnings pass on to the handler there was.
    struct Recorder : c10::WarningHandler {
      c10::WarningHandler* previous = nullptr;
      std::vector<std::string> stacks;
      void process(const c10::Warning& warning) override {
        if (warning.msg().find("synchronizing CUDA operation") != std::string::npos) {
          stacks.push_back(c10::get_backtrace(/*frames_to_skip=*/2, /*maximum_number_of_frames=*/32));
        } else {
          previous->process(warning);
        }
      }
    } recorder;
    // The sync debug mode there was, restored however fn() ends.
    struct WarnOnSync {
      c10::cuda::SyncDebugMode before = c10::cuda::warning_state().get_sync_debug_mode();
      WarnOnSync() { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN); }
      ~WarnOnSync() { c10::cuda::warning_state().set_sync_debug_mode(before); }
    };
    recorder.previous = c10::WarningUtils::get_warning_handler();
    {
      c10::WarningUtils::WarningHandlerGuard guard(&recorder);
      const WarnOnSync warn_on_sync;
      fn();
    }
    return std::move(recorder.stacks);
  }

 private:
  mutable CudaStreamOps streams_;
};

}  // namespace

cudaStream_t cuda_stream(const Stream& stream) { return as_cuda(stream).stream.stream(); }

const Backend* cuda_backend() {
  static const CudaBackend backend;
  return &backend;
}

std::string no_cuda_reason() {
  const std::string why = cuda_backend()->unavailable_reason();
  return why.empty() ? std::string("CUDA devices are present") : why;
}

}  // namespace tessel::device
