"""Custom tensor-parallel plans for Llama-style decoders (Llama, Qwen2/3, Mistral).

Written as NeMo RL writes them: module-level dicts of module pattern ->
torch ParallelStyle. tessel reads this file as data and never runs it (SPEC 3):
only these imports, dict assignments, style calls and docstrings are allowed.

Select a plan with its dotted path, as in the reference:

    policy.dtensor_cfg.custom_parallel_plan=examples.custom_parallel.custom_parallel.custom_parallel_plan

That path also names custom_parallel.yaml next to this file, which defines a
plan of the same name in HF style strings: this .py file wins (the log line
says so). Reach the YAML one with
examples/custom_parallel/custom_parallel.yaml:custom_parallel_plan.
"""

from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
)
from torch.distributed.tensor.placement_types import Replicate, Shard

# The Megatron layout: q/k/v and gate/up split by output features, o/down by
# input features (their outputs are summed across ranks), a vocab-parallel
# embedding, and vocab-sharded logits that the loss consumes without a gather.
custom_parallel_plan: dict[str, ParallelStyle] = {
    "model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
    "model.layers.*.self_attn.q_proj": ColwiseParallel(),
    "model.layers.*.self_attn.k_proj": ColwiseParallel(),
    "model.layers.*.self_attn.v_proj": ColwiseParallel(),
    "model.layers.*.self_attn.o_proj": RowwiseParallel(),
    "model.layers.*.mlp.gate_proj": ColwiseParallel(),
    "model.layers.*.mlp.up_proj": ColwiseParallel(),
    "model.layers.*.mlp.down_proj": RowwiseParallel(),
    "lm_head": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False),
}

"""Output projections that gather instead of summing.

o_proj and down_proj are column-parallel over their sharded input: the input
features are all-gathered, each rank computes its slice of the output
features, and the slices are all-gathered. No partial sums are added across
ranks, so the result does not depend on the order of a reduction.
"""
gathered_output_projections = {
    "model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
    "model.layers.*.self_attn.q_proj": ColwiseParallel(),
    "model.layers.*.self_attn.k_proj": ColwiseParallel(),
    "model.layers.*.self_attn.v_proj": ColwiseParallel(),
    "model.layers.*.self_attn.o_proj": ColwiseParallel(
        input_layouts=Shard(-1),
        output_layouts=Replicate(),
        use_local_output=True,
    ),
    "model.layers.*.mlp.gate_proj": ColwiseParallel(),
    "model.layers.*.mlp.up_proj": ColwiseParallel(),
    "model.layers.*.mlp.down_proj": ColwiseParallel(
        input_layouts=Shard(-1),
        output_layouts=Replicate(),
        use_local_output=True,
    ),
    "lm_head": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False),
}

# Sequence parallelism: between the attention and MLP blocks the activations
# stay split along the sequence (dim 1); the norms run on their shard of it.
# HF passes hidden states to attention by keyword, hence input_kwarg_layouts.
sequence_parallel_plan = {
    "model.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
    "model.layers.*.input_layernorm": SequenceParallel(),
    "model.layers.*.self_attn": PrepareModuleInput(
        input_kwarg_layouts={"hidden_states": Shard(1)},
        desired_input_kwarg_layouts={"hidden_states": Replicate()},
    ),
    "model.layers.*.self_attn.q_proj": ColwiseParallel(),
    "model.layers.*.self_attn.k_proj": ColwiseParallel(),
    "model.layers.*.self_attn.v_proj": ColwiseParallel(),
    "model.layers.*.self_attn.o_proj": RowwiseParallel(output_layouts=Shard(1)),
    "model.layers.*.post_attention_layernorm": SequenceParallel(),
    "model.layers.*.mlp": PrepareModuleInput(
        input_layouts=(Shard(1),),
        desired_input_layouts=(Replicate(),),
    ),
    "model.layers.*.mlp.gate_proj": ColwiseParallel(),
    "model.layers.*.mlp.up_proj": ColwiseParallel(),
    "model.layers.*.mlp.down_proj": RowwiseParallel(output_layouts=Shard(1)),
    "model.norm": SequenceParallel(),
    "lm_head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False),
}
