"""``python -m trainctl.controller``: the controller without the trainctl CLI (the controller image's command)."""

import sys

from trainctl.controller.main import main

if __name__ == "__main__":
    sys.exit(main())
