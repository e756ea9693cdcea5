"""PyTorch's side of tessel's GPU benchmark (bench/gpu/run.sh, issue 40).

The same model as tessel's run (an HF config: LlamaForCausalLM from
transformers, random weights), PyTorch FSDP2 as its users run it on one GPU:
fully_shard on every decoder layer and the root over a one-GPU mesh,
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) with fp32 master
weights, fused AdamW, SDPA attention, gradient clipping at 1.0; eager, or
with torch.compile (--compile). Random tokens, every token a target.

Prints one JSON object: the median step time after two warm-up steps,
tokens/s, MFU (6 x parameters + 12 x layers x hidden x seq FLOPs per token,
over the GPU's dense bf16 peak), the peak of torch.cuda.max_memory_allocated,
and with --max-batch the largest micro batch that fits (doubling until out
of memory).

--device cpu runs the same code on the CPU over gloo (a dry run of this
script where no GPU is: a tiny config, no timing worth keeping, no device
memory to report).
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True, help="an HF config.json")
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=1, help="micro batch (sequences per step)")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--max-batch", action="store_true", help="also find the largest micro batch that fits")
    p.add_argument("--max-batch-limit", type=int, default=64, help="stop doubling here")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: a dry run over gloo")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="the GPU's dense bf16 peak")
    p.add_argument("--profile-step", type=int, default=0,
                   help="run this step (from 1) inside cudaProfilerStart/Stop, for ncu --profile-from-start off")
    return p.parse_args()


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def build(config_path, compiled, device):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig.from_json_file(config_path)
    cfg._attn_implementation = "sdpa"
    cfg.use_cache = False
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).float()
    mesh = init_device_mesh(device, (1,))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    if compiled:
        for layer in model.model.layers:
            layer.compile()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    return cfg, model, optimizer


def run(cfg, model, optimizer, batch, seq, steps, device, profile_step=0):
    g = torch.Generator(device=device).manual_seed(1)
    times = []
    for step in range(1, steps + 1):
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=device, generator=g)
        synchronize(device)
        if step == profile_step:
            torch.cuda.profiler.start()
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize(device)
        times.append(time.perf_counter() - t0)
        if step == profile_step:
            torch.cuda.profiler.stop()
    return times, float(loss.detach())


def fits(cfg, model, optimizer, batch, seq, device):
    try:
        run(cfg, model, optimizer, batch, seq, 1, device)
        return True
    except torch.OutOfMemoryError:
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        return False


def main():
    a = parse()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    on_gpu = a.device == "cuda"
    dist.init_process_group("nccl" if on_gpu else "gloo", rank=0, world_size=1)
    cfg, model, optimizer = build(a.config, a.compile, a.device)
    params = sum(p.numel() for p in model.parameters())
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    times, loss = run(cfg, model, optimizer, a.batch, a.seq, a.steps, a.device, a.profile_step)
    measured = times[2:] if len(times) > 2 else times
    step = statistics.median(measured)
    tokens_per_s = a.batch * a.seq / step
    flops_per_token = 6 * params + 12 * cfg.num_hidden_layers * cfg.hidden_size * a.seq
    out = {
        "side": "pytorch_fsdp2" + ("_compiled" if a.compile else "_eager"),
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0) if on_gpu else None,
        "params": params, "seq": a.seq, "micro_batch": a.batch, "steps": a.steps,
        "step_time_s": step, "step_times_s": times, "tokens_per_s": tokens_per_s,
        "mfu": tokens_per_s * flops_per_token / (a.peak_tflops * 1e12),
        "peak_device_bytes": torch.cuda.max_memory_allocated() if on_gpu else None, "last_loss": loss,
    }
    if a.max_batch:
        b = a.batch
        while b * 2 <= a.max_batch_limit and fits(cfg, model, optimizer, b * 2, a.seq, a.device):
            b *= 2
        out["largest_micro_batch"] = b
    print(json.dumps(out))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
