"""Pure parsers: text in, fact models out; no I/O. Each raises :class:`FactsParseError` on output
it cannot understand (the collector records that as an error fact, never guesses)."""

from harness.facts.parsers.common import FactsError, FactsParseError

__all__ = ["FactsError", "FactsParseError"]
