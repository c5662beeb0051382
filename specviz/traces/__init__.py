"""Runs saved as files and read back strictly (a file may come from anyone): traces, the batching results.
May import: specviz.drafters (capabilities), specviz.decoding (events, config), the base modules.
"""
