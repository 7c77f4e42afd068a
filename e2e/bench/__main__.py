"""``python -m e2e.bench``: the scale benchmark (see ``e2e.bench.scale``)."""

import sys

from e2e.bench.scale import main

sys.exit(main())
