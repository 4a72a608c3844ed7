"""``python -m trainctl.cluster.scheduler``: the cluster's scheduler process."""

import sys

from trainctl.cluster.scheduler.component import main

sys.exit(main())
