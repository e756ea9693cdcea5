// Group names as they appear in messages: the caller's name for the group plus
// the member world ranks, e.g. "dp_shard (ranks 0,1,2,3)". A timeout message
// that names the ranks tells the user which processes to look at.
#pragma once

#include <string>
#include <vector>

namespace tessel::dist {

// "name (ranks a,b,c)"; long runs of consecutive ranks are shortened to "a-b"
// once the group has more than 16 members, so messages stay one line.
std::string format_group_name(const std::string& name, const std::vector<int>& world_ranks);

}  // namespace tessel::dist
