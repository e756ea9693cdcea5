#include "dist/stream_ordered_work.h"

#include <algorithm>
#include <optional>

#include "dist/caller_wait_time.h"

namespace tessel::dist {

StreamOrderedWork::StreamOrderedWork(device::StreamOps& ops, device::EventPtr done,
                                     std::vector<at::Tensor> tensors)
    : ops_(ops), done_(std::move(done)), tensors_(std::move(tensors)) {}

void StreamOrderedWork::wait() {
  if (waited_) return;
  waited_ = true;
  const device::StreamPtr compute = ops_.current_stream();
  // Where the compute stream stands when it starts to wait, timed: its stall
  // is from there to the collective's end (none if that came first).
  device::EventPtr reached = ops_.record(*compute, /*timing=*/true);
  ops_.wait(*compute, *done_);
  add_stream_wait(
      [&ops = ops_, reached = std::move(reached), done = done_]() -> std::optional<double> {
        if (!reached->query() || !done->query()) return std::nullopt;
        return std::max(0.0, ops.elapsed_ms(*reached, *done)) / 1e3;
      });
}

CollectiveStream::CollectiveStream(device::StreamOps& ops, std::shared_ptr<CollectiveWatch> watch)
    : ops_(ops), stream_(ops.new_stream()), watch_(std::move(watch)) {}

WorkPtr CollectiveStream::issue(const char* collective, const std::string& group,
                                std::chrono::milliseconds timeout, std::vector<at::Tensor> tensors,
                                const std::function<void(const device::Stream&)>& launch) {
  const device::StreamPtr compute = ops_.current_stream();
  const device::EventPtr ready = ops_.record(*compute);
  ops_.wait(*stream_, *ready);
  launch(*stream_);
  // Timed, so that a wait's stall can be measured against it.
  device::EventPtr done = ops_.record(*stream_, /*timing=*/true);
  if (watch_) watch_->watch(collective, group, timeout, done);
  return std::make_shared<StreamOrderedWork>(ops_, std::move(done), std::move(tensors));
}

}  // namespace tessel::dist
