import sys

from services.apiserver.main import main

sys.exit(main())
