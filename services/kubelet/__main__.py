"""``python -m services.kubelet``: the same as ``kubelite kubelet``."""

import sys

from services.kubelet.main import main

sys.exit(main())
