# compatibility: moved to tokenpace.gguf (the simulator and the workload both import it downward)
from tokenpace.gguf import (GGUF_MAGIC, GGUFHeader, GGUFTensor, GGUFVocab, is_gguf,  # noqa: F401
                            read_gguf_header, read_gguf_vocab)
