"""The round: draft, verify, accept, commit (engine), and everything it is made of.

Owns the acceptance rule and the token-tree walk, sampling (transformers warpers), the per-run KV caches, the
schedules of gamma, the frozen events a run yields and the batched round. Knows token ids only and the Drafter
protocol (proposal.py), never a concrete drafter. May import: specviz.errors, specviz.progress, specviz.models.
"""
