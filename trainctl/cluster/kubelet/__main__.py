"""``python -m trainctl.controller.local.kubelet``: the same as ``trainctl local kubelet``."""

import sys

from trainctl.controller.local.commands import main_kubelet

sys.exit(main_kubelet())
