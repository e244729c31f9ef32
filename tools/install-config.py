#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""meson install script: the configuration files with every key
commented out, installed into DESTDIR + DIR only where there is no such
file yet, so that a reinstall never overwrites what an operator changed.

    install-config.py DIR SRC:NAME...
"""
import os
import shutil
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    d = sys.argv[1]
    destdir = os.environ.get("DESTDIR", "")
    if destdir:
        d = os.path.join(destdir, os.path.relpath(d, "/")) if \
            os.path.isabs(d) else os.path.join(destdir, d)
    os.makedirs(d, exist_ok=True)
    for spec in sys.argv[2:]:
        src, name = spec.rsplit(":", 1)
        dst = os.path.join(d, name)
        if os.path.exists(dst):
            print("Keeping %s (exists; the shipped one is %s)" % (dst, src))
            continue
        shutil.copyfile(src, dst)
        os.chmod(dst, 0o644)
        print("Installing %s to %s" % (src, dst))


if __name__ == "__main__":
    main()
