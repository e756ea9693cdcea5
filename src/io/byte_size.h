// Sizes a user writes as text ("5GB", "500MB", "2GiB", "1000000"): the
// shard size of a Hugging Face export (`tessel convert --max-shard-size`,
// checkpointing.consolidated_max_shard_size). Units as transformers'
// max_shard_size: KB, MB, GB, TB are powers of 1000, KiB, MiB, GiB, TiB
// powers of 1024, B or no unit is bytes; case does not matter, a space
// before the unit is allowed, and the number may have a fraction ("1.5GB").
#pragma once

#include <cstdint>
#include <string_view>

namespace tessel::io {

// The positive number of bytes `text` says. tessel::UsageError naming `what`
// (e.g. "--max-shard-size") and the text otherwise: no number, an unknown
// unit, zero, or more than 2^63 bytes.
uint64_t parse_byte_size(std::string_view text, std::string_view what);

}  // namespace tessel::io
