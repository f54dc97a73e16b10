import sys

from ts2.cli import main

sys.exit(main())
