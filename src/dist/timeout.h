// Collective timeouts. A rank whose peer died or hangs would otherwise wait
// forever inside a collective; instead the backend ends the job after
// timeout() with one message that names the collective, the group and the
// rank, and says how to change the limit.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace tessel::dist {

// TESSEL_COLLECTIVE_TIMEOUT_S (seconds, may be fractional) or 300 s.
// Throws UsageError for a value that is not a positive number.
std::chrono::milliseconds default_collective_timeout();

// The message printed before the job is ended, e.g. "tessel: collective
// all_reduce on group 'dp_shard (ranks 0,1)' did not finish within 5 s on rank
// 0: a peer process likely died or hangs. Set TESSEL_COLLECTIVE_TIMEOUT_S to
// change the limit."
std::string timeout_message(const std::string& collective, const std::string& group,
                            std::chrono::milliseconds timeout, int world_rank);

// What a rank's timeout_message() says, read back from a line of the job's
// output by the process that launched it (dist/job_supervisor.h), which sees
// the ranks' messages but not their state.
struct TimedOutCollective {
  std::string collective;  // "all_reduce"
  std::string group;       // "dp (ranks 0,1,2,3)"
  std::string limit;       // "30 s"
  int world_rank = -1;
};

// The collective a line of timeout_message() names; nullopt for any other line.
std::optional<TimedOutCollective> parse_timeout_message(std::string_view line);

}  // namespace tessel::dist
