import sys

from sharebench.cli import main

sys.exit(main())
