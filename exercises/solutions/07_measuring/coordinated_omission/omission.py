"""Coordinated omission: latency from when a request should have been sent (reference
solution)."""

from __future__ import annotations


def closed_loop(service_ns: list[int]) -> list[int]:
    """What a closed-loop tester records: it sends request i when request i - 1 was
    answered and times from the send, so each latency is just that request's service
    time. Given, for comparison."""
    return list(service_ns)


def from_schedule(service_ns: list[int], interval_ns: int) -> list[int]:
    """Latency of each request measured from its place in a fixed-rate schedule.

    Request i is due at i * interval_ns. One server answers the requests in order, each
    taking service_ns[i]; a request starts when it is due or when the one before it
    finished, whichever is later. Its latency is its finish time minus its due time.
    """
    out = []
    free_at = 0  # when the server finishes the request before
    for i, service in enumerate(service_ns):
        due = i * interval_ns
        finish = max(due, free_at) + service
        out.append(finish - due)
        free_at = finish
    return out


def backfill(samples_ns: list[int], interval_ns: int) -> list[int]:
    """HdrHistogram's correction of closed-loop samples, for a tester meant to send one
    request every interval_ns (> 0): a sample of v held up the requests that were due
    while it ran, so after v also record v - interval_ns, v - 2 * interval_ns, ... for
    as long as that is at least interval_ns (what they would have waited)."""
    out = []
    for v in samples_ns:
        out.append(v)
        missed = v - interval_ns
        while missed >= interval_ns:
            out.append(missed)
            missed -= interval_ns
    return out
