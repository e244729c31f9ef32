# SPDX-License-Identifier: GPL-2.0-only
"""The version --version prints: the meson project version and, built
from git, the git description, from the module the build generates
(_build_version); from a source tree without a build, the project
version read from its meson.build."""
import os
import re


def version():
    try:
        from ._build_version import GIT_DESCRIBE, PROJECT_VERSION
    except ImportError:
        PROJECT_VERSION, GIT_DESCRIBE = _source_version(), ""
    if GIT_DESCRIBE:
        return "%s (git %s)" % (PROJECT_VERSION, GIT_DESCRIBE)
    return PROJECT_VERSION


def _source_version():
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                       "meson.build")
    try:
        with open(top) as f:
            m = re.search(r"^project\([^)]*?version\s*:\s*'([^']+)'",
                          f.read(4096), re.M | re.S)
    except OSError:
        m = None
    return m.group(1) if m else "unknown"
