import sys

from services.proxy.main import main

sys.exit(main())
