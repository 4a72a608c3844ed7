"""``python -m trainctl.controller.local.scheduler``: the cluster's scheduler process."""

import sys

from trainctl.controller.local.scheduler.component import main

sys.exit(main())
