"""``python -m controller.local.kubelet``: the same as ``trainctl local kubelet``."""

import sys

from controller.local.commands import main_kubelet

sys.exit(main_kubelet())
