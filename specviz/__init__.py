"""specviz: speculative decoding, shown step by step on real models.

The package's layers, lowest first (a module imports only from its own folder and from folders below it;
tests/test_structure.py holds the code to it):

  errors, progress          base: user-facing errors, progress callbacks
  models/                   loading pairs, the built-in pair, CPU fast paths, tiny random pairs
  decoding/                 the round (engine, acceptance, token trees, caches, schedules, costs, events, batches)
  drafters/                 every proposer behind one protocol, and the registry of their capabilities
  traces/   training/       runs saved and read back strictly; head training
  runs                      the facade: a whole run from text (the CLI, the bench and the app call it)
  lessons/  cli/            what the pages teach, as plain numbers and words; the command line's arguments
  bench/  serving/  markup/ the benchmark, background jobs, HTML and words
  charts/                   plotly figures
  ui/                       the only streamlit
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository: assets/ and pages/ are read from here
ASSETS = ROOT / "assets"
