"""peers: other ways to build a component, measured beside the twins; not twins themselves.

A twin has a partner with the same API in the other language and a place in the
behavioural suite. A peer has neither: it is a third contender a chapter compares against
(chapter 3's numpy decoder, :mod:`peers.itch_numpy`: how far numpy goes without leaving
Python). It may import the naive twins and the contract; no twin imports a peer.
"""

from __future__ import annotations

__all__: list[str] = []
