"""Training the draft heads on the target (never on the decode path): the collection of the target's own
answers, the fits of Medusa heads and the EAGLE head, their data cache and the train-heads command.
May import: specviz.drafters, specviz.decoding, specviz.models and the base modules.
"""
