"""Deferral: contended requests become PENDING operation records and queued commands; the retry worker replays them once."""
