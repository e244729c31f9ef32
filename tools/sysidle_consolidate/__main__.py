# SPDX-License-Identifier: GPL-2.0-only
"""python3 -m sysidle_consolidate: the same program as sysidle-consolidate."""
import sys

from .cli import main

sys.exit(main())
