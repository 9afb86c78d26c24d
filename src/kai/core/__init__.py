"""The scheduling core: snapshot, session, statement and the resource vectors they share.

Nothing here does I/O or reads a clock; time arrives inside the snapshot and decisions leave as data.
"""
