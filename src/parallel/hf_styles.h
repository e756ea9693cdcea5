// Hugging Face tensor-parallel style strings (SPEC 3's table) as style
// objects. Every string any transformers release used for dense models is
// accepted (colwise, rowwise, colwise_rep, colwise_gather_output, rowwise_rep,
// rowwise_split_input, sequence_parallel, replicate,
// replicated_with_grad_allreduce, local_colwise, local_rowwise, local, gather,
// embedding_rowwise, packed_colwise, packed_rowwise, local_packed_rowwise);
// an unknown one throws tessel::UsageError listing them. HF's
// mixture-of-experts styles (grouped_gemm, ep_router, megamoe_router,
// moe_tp_experts, megamoe_experts, moe_identity_expert) are refused with a
// message saying expert parallelism is not built yet and what to do instead;
// local_colwise / local_rowwise / local / gather, which HF's MoE plans also
// use, are honoured as the table of SPEC 3 says.
//
// `vocab_parallel_head`: `colwise_rep` / `colwise_gather_output` keep the
// output vocab-sharded (no gather of logits) when the loss consumes sharded
// logits (SPEC 3); it applies only where the plan says so (lm_head).
#pragma once

#include <string>
#include <vector>

#include "parallel/style.h"

namespace tessel::parallel {

const std::vector<std::string>& supported_style_strings();
StylePtr style_from_string(const std::string& style, bool vocab_parallel_head = false);
// Whether `style` is one of HF's mixture-of-experts style strings (refused).
bool is_hf_moe_style(const std::string& style);

}  // namespace tessel::parallel
