// A micro batch as one context-parallel rank sees it (SPEC 2): every row
// padded to a multiple of 2·cp tokens, then cut into 2·cp chunks of which the
// rank keeps its load-balanced two (parallel/load_balanced_chunks.h). Labels
// are next-token targets already aligned with their tokens, so they are cut
// the same way; position ids are the global positions of the kept tokens
// (rotary angles as in the whole row); document ids travel along for packed
// rows; a policy loss's per-token values are cut like the labels. The
// padding is ignored by the loss and, being after every real token
// of its row (or a document of its own when packed), invisible to attention.
#pragma once

#include "train/train_step.h"

namespace tessel::train {

// cp_size 1 returns `batch` unchanged (no padding).
MicroBatch context_parallel_slice(const MicroBatch& batch, int cp_size, int cp_rank);

}  // namespace tessel::train
