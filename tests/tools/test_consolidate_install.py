#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-consolidate runs as a program wherever it is: installed, from the
build tree and from the source tree, with no path set up for it.

1. `meson install --destdir TMP --tags sysidle-consolidate` (only the
   consolidator's files, nothing rebuilt) puts the script into BINDIR and
   every module of the package into SITE/sysidle_consolidate/.
2. The installed script and `python3 -m sysidle_consolidate` (and
   `python3 -m sysidle_consolidate.plan`), run from a directory outside
   the trees with PYTHONPATH naming only TMP/SITE: exit 0, the usage, and
   the package imported from TMP/SITE.
3. BUILD/sysidle-consolidate and SRC/tools/sysidle-consolidate, without
   PYTHONPATH: exit 0, the usage, each importing the package next to it.
4. The package never edits sys.path; the script only inserts the
   directory the install wrote into its installed copy, when Python does
   not search it already (a prefix such as the install check's).

usage: test_consolidate_install.py BUILD SRC BINDIR SITE [MESON]
(BINDIR and SITE: the absolute install directories; MESON: the meson
command, none: step 1 and 2 skipped. tap.py is found through PYTHONPATH.)
TAP on stdout; exit 0 when every check passes."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from tap import check, finish, skip

PYTHON = "/usr/bin/python3"
USAGE = "Usage: sysidle-consolidate [--dir DIR] [--socket PATH ...] " \
    "[--libvirt URI ...]"
PLAN_USAGE = "usage: python3 -m sysidle_consolidate.plan "


def clean_env(pythonpath=None):
    """The environment without anything that points Python at a package."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTHON")}
    env["PYTHONNOUSERSITE"] = "1"
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return env


def run(argv, env, cwd):
    try:
        p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True,
                           text=True, timeout=60)
    except OSError as e:
        return 127, "", str(e)
    return p.returncode, p.stdout, p.stderr


def imported_from(argv, env, cwd):
    """The directories the package was imported from when @argv (python3
    arguments) runs, read from python3 -v."""
    _, _, err = run([PYTHON, "-v"] + argv, env, cwd)
    return sorted(set(re.findall(r"(/\S*)/sysidle_consolidate/cli\.py", err)))


def check_way(what, argv, py_argv, env, cwd, pkg_parent, usage=USAGE):
    """@argv runs exit 0 with @usage; run as python3 @py_argv, the package
    comes from @pkg_parent/sysidle_consolidate."""
    rc, out, err = run(argv, env, cwd)
    check(rc == 0 and out.startswith(usage) and
          (usage != USAGE or "--hosts" in out),
          "%s --help: exit 0 and the usage" % what,
          "rc %d\nstdout:\n%s\nstderr:\n%s" % (rc, out[:2000], err))
    dirs = imported_from(py_argv, env, cwd)
    check(dirs == [os.path.realpath(pkg_parent)],
          "%s: the package imported from %s" % (what, pkg_parent),
          "imported from: %r" % dirs)


def package_files(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".py"))


def main():
    if len(sys.argv) not in (5, 6):
        print(__doc__)
        return 2
    build, src, bindir, site = [os.path.abspath(a) for a in sys.argv[1:5]]
    meson = sys.argv[5] if len(sys.argv) == 6 else "none"
    src_tools = os.path.join(src, "tools")
    # and the module the build generates (the version)
    modules = sorted(package_files(os.path.join(src_tools,
                                                "sysidle_consolidate")) +
                     ["_build_version.py"])
    tmp = tempfile.mkdtemp(prefix="test-consolidate-install-")
    cwd = os.path.join(tmp, "elsewhere")
    os.mkdir(cwd)
    try:
        # 1-2: installed
        dest = os.path.join(tmp, "dest")
        if meson in ("", "none"):
            skip("meson install --destdir", "no meson command")
            skip("installed: sysidle-consolidate, python3 -m", "not installed")
        else:
            rc, out, err = run([meson, "install", "-C", build, "--no-rebuild",
                                "--destdir", dest, "--tags",
                                "sysidle-consolidate"], clean_env(), build)
            script = dest + os.path.join(bindir, "sysidle-consolidate")
            pkg_site = dest + site
            pkg = os.path.join(pkg_site, "sysidle_consolidate")
            got = package_files(pkg) if os.path.isdir(pkg) else []
            check(rc == 0 and os.access(script, os.X_OK) and got == modules,
                  "meson install --destdir: the script in %s (executable), "
                  "every module (%d) in %s" % (bindir, len(modules), pkg[
                      len(dest):]),
                  "rc %d\n%s%s\nscript %s: %s\nmodules: %r\nwanted: %r" % (
                      rc, out[-2000:], err[-2000:], script,
                      os.path.exists(script), got, modules))
            env = clean_env(pkg_site)
            check_way("installed sysidle-consolidate", [script, "--help"],
                      [script, "--help"], env, cwd, pkg_site)
            check_way("installed, python3 -m sysidle_consolidate",
                      [PYTHON, "-m", "sysidle_consolidate", "--help"],
                      ["-m", "sysidle_consolidate", "--help"], env, cwd,
                      pkg_site)
            rc, out, err = run([PYTHON, "-m", "sysidle_consolidate.plan",
                                "--help"], env, cwd)
            check(rc == 0 and out.startswith(PLAN_USAGE),
                  "installed, python3 -m sysidle_consolidate.plan --help: "
                  "exit 0 and the usage",
                  "rc %d\n%s\n%s" % (rc, out[:2000], err))

        # 3: the build tree and the source tree, nothing on PYTHONPATH
        env = clean_env()
        built = os.path.join(build, "sysidle-consolidate")
        check(os.access(built, os.X_OK) and package_files(
            os.path.join(build, "sysidle_consolidate")) == modules,
              "build tree: sysidle-consolidate (executable) and every "
              "module next to it")
        check_way("build tree: sysidle-consolidate", [built, "--help"],
                  [built, "--help"], env, cwd, build)
        script = os.path.join(src_tools, "sysidle-consolidate")
        check_way("source tree: tools/sysidle-consolidate",
                  [script, "--help"], [script, "--help"], env, cwd,
                  src_tools)

        # 4: no sys.path edits
        edits = []
        for path in [script] + [os.path.join(src_tools, "sysidle_consolidate",
                                             m) for m in modules
                                if not m.startswith("_build")]:
            with open(path) as f:
                for n, line in enumerate(f, 1):
                    allowed = line.strip() == \
                        "sys.path.insert(0, INSTALLED_PACKAGE_DIR)"
                    if re.search(r"\bsys\.path\s*(\.(insert|append|extend)|"
                                 r"(\[[^]]*\])?\s*\+?=[^=])", line) and \
                            not allowed:
                        edits.append("%s:%d: %s" % (path, n, line.strip()))
        check(not edits, "the package does not touch sys.path, the script "
              "only to add the directory the install wrote into it",
              "\n".join(edits))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
