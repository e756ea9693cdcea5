#include "dist/job_output_watch.h"

namespace tessel::dist {

namespace {

// Longer "lines" are not messages of interest (a progress bar redrawn with
// carriage returns); keeping their start only bounds the memory.
constexpr size_t kLongestLine = 64 * 1024;

// Open MPI's (4.x) notices that it is ending the job: after MPI_Abort, and
// after a rank died or was killed.
constexpr std::string_view kEndingNotices[] = {
    "MPI_ABORT was invoked on rank",
    "mpirun noticed that process rank",
    "ORTE has lost communication with a remote daemon",
};

}  // namespace

void JobOutputWatch::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, newline);
    if (partial_.size() < kLongestLine) partial_.append(piece.substr(0, kLongestLine - partial_.size()));
    if (newline == std::string_view::npos) return;
    line(partial_);
    partial_.clear();
    bytes.remove_prefix(newline + 1);
  }
}

void JobOutputWatch::line(std::string_view text) {
  if (auto timed_out = parse_timeout_message(text)) {
    timeouts_.push_back(std::move(*timed_out));
    failing_ = true;
    return;
  }
  for (std::string_view notice : kEndingNotices) {
    if (text.find(notice) != std::string_view::npos) failing_ = true;
  }
}

}  // namespace tessel::dist
