"""blocklab.tools: developer tools, not jobs: ``make bench`` (bench.py) and the kernel warm-up
that ``make setup`` runs and the CLI calls before a command would compile (warm.py)."""
