import sys

from lina.bench.cli import main

sys.exit(main())
