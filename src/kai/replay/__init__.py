"""Trace replay: runs public GPU cluster traces through the real scheduling core to measure placement quality."""
