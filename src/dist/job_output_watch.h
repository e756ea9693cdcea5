// What a job's error output says about how it is failing, read line by line
// by the process that launched it: a rank's collective timeout
// (dist/timeout.h) and the launcher's own notices that it is ending the job
// (a rank called MPI_Abort, a rank died). After either, a healthy launcher
// ends the job within seconds; one that does not is waiting on a node it can
// no longer reach (dist/job_supervisor.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dist/timeout.h"

namespace tessel::dist {

class JobOutputWatch {
 public:
  // Bytes as they arrive; lines may be split across calls.
  void feed(std::string_view bytes);

  // Every collective timeout a rank reported, in order.
  const std::vector<TimedOutCollective>& timeouts() const { return timeouts_; }
  // A rank reported a timeout, called MPI_Abort, or died: the job is ending.
  bool job_failing() const { return failing_; }

 private:
  void line(std::string_view text);

  std::string partial_;
  std::vector<TimedOutCollective> timeouts_;
  bool failing_ = false;
};

}  // namespace tessel::dist
