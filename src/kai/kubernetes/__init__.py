"""The Kubernetes adapter behind `kai run`: client, informers, leader election, writes, metrics, health.

Everything here does I/O (asyncio, one event loop; the cycle and the start-up's imports run in a
worker thread) and may read clocks; the scheduling core never imports it. Objects cross this
boundary as plain decoded JSON mappings, the form the `kai.api` layer parses.
"""
