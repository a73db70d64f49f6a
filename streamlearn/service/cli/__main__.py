"""``python -m streamlearn.service.cli``: the ``streamlearn`` command (tests and benches run it so)."""

from . import exit_now, main

exit_now(main())
