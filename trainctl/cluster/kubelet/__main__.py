"""``python -m trainctl.cluster.kubelet``: the same as ``trainctl local kubelet``."""

import sys

from trainctl.cluster.kubelet.program import main_kubelet

sys.exit(main_kubelet())
