"""Workloads: what requests look like (lengths, prompts, datasets, shared prefixes, conversations,
reasoning and tools) and when they arrive (arrival processes, trace replay)."""

from tokenpace.workload.conversations import (Conversation, ConversationSpec, ConversationTurn,
                                              build_conversations, parse_conversations)
from tokenpace.workload.datasets import Dataset, DatasetEntry, load_dataset, messages_text
from tokenpace.workload.lengths import LengthSpec, parse_length
from tokenpace.workload.plan import (PlannedRequest, WorkloadSpec, conversations_for, engine_block_hashes,
                                     plan_requests)
from tokenpace.workload.prompts import APPROXIMATION, PromptMaker, exact_prompt, synthetic_prompt
from tokenpace.workload.shared_prefix import SharedPrefixSpec, parse_shared_prefix
from tokenpace.workload.tokenizer import Tokenizer, load_tokenizer

__all__ = ["APPROXIMATION", "Conversation", "ConversationSpec", "ConversationTurn", "Dataset",
           "DatasetEntry", "LengthSpec", "PlannedRequest", "PromptMaker", "SharedPrefixSpec",
           "Tokenizer", "WorkloadSpec", "build_conversations", "conversations_for", "engine_block_hashes", "exact_prompt", "load_dataset",
           "load_tokenizer", "messages_text", "parse_conversations", "parse_length",
           "parse_shared_prefix", "plan_requests", "synthetic_prompt", "workload_from_config",
           "workload_summary"]


def __getattr__(name: str):
    # workload_from_config imports config; loaded on first use to keep this package's imports light.
    if name in ("workload_from_config", "workload_summary"):
        from tokenpace.workload import build

        return getattr(build, name)
    raise AttributeError(name)
