// Error text for a tensor name that is not in a file or checkpoint: lists the
// available names closest to the requested one, so a user with a prefix or
// naming mismatch ("model." vs none, "lm_head" vs tied embeddings) sees it.
#pragma once

#include <string>
#include <vector>

namespace tessel::io {

// "N tensors available, closest: 'a', 'b', ..." (at most `limit` names,
// ranked by how much of the requested name they share at the start and end).
std::string describe_available_names(const std::vector<std::string>& available,
                                     const std::string& requested, size_t limit = 5);

}  // namespace tessel::io
