"""Random draft heads for a tiny pair: Medusa heads and an EAGLE head over a reduced vocabulary."""

import torch

from specviz.drafters.eagle_head import head_config
from specviz.drafters.heads import EagleHead, MedusaHeads
from specviz.training.train import lm_head_rows


def random_heads(pair, count: int = 3, keep: list[int] | None = None, seed: int = 0) -> MedusaHeads:
    """Heads with random blocks over a reduced vocabulary `keep` (default: every id)."""
    width = pair.target.config.vocab_size
    ids = torch.tensor(keep if keep is not None else list(range(width)))
    heads = MedusaHeads(pair.target.config.hidden_size, count, lm_head_rows(pair.target, ids), ids, width)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for block in heads.blocks:
            block.weight.copy_(0.5 * torch.randn(block.weight.shape, generator=generator))
    return heads.eval()


def random_head(pair, keep: list[int] | None = None, seed: int = 0, intermediate: int = 48) -> EagleHead:
    width = pair.target.config.vocab_size
    ids = torch.tensor(keep if keep is not None else list(range(width)))
    torch.manual_seed(seed)
    head = EagleHead(head_config(pair.target.config, intermediate), lm_head_rows(pair.target, ids), ids, width)
    return head.eval()
