"""Trace replay: public GPU cluster traces run through the real scheduling core to measure packing."""
