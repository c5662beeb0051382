"""Tiny random model pairs built from a config: fast stand-ins for tests and quick demos.

The draft is the target with noise added to its weights, so that acceptance is neither 0 nor 1.
The character-level tokenizer covers printable ASCII, so app tests can type real prompts.
"""

from __future__ import annotations

import string
from copy import deepcopy
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from .attention import make_row_invariant
from .loading import ModelPair, PairSpec

PRINTABLE = "".join(dict.fromkeys(string.printable))


def char_tokenizer(alphabet: str = PRINTABLE) -> PreTrainedTokenizerFast:
    """One token per character of the alphabet, after <unk>.

    No eos_token is declared, so tiny runs always go to max_new_tokens; tests that need an end of
    sequence declare one on the model's generation_config.
    """
    symbols = ["<unk>"] + list(alphabet)
    core = Tokenizer(models.WordLevel({s: i for i, s in enumerate(symbols)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<unk>")


def tiny_model(vocab_size: int, seed: int, hidden: int = 32, layers: int = 2, spread: float = 0.2) -> Qwen2ForCausalLM:
    """A random Qwen2; a large initializer range makes its next-token distributions peaked, not uniform."""
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        initializer_range=spread,
        tie_word_embeddings=False,
        eos_token_id=None,
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    return model


def noisy_copy(model: Qwen2ForCausalLM, noise: float, seed: int) -> Qwen2ForCausalLM:
    copy = Qwen2ForCausalLM(deepcopy(model.config)).eval()  # its own config: the target's attention may change
    copy.load_state_dict(model.state_dict())
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for weight in copy.parameters():
            weight.add_(noise * weight.std() * torch.randn(weight.shape, generator=generator))
    return copy


def tiny_pair(alphabet: str = PRINTABLE, seed: int = 0, noise: float = 0.05, layers: int = 2) -> ModelPair:
    """A target and a noisy-copy draft over a character vocabulary: <unk> + alphabet.

    A short alphabet ("abcde") gives a vocabulary small enough to enumerate exact distributions.
    """
    tokenizer = char_tokenizer(alphabet)
    size = len(tokenizer)
    target = tiny_model(size, seed, layers=layers)
    draft = noisy_copy(target, noise, seed + 1)
    make_row_invariant(target)  # as load_pair's target
    names = {
        "target": f"tiny-random-{size}",
        "draft": f"tiny-random-{size}+noise{noise}",
        "device": "cpu",
        "dtype": "float32",
        "draft_quantized": "no",
        "attention": "row-invariant",
    }
    return ModelPair(
        target, draft, tokenizer, torch.device("cpu"), torch.float32, PairSpec(target="tiny", draft="tiny"), names
    )


def eos_tokenizer(symbols: str) -> PreTrainedTokenizerFast:
    """One token per character of `symbols`, plus <eos> and <unk>; no pad token (load_pair must add one)."""
    vocab = {s: i for i, s in enumerate(["<eos>", "<unk>", *dict.fromkeys(symbols)])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>", unk_token="<unk>")


def save_tiny(folder: Path, symbols: str | None, vocab_size: int | None = None, seed: int = 0) -> Path:
    """A random 1-layer Llama saved in folder (a local model directory for load_pair), with a tokenizer over
    `symbols` (None: weights only).

    Llama, not Qwen2: AutoTokenizer reads a generic tokenizer saved next to a qwen2 config as a
    Qwen2Tokenizer, which adds <|endoftext|> (one token more than the model has rows).
    """
    tokenizer = eos_tokenizer(symbols) if symbols is not None else None
    size = vocab_size or len(tokenizer)
    config = LlamaConfig(
        vocab_size=size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        eos_token_id=0,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(folder)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    return folder
