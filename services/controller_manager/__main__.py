"""``python -m services.controller_manager``: the same as ``kubelite controller-manager``."""

import sys

from services.controller_manager.main import main

sys.exit(main())
