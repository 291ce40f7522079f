"""A small real tokenizer, trained here (nothing is downloaded): byte-level BPE like Llama 3's."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.workload.prompts import VOCABULARY

EXTRA_WORDS = ("tokenization throughput latency percentile prefill decode scheduler batching "
               "kilowatt serendipity onomatopoeia").split()


def training_text(n: int = 3000) -> list[str]:
    rng = np.random.default_rng(0)
    words = list(VOCABULARY[::3]) + EXTRA_WORDS  # a third of the prompt words: the rest split
    return [" ".join(words[i] for i in rng.integers(0, len(words), size=12)) for _ in range(n)]


@pytest.fixture(scope="session")
def bpe_json(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|begin|>", "<|end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_text(), trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path
