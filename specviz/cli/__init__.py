"""The command line's shared arguments and their checks, for `python -m specviz` (specviz/__main__.py) and the
bench's subcommands. May import: specviz.runs and everything below it.
"""
