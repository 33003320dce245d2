import sys

from services.front.main import main

sys.exit(main())
