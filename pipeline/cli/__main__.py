"""``python -m blocklab.pipeline.cli``: the ``blocklab`` command."""

from . import main

if __name__ == "__main__":
    main()
