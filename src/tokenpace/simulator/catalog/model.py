"""A transformer's shape as the step-time model needs it, and its parameter counts.

Parameter counts come from the shape (biases and norms left out: under 0.1%), so the catalog's
``published_params_b`` checks the shape. Embeddings and the LM head are counted apart from the
transformer blocks because quantized checkpoints keep them in 16 bits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ModelSpec:
    id: str
    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # per expert for MoE
    vocab_size: int
    tie_word_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU: gate, up, down (3 matrices); False: up, down (2)
    num_experts: int = 1  # 1: dense
    experts_per_token: int = 1  # top-k routing
    published_params_b: float | None = None
    hf_id: str | None = None
    aliases: tuple[str, ...] = field(default=())

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def attn_params_per_layer(self) -> int:
        q_o = 2 * self.hidden_size * self.num_heads * self.head_dim
        k_v = 2 * self.hidden_size * self.num_kv_heads * self.head_dim
        return q_o + k_v

    @property
    def expert_params(self) -> int:
        """One expert's MLP (the whole MLP of a dense model)."""
        return (3 if self.gated_mlp else 2) * self.hidden_size * self.intermediate_size

    @property
    def router_params_per_layer(self) -> int:
        return self.hidden_size * self.num_experts if self.is_moe else 0

    @property
    def block_params(self) -> int:
        """All transformer-block weights (attention, every expert, routers)."""
        per_layer = self.attn_params_per_layer + self.num_experts * self.expert_params
        return self.num_layers * (per_layer + self.router_params_per_layer)

    @property
    def embedding_params(self) -> int:
        """Input embedding plus LM head (one matrix when tied)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    @property
    def params(self) -> int:
        return self.block_params + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (top-k experts only)."""
        per_layer = self.attn_params_per_layer + self.experts_per_token * self.expert_params
        blocks = self.num_layers * (per_layer + self.router_params_per_layer)
        return blocks + self.embedding_params

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelSpec:
        heads = int(d["num_heads"])
        hidden = int(d["hidden_size"])
        head_dim = d.get("head_dim") or hidden // heads
        pub = d.get("published_params_b")
        return cls(
            id=str(d["id"]),
            name=str(d.get("name", d["id"])),
            num_layers=int(d["num_layers"]),
            hidden_size=hidden,
            num_heads=heads,
            num_kv_heads=int(d.get("num_kv_heads") or heads),
            head_dim=int(head_dim),
            intermediate_size=int(d["intermediate_size"]),
            vocab_size=int(d["vocab_size"]),
            tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
            gated_mlp=bool(d.get("gated_mlp", True)),
            num_experts=int(d.get("num_experts") or 1),
            experts_per_token=int(d.get("experts_per_token") or 1),
            published_params_b=None if pub is None else float(pub),
            hf_id=d.get("hf_id"),
            aliases=tuple(d.get("aliases", ())),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "name": self.name, "hf_id": self.hf_id, "aliases": list(self.aliases),
            "num_layers": self.num_layers, "hidden_size": self.hidden_size,
            "num_heads": self.num_heads, "num_kv_heads": self.num_kv_heads,
            "head_dim": self.head_dim, "intermediate_size": self.intermediate_size,
            "vocab_size": self.vocab_size, "tie_word_embeddings": self.tie_word_embeddings,
            "gated_mlp": self.gated_mlp, "num_experts": self.num_experts,
            "experts_per_token": self.experts_per_token,
            "published_params_b": self.published_params_b,
        }


def experts_touched(num_experts: int, experts_per_token: int, tokens):
    """How many distinct experts ``tokens`` tokens touch on average when each picks ``experts_per_token``
    of ``num_experts`` uniformly: E·(1 − (1 − k/E)^T) (``tokens`` a number or a NumPy array)."""
    return num_experts * (1.0 - (1.0 - experts_per_token / num_experts) ** tokens)


def from_hf_config(cfg: dict[str, Any], model_id: str) -> ModelSpec:
    """A ModelSpec from a Hugging Face ``config.json`` of a Llama-family decoder (Llama, Mistral,
    Mixtral, Qwen2/3 and their MoE variants). Raises KeyError for a missing required field."""
    if "text_config" in cfg and "num_hidden_layers" not in cfg:
        cfg = cfg["text_config"]  # multimodal wrappers keep the language model here
    hidden = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    experts = cfg.get("num_local_experts") or cfg.get("num_experts") or 1
    inter = cfg["intermediate_size"]
    if experts and int(experts) > 1 and cfg.get("moe_intermediate_size"):
        inter = cfg["moe_intermediate_size"]
    return ModelSpec.from_dict({
        "id": model_id,
        "name": cfg.get("_name_or_path") or model_id,
        "num_layers": cfg["num_hidden_layers"],
        "hidden_size": hidden,
        "num_heads": heads,
        "num_kv_heads": cfg.get("num_key_value_heads") or heads,
        "head_dim": cfg.get("head_dim") or hidden // heads,
        "intermediate_size": inter,
        "vocab_size": cfg["vocab_size"],
        "tie_word_embeddings": cfg.get("tie_word_embeddings", False),
        "gated_mlp": True,
        "num_experts": experts,
        "experts_per_token": cfg.get("num_experts_per_tok") or 1,
    })
