"""A small real torch model with Megatron-LM's param attributes set, for the tool tests."""
import torch
from torch import nn


class Float8Tensor(nn.Parameter):
    """Stands in for Transformer Engine's Float8Tensor: the tools match it by class name."""


class Block(nn.Module):
    def __init__(self, hidden, experts):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.experts = nn.ParameterList(
            [nn.Parameter(torch.zeros(2 * hidden, hidden)) for _ in range(experts)])
        for p in self.experts:
            p.allreduce = False


class Tiny(nn.Module):
    def __init__(self, vocab=100, hidden=64, layers=2, experts=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList([Block(hidden, experts) for _ in range(layers)])
        self.output = nn.Linear(hidden, vocab, bias=False)
        self.embedding.weight.is_embedding_or_output_parameter = True
        self.output.weight.is_embedding_or_output_parameter = True
        self.layers[0].norm.bias.requires_grad = False        # frozen: not in the manifest
        self.layers[1].proj.weight.use_muon = False
        self.layers[1].qkv.weight.is_gtp_weight_remat = True
        self.layers[1].qkv.weight.gtp_remat_size = 4


def build():
    """The factory `paramlayout_torch.py tiny_model:build` calls."""
    model = Tiny().to(torch.bfloat16)
    model.layers[0].proj.weight = Float8Tensor(model.layers[0].proj.weight.detach())
    return model
