"""``python -m services.dns``: the same as ``kubelite dns``."""

import sys

from services.dns.main import main

sys.exit(main())
