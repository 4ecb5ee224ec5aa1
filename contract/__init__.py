"""contract: what both twins share, and nothing else (no twin, no harness).

The naive twins (``naive/``) and the optimized twins (``optimized/``) must accept the same
inputs and give the same results, rejects and errors. Everything that makes them agree
lives here, once: the numpy dtypes of every batch API and the reason and anomaly codes
they carry (:mod:`contract.dtypes`), the errors both raise with the same words
(:mod:`contract.itch_errors`), the rules both check their arguments by and the names
both report under (:mod:`contract.market`, :mod:`contract.pipeline`,
:mod:`contract.histogram`, :mod:`contract.pcap`, :mod:`contract.orders`), how a feed
is read in chunks from a file or a stream (:mod:`contract.itch_files`,
:mod:`contract.order_files`, :mod:`contract.pcap_files`), how feed bytes become report text
(:mod:`contract.feed_text`), and the ``typing.Protocol``\\s mypy checks both twins against
(:mod:`contract.protocols`).

Why the name: this is the twins' contract, the promises both make to every caller, and a
module belongs here only if both twins must agree on it. Helpers only one twin uses stay
in that twin; the command line, generators and reports stay in the harness.

The arrows point one way: ``contract`` imports only the standard library and numpy; the
twins import ``contract`` (never ``twinmatch``); the harness (``twinmatch``: command line,
generators, reports) imports all three. tests/test_import_graph.py checks it. The C++ twins
keep the same codes as enums (native/dtypes.hpp, native/itch.hpp, native/market.hpp,
native/pcap.hpp); the extension exports them (native/contract_bind.cpp) and
tests/test_contract.py asserts they equal the tables here.
"""

from __future__ import annotations

__all__: list[str] = []
