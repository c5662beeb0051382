"""Helpers shared by the test modules: plain functions and constants, never tests (pytest collects nothing here).

Test modules import from here (`from helpers.lossless import chi_square_rejects`), never from each other; fixtures
shared between modules live in tests/conftest.py.

- lossless: the chi-square check of a sampler's first two tokens against the target's exact joint distribution, and
  the one-layer pair it samples.
- heads: random Medusa heads and EAGLE heads for a tiny pair.
- app: the app under streamlit's AppTest (moving between pages, waiting for a page's background run).
- browser: the app served by `streamlit run` and driven by headless Chromium; when a page has settled; typing into a
  box so that a rerun cannot lose the text.
"""
