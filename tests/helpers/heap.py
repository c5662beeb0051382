"""Garbage collection in a long test process.

The bench calls gc.collect() before every measured run. In a process that has already run hundreds of tests (torch,
transformers and streamlit imported, apps and pairs made), one full collection walks millions of live objects: about
2 s each, 34 s for one small bench. Frozen, the objects alive before the bench are left out of every collection;
the collections still run, over everything the bench itself makes, and the measured runs are as the bench has them.
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def frozen_heap() -> Iterator[None]:
    gc.freeze()  # the objects alive now move to the permanent generation: collections skip them
    try:
        yield
    finally:
        gc.unfreeze()  # back into the oldest generation: garbage among them is collected as before
