"""blocklab.pipeline.model: what an array is, below the jobs that replay on it. Array
configuration (``config``: TOML -> frozen dataclasses), the drive catalog (``catalog`` and
``drives/``), DiskSim parameter files (``disksim_params``) and the HDD kernel's parameters
built from them (``drive_params``), the straw2 placement of dynamic disk pools
(``placement``) and the array model the engine runs (``array``).

No module here imports a job (replay, query, sweep, validate, the CLI...):
tests/test_model_layer.py checks it.
"""
