"""Moved to pipeline/model/placement.py (issue 20); this name is kept for pipeline/risk.py, which
another branch edits, until it imports from there. The module object is the same one."""

import sys

from .model import placement as _moved
from .model.placement import *  # noqa: F403  (the public names, for type checkers)

sys.modules[__name__] = _moved
