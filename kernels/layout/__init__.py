"""Layout kernels: LUN sector -> (drive, drive sector), and requests -> drive operations."""
