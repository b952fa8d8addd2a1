"""``python -m torchneuron``: the same command line as the ``torchneuron`` script."""

import sys

from torchneuron.cli import main

sys.exit(main())
