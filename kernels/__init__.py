"""blocklab.kernels: Numba kernels (parsers' hot loops, replay). Only this package imports Numba."""
