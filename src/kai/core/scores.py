"""Node score magnitudes, as in KAI, so that independent scores combine the same way when summed.

placement (bin-pack/spread) 0..9, CPU-only task on a CPU-only node 10, fits on idle resources 100,
a shared GPU the fraction fits on 1000, the pod's nominated node 1,000,000.
"""

MAX_PLACEMENT = 9.0
CPU_ONLY_NODE = 10.0
FITS_IDLE = 100.0
SHARED_GPU_FITS = 1000.0
NOMINATED = 1_000_000.0
