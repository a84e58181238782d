"""Build the tiny random-weight model the real-engine tests serve (runs in the real-engine venv).

2 layers, hidden 128, a byte-level BPE tokenizer trained here on a few KB of generated text:
nothing is downloaded from a model hub. Usage: build_tiny_model.py OUT_DIR
"""

import random
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]
VOCAB = 1024


def corpus(seed: int = 1234, sentences: int = 400) -> list[str]:
    """A few KB of deterministic English-like text (the tokenizer only needs plausible merges)."""
    rng = random.Random(seed)
    words = ("the storage array serves key value cache blocks to many inference engines while "
             "tokens stream from prefill and decode and every request measures time to first token "
             "under load with cold restore from disk and warm hits from memory across nodes").split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(6, 18))) + "." for _ in range(sentences)]


def build_tokenizer(out: Path) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="<pad>", model_max_length=8192)
    fast.save_pretrained(out)
    return fast


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    fast = build_tokenizer(out)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(fast), hidden_size=128, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                      max_position_embeddings=8192, bos_token_id=fast.bos_token_id,
                      eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    print(f"tiny model in {out}: vocab {len(fast)}, "
          f"{sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main()
