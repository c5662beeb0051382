"""Tiny pairs whose heads differ in width over one tokenizer (models.load_pair accepts both directions).

The tokenizer has 29 ids (<unk> + 28 characters); the target and the draft have 29 or 32 embedding rows and
output ids. The draft is a noisy copy of the target on the ids both have; the ids only one model has get large
output weights, so that the model which has them proposes or produces them often.
"""

import torch

from specviz.models.loading import ModelPair, PairSpec
from specviz.models.tiny import char_tokenizer, tiny_model

ALPHABET = "abcdefghijklmnopqrstuvwxyz ."  # 28 characters: token ids 0..28
TOKENS = len(ALPHABET) + 1
PROMPT = "the cat sat on the mat. the cat sat on the"


@torch.no_grad()
def unequal_pair(
    target_rows: int, draft_rows: int, seed: int = 0, noise: float = 0.05, extra_weight: float = 3.0
) -> ModelPair:
    tokenizer = char_tokenizer(ALPHABET)
    target = tiny_model(target_rows, seed)
    draft = tiny_model(draft_rows, seed + 1)
    shared = min(target_rows, draft_rows)
    source = target.state_dict()
    generator = torch.Generator().manual_seed(seed + 2)
    for name, weight in draft.state_dict().items():
        rows = slice(None) if weight.shape == source[name].shape else slice(0, shared)  # embedding and head
        weight[rows] = source[name][rows]
        weight.add_(noise * weight.std() * torch.randn(weight.shape, generator=generator))
    wider = draft if draft_rows > target_rows else target
    wider.lm_head.weight[shared:] *= extra_weight
    names = {
        "target": f"tiny-{target_rows}",
        "draft": f"tiny-{draft_rows}",
        "device": "cpu",
        "dtype": "float32",
        "draft_quantized": "no",
    }
    return ModelPair(
        target, draft, tokenizer, torch.device("cpu"), torch.float32, PairSpec(target="tiny", draft="tiny"), names
    )
