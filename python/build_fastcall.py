"""Compile kiln/_fastcall.c in place (kiln/_fastcall<ext suffix>) for the interpreter that runs
this script, for use from the source tree (PYTHONPATH=python); `pip install .` builds it as
part of the package. Prints the path; exits non-zero when no C compiler can build it."""

import os
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "kiln", "_fastcall.c")
OUT = os.path.join(HERE, "kiln", "_fastcall" + sysconfig.get_config_var("EXT_SUFFIX"))


def main():
    if os.path.exists(OUT) and os.path.getmtime(OUT) >= os.path.getmtime(SRC):
        print(OUT)
        return 0
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC").split()[0] or "cc"
    cmd = [cc, "-O2", "-shared", "-fPIC", "-Wall", "-Werror",
           "-I" + sysconfig.get_paths()["include"], SRC, "-o", OUT + ".tmp"]
    done = subprocess.run(cmd)
    if done.returncode != 0:
        print("build_fastcall: failed: " + " ".join(cmd), file=sys.stderr)
        return 1
    os.replace(OUT + ".tmp", OUT)
    print(OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
