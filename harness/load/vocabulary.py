"""The emulator's token vocabulary: 1024 fixed two-syllable words, one word = one emulator token.

Fixed forever (prompts built from it must not drift between kvgate versions); its own module so
that every workload builder (``workloads``, ``hashtrace``) imports it without importing each other.
"""

from __future__ import annotations

import random

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


def _vocabulary() -> tuple[str, ...]:
    syl = [c + v for c in _CONSONANTS for v in _VOWELS]  # 70 syllables
    words = [a + b for a in syl for b in syl]  # 4900 two-syllable words, fixed order
    return tuple(words[i * 4 + 1] for i in range(1024))


VOCABULARY: tuple[str, ...] = _vocabulary()


def words(rng: random.Random, n: int) -> str:
    """``n`` vocabulary words (``n`` tokens for the KV emulator)."""
    return " ".join(rng.choices(VOCABULARY, k=n)) if n > 0 else ""
