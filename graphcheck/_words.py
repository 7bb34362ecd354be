"""Small words for messages: the indefinite article (``an int``, ``a str``, ``an Empty``).

A leaf module with no imports of graphcheck's or Warp's.
"""

from __future__ import annotations

__all__ = ["article"]


def article(noun: str) -> str:
    """``noun`` after its indefinite article, by its first letter: ``an int``, ``a Sim``, ``an ndarray``."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"
