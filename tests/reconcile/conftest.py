"""Makes the reconcile tests' shared builders (``reconcile_support``) importable."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
