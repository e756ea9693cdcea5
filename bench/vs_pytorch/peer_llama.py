"""The PyTorch side of bench/vs_pytorch: the same Llama (HF's LlamaForCausalLM
math: RMSNorm, rotary, grouped-query causal attention, SwiGLU MLP, untied or
tied head), the same weights (read from the model.safetensors that
`tessel init-model --config` wrote), the same batch shape, fp32 on the CPU,
one compute thread per rank, trained with what a PyTorch user would use:

  single   one process
  ddp      DistributedDataParallel over gloo (PyTorch 1.13 or 2.x)
  fsdp2    torch.distributed.fsdp.fully_shard (PyTorch >= 2.8) over gloo, each
           decoder layer then the root, with set_force_sum_reduction_for_comms:
           SUM collectives and FSDP's own scaling to the mean (gloo's AVG was
           wrong before late 2025, pytorch #162338; gloo has no PREMUL_SUM)

Each step: forward, mean next-token cross-entropy, backward, gradient clipping
to max_grad_norm, AdamW. Random token batches (seeded per rank). Prints one JSON
line from rank 0: every step's time (the slowest rank's, after a barrier),
the losses, and the versions. Launch the distributed modes with
`python3 -m torch.distributed.run --nproc_per_node N peer_llama.py ...`.
"""
import argparse
import json
import math
import os
import struct
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtypes[meta["dtype"]])
        out[name] = t.reshape(meta["shape"]).float()
    return out


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotary_tables(head_dim, seq, theta):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.nh, self.nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c.get("head_dim") or h // self.nh
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.nkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.nkv, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.nh // self.nkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch 1.13: HF's eager attention
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd) + mask
            o = torch.softmax(s, dim=-1) @ v
        return self.o_proj(o.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, i = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, c, seq):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([Layer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        if c.get("tie_word_embeddings"):
            self.lm_head.weight = self.embed_tokens.weight
        hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        cos, sin = rotary_tables(hd, seq, c.get("rope_theta", 10000.0))
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin, self.mask)
        return self.lm_head(self.norm(x))

    def load_hf(self, tensors):
        mine = {}
        for name, p in self.named_parameters():
            key = "model." + name if not name.startswith("lm_head") else name
            mine[name] = tensors[key]
        missing = self.load_state_dict(mine, strict=False)
        assert not missing.unexpected_keys, missing.unexpected_keys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--mode", choices=["single", "ddp", "fsdp2"], required=True)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--lr", type=float, default=5e-6)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    distributed = args.mode != "single"
    if distributed:
        if "OMPI_COMM_WORLD_RANK" in os.environ:  # started by mpirun
            os.environ.setdefault("RANK", os.environ["OMPI_COMM_WORLD_RANK"])
            os.environ.setdefault("WORLD_SIZE", os.environ["OMPI_COMM_WORLD_SIZE"])
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    config = json.load(open(os.path.join(args.model_dir, "config.json")))
    model = Llama(config, args.seq)
    model.load_hf(read_safetensors(os.path.join(args.model_dir, "model.safetensors")))
    if args.mode == "ddp":
        model = nn.parallel.DistributedDataParallel(model)
    elif args.mode == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (world,))
        for layer in model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        # SUM-only collectives with FSDP's own pre/post scaling: never gloo's
        # AVG (wrong before late 2025) nor PREMUL_SUM (gloo has none).
        for m in [model, *model.layers]:
            m.set_force_sum_reduction_for_comms(True)
    params = [p for p in model.parameters()]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    gen = torch.Generator().manual_seed(1234 + rank)
    vocab = config["vocab_size"]
    times, losses = [], []
    for step in range(args.steps):
        ids = torch.randint(0, vocab, (args.micro_batch, args.seq + 1), generator=gen)
        if distributed:
            dist.barrier()
        t0 = time.perf_counter()
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, args.max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        elapsed = time.perf_counter() - t0
        if distributed:
            t = torch.tensor([elapsed], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            elapsed = t.item()
            l = loss.detach().clone()
            dist.all_reduce(l)
            lossv = l.item() / world
        else:
            lossv = loss.item()
        times.append(elapsed)
        losses.append(lossv)
    if rank == 0:
        print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "mode": args.mode,
                          "world": world, "seq": args.seq, "micro_batch": args.micro_batch,
                          "tokens_per_step": args.seq * args.micro_batch * world,
                          "step_time_s_each": times, "loss_each": losses,
                          "threads": torch.get_num_threads()}))
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
