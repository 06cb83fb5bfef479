#!/usr/bin/python3
"""Generates default_corpus.txt, the small corpus ddprun-train trains on by default.

The text is produced from a tiny seeded grammar, so it is ours to ship (no third-party
copyright) and has enough structure (names, dialogue turns, agreeing phrases) for a
character-level model to learn visibly within a couple of minutes on two CPU cores.
Run it again to reproduce the file byte for byte.

usage: generate_corpus.py [--chars N] [--output PATH]
The defaults (48,000 characters, default_corpus.txt) give the shipped file; the benchmarks and
scripts/gpu-check.sh ask for a larger corpus of the same kind (the first 48,000 characters are
then the shipped file's).
"""
import argparse
import random

rng = random.Random(1234)
speakers = ["ANNA", "BORIS", "CLARA", "DMITRI", "ELENA", "FEDOR"]
subjects = ["the miller", "the old captain", "my sister", "the young baker", "the river",
            "the north wind", "a grey horse", "the king", "our neighbour", "the stars"]
verbs = ["watches", "remembers", "follows", "carries", "forgets", "praises", "answers",
         "finds", "keeps", "calls"]
objects = ["the lantern", "a letter", "the long road", "the harvest", "a silver ring",
           "the morning bell", "the broken gate", "a song of the sea", "the winter field",
           "the key to the tower"]
places = ["by the mill", "in the garden", "on the bridge", "at the harbour", "under the oak",
          "near the market", "in the hall", "beyond the hills"]
times = ["at dawn", "before supper", "every evening", "in the spring", "tonight",
         "when the rain stops", "at midnight", "all summer long"]
openers = ["Tell me,", "I swear", "Look,", "Alas,", "Listen,", "Truly,", "Hush,", "Come,"]
questions = ["Where is", "Who has seen", "Why does nobody mention", "What became of"]


def clause():
    return f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}"


def line():
    kind = rng.random()
    if kind < 0.35:
        return f"{rng.choice(openers)} {clause()} {rng.choice(places)}."
    if kind < 0.6:
        return f"{rng.choice(questions)} {rng.choice(objects)} {rng.choice(times)}?"
    if kind < 0.8:
        return f"{clause().capitalize()} {rng.choice(times)}, and {clause()}."
    return f"{clause().capitalize()}; {clause()} {rng.choice(places)}."


parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--chars", type=int, default=48_000, help="stop once this many are written")
parser.add_argument("--output", default="default_corpus.txt")
args = parser.parse_args()
parts = []
size = 0
while size < args.chars:
    speaker = rng.choice(speakers)
    turn = "\n".join(line() for _ in range(rng.randint(1, 3)))
    text = f"{speaker}:\n{turn}\n\n"
    parts.append(text)
    size += len(text)
with open(args.output, "w", encoding="ascii") as out:
    out.write("".join(parts))
