#!/usr/bin/env python3
"""Reference GPT-2 (r50k_base) encoder that writes golden.json for the Go tests.

This is deliberately a separate, naive implementation: it shares no code with
tiktoken-go. It reads the same rank file (../r50k_base.tiktoken), splits text
with GPT-2's pre-tokenizer pattern using the `regex` module (Debian package
python3-regex), and applies plain byte-pair merges: repeatedly merge the
adjacent pair whose concatenation has the lowest rank, leftmost first, until
no adjacent pair is in the vocabulary.

Usage, from engine/tokenizer:

    python3 testdata/gen_golden.py

The CASES table must stay identical (names and texts) to goldenCases in
tokenizer_test.go; the Go test fails if the two drift apart.
"""

import base64
import hashlib
import json
import os
import sys

import regex

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(HERE, "..", "r50k_base.tiktoken")
OUT = os.path.join(HERE, "golden.json")

PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)

START_FEN = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
E4_FEN = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1"

CASES = [
    ("empty", ""),
    ("hello_world", "Hello world"),
    ("fen_after_e4", E4_FEN),
    ("fen_start", START_FEN),
    ("fen_endgame", "8/8/4k3/8/2K5/8/6P1/8 w - - 12 57"),
    ("rookworld_policy_prompt", "P: " + START_FEN + " " * 26 + "M: e2e4 d2d4"),
    (
        "rookworld_policy_full",
        "P: " + E4_FEN + " " * 26
        + "M: e7e5 c7c5 e7e6 c7c6 g8f6      "
        + "E: 0.31 0.35 0.28 0.30 0.25         B: c7c5",
    ),
    (
        "rookworld_env",
        "A: " + START_FEN + "+e2e4+e2e4+" + E4_FEN + "+0.001+0+0",
    ),
    ("uci_promotion", "e7e8q"),
    ("uci_moves", "e2e4 e7e5 g1f3 b8c6 f1b5 a7a6 e1g1 a2a1n"),
    ("pgn", "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 5. O-O Be7 1-0"),
    ("contractions", "it's I'll we've they're I'm he'd don't IT'S"),
    ("numbers", "3.14159 1234567890 -42 1e-5"),
    ("cjk", "\u56fd\u9645\u8c61\u68cb \u5c06\u519b\uff01 \u30c1\u30a7\u30b9"),
    ("emoji", "\u265a\u265b \U0001f389\U0001f914 \U0001f468\u200d\U0001f469\u200d\U0001f467 \u2657"),
    ("combining_marks", "e\u0301cole\u0300 n\u0303 a\u0308\u0304 \u0915\u094d\u0937"),
    ("accented", "caf\u00e9 na\u00efve Stra\u00dfe \u00c5ngstr\u00f6m"),
    ("spaces_run", "a" + " " * 26 + "b"),
    ("spaces_only", " " * 7),
    ("trailing_spaces", "end   "),
    ("leading_spaces", "   start"),
    ("newlines", "line1\n\nline2\n\n\n"),
    ("crlf", "a\r\nb\r\n"),
    ("tabs", "\tx\t\ty\t"),
    ("mixed_whitespace", " \n \t \n\n  x  \t\n"),
    ("unicode_whitespace", "a\u00a0b\u3000c\u2003d\u000b\u000ce\u0085f"),
    ("control_chars", "a\x00b\x1cc\x1fd\x7f"),
    ("endoftext_literal", "<|endoftext|>"),
    ("endoftext_inline", "a<|endoftext|>b <|endoftext|>"),
    ("punctuation", "!!! ??? ... --- ((x)) [y] {z} @#$%^&*"),
    ("apostrophe_forms", "'s 's' ''s 're've"),
]


def load_ranks(path):
    ranks = {}
    with open(path, "rb") as f:
        data = f.read()
    for line in data.split(b"\n"):
        if not line:
            continue
        tok, rank = line.split(b" ")
        ranks[base64.b64decode(tok)] = int(rank)
    return ranks, hashlib.sha256(data).hexdigest()


def bpe(piece, ranks):
    parts = [bytes([b]) for b in piece]
    while len(parts) > 1:
        best = None
        best_rank = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best is None:
            break
        parts = parts[:best] + [parts[best] + parts[best + 1]] + parts[best + 2:]
    return [ranks[p] for p in parts]


def encode(text, ranks):
    ids = []
    for piece in PATTERN.findall(text):
        ids.extend(bpe(piece.encode("utf-8"), ranks))
    return ids


def main():
    ranks, digest = load_ranks(VOCAB)
    if len(ranks) != 50256 or sorted(ranks.values()) != list(range(50256)):
        sys.exit("unexpected rank file: want ranks 0..50255")
    inv = {v: k for k, v in ranks.items()}

    if encode("Hello world", ranks) != [15496, 995]:
        sys.exit("reference encoder disagrees with the known ids for 'Hello world'")

    names = set()
    cases = []
    for name, text in CASES:
        if name in names:
            sys.exit("duplicate case name: " + name)
        names.add(name)
        ids = encode(text, ranks)
        if b"".join(inv[i] for i in ids) != text.encode("utf-8"):
            sys.exit("reference round trip failed for " + name)
        cases.append({"name": name, "text": text, "ids": ids})

    doc = {
        "encoding": "r50k_base",
        "vocab_sha256": digest,
        "cases": cases,
    }
    with open(OUT, "w", encoding="ascii") as f:
        json.dump(doc, f, ensure_ascii=True, indent=1)
        f.write("\n")
    print("wrote %d cases to %s" % (len(cases), os.path.relpath(OUT)))


if __name__ == "__main__":
    main()
