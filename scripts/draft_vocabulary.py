"""Make assets/draft_vocabulary.json: the built-in tokenizer's ids, most frequent first (specviz/models/vocabulary.py).

A token's rank is the better of its id (byte-pair merges are numbered in the order their pair was most frequent in
the tokenizer's own training text) and its rank by count in a local corpus: Python's standard library (code), the
Markdown files installed with the Python packages and Debian's text documentation (English prose), and the translated
messages of Debian's locales (many languages). Nothing here comes from the bench's prompts.

    .venv/bin/python scripts/draft_vocabulary.py [--keep 65536] [--per-source-mb 20]
"""

from __future__ import annotations

import argparse
import base64
import collections
import datetime
import gettext
import glob
import hashlib
import struct
import sys
import sysconfig
import zlib
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specviz.models.vocabulary import RANKING_FILE, Ranking  # noqa: E402

SOURCE = (
    "the better of the token's id and its rank by count in a local corpus: Python's standard library, installed "
    "Markdown and Debian text documentation, Debian's translated messages (up to {mb} MB of text each)"
)


def corpus() -> Iterator[tuple[str, str]]:
    for path in sorted(glob.glob(f"{sysconfig.get_paths()['stdlib']}/**/*.py", recursive=True)):
        yield "code", Path(path).read_text(errors="ignore")
    docs = sorted(glob.glob(f"{sysconfig.get_paths()['purelib']}/**/*.md", recursive=True))
    for path in docs + sorted(glob.glob("/usr/share/doc/**/*.txt", recursive=True)):
        yield "docs", Path(path).read_text(errors="ignore")
    for path in sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES/*.mo")):
        try:
            with open(path, "rb") as file:
                catalog = gettext.GNUTranslations(file)._catalog
        except (OSError, ValueError, IndexError):  # noqa: PERF203 (a broken catalog is skipped)
            continue
        yield "messages", "\n".join(value for value in catalog.values() if isinstance(value, str))


def count(tokenizer, per_source: float) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    read: collections.Counter = collections.Counter()
    for kind, text in corpus():
        if read[kind] > per_source:
            continue
        read[kind] += len(text)
        for start in range(0, len(text), 200_000):
            counts.update(tokenizer(text[start : start + 200_000])["input_ids"])
    print(f"read {dict(read)} characters; {len(counts)} distinct tokens")
    return counts


def main() -> int:
    from transformers import PreTrainedTokenizerFast

    from specviz.models.builtin import DRAFT, converted_dir, default_form

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=int, default=65536, help="ids stored, most frequent first")
    parser.add_argument("--per-source-mb", type=float, default=20.0)
    args = parser.parse_args()
    tokenizer_file = converted_dir(DRAFT, form=default_form(DRAFT)) / "tokenizer.json"
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file))
    counts = count(tokenizer, args.per_source_mb * 1e6)
    corpus_rank = {token: rank for rank, (token, _) in enumerate(counts.most_common())}
    size = len(tokenizer)
    order = sorted(range(size), key=lambda token: (min(token, corpus_rank.get(token, size)), token))[: args.keep]
    ranking = Ranking(
        format="specviz-draft-vocabulary-1",
        tokenizer_sha256=hashlib.sha256(tokenizer_file.read_bytes()).hexdigest(),
        vocab_size=size,
        source=SOURCE.format(mb=args.per_source_mb),
        created=datetime.date.today().isoformat(),
        ids_zlib_base64=base64.b64encode(zlib.compress(struct.pack(f"<{len(order)}I", *order), 9)).decode(),
    )
    RANKING_FILE.write_text(ranking.model_dump_json(indent=1) + "\n")
    print(f"wrote {RANKING_FILE} ({RANKING_FILE.stat().st_size} bytes, {len(order)} ids)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
