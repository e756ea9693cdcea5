// The TESSEL_* settings read from the environment, checked at once by the
// commands that start ranks (`tessel train`, `tessel run`): each is
// otherwise read where it is first used, which in a launched rank is after
// MPI has started and, for some, after the model has loaded. A bad value
// throws the same UsageError it would throw there.
#pragma once

namespace tessel::cli {

void check_tessel_environment();

}  // namespace tessel::cli
