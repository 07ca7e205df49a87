"""Units the kernels share. The sector is ``traces/schema.py`` SECTOR_BYTES, which the kernels
sit below and cannot import; ``tests/test_engine_door.py`` checks that the two agree."""

SECTOR = 512  # bytes
