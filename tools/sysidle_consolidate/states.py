# SPDX-License-Identifier: GPL-2.0-only
"""The idle states, as the state-machine library (sysidle/) names and
numbers them: the one table of this package. The VMM's control socket
and the urn:sysidle:1 metadata element use these names."""

STATES = ["NOT", "SHORT", "LONG", "FULL", "FULL_NOTED"]
NUM = {name: num for num, name in enumerate(STATES)}     # name -> 0..4

# The state the policies act on: the VM is fully idle and it was noted.
FULL_NOTED = "FULL_NOTED"
