"""Bring model weights into the page cache ahead of their first use, in a background thread.

from_pretrained memory-maps safetensors files, so their pages are first read when quantizing the draft and
packing the target touch them, in small scattered reads. madvise(MADV_POPULATE_READ) over large pieces reads
them front to back with next to no CPU; plain reads do the same where it is missing. For the figures, see
docs/notes/2026-12-bench-and-loading.md, "Loading: prefetching the weights".
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import threading
from pathlib import Path


def prefetch_files(files: list[Path], piece: int = 64 << 20) -> threading.Thread | None:
    """Read `files` into the page cache in that order in a daemon thread (returned), or None when there is
    nothing to read or more than half the machine's memory (the page cache could not keep it until used)."""
    if not files or sum(f.stat().st_size for f in files) > physical_memory() // 2:
        return None
    thread = threading.Thread(target=_populate, args=(files, piece), name="specviz-prefetch", daemon=True)
    thread.start()
    return thread


def _populate(files: list[Path], piece: int) -> None:
    for file in files:
        try:
            with open(file, "rb", buffering=0) as handle:
                size = os.fstat(handle.fileno()).st_size
                if size and not _madvise_populate(handle.fileno(), size, piece):
                    while handle.read(piece):  # no madvise here: plain reads fill the page cache as well
                        pass
        except OSError:  # only a warm-up: from_pretrained reports a bad file itself
            return


def _madvise_populate(fd: int, size: int, piece: int) -> bool:
    """MADV_POPULATE_READ (Linux 5.14+) over a private read-only mapping of fd; False where it is not available.

    Through ctypes, which lets go of the GIL during the call (mmap.madvise holds it, and would stall the
    loading thread for as long as the disk takes).
    """
    madv_populate_read = 22  # linux/mman.h
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    except (OSError, AttributeError):
        return False
    # One piece mapped at a time: populated pages count in this process's memory while they are mapped, and a
    # whole 3.5 GB file mapped at once would add that much to the loading's peak (the page cache keeps them anyway).
    for start in range(0, size, piece):  # piece is a multiple of the page size, so every offset is aligned
        length = min(piece, size - start)
        address = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, start)
        if address is None or address == ctypes.c_void_p(-1).value:
            return start > 0
        try:
            if libc.madvise(address, length, madv_populate_read) != 0:
                return start > 0  # refused at once: an older kernel (the caller reads instead)
        finally:
            libc.munmap(address, length)
    return True


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not on this platform: assume a small machine
        return 8 << 30
