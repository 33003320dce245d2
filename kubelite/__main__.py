import sys

from kubelite.cli import main

sys.exit(main())
