"""``python -m graphcheck``: the same as the ``graphcheck`` command."""

from .cli import main

raise SystemExit(main())
