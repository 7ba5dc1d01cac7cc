"""The include-layering check must catch the two breaks issue 38 mended: a
tree whose tg-cache-rope includes the interpreter from the compiler room and
whose tcc includes trun's "did you mean" header fails, naming both; the same
tree with the headers where they now live passes."""
import os
import subprocess
import sys
import tempfile

checker = sys.argv[1]


def tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def run(files):
    with tempfile.TemporaryDirectory() as root:
        tree(root, files)
        r = subprocess.run([sys.executable, checker, "--root", root], capture_output=True,
                           text=True)
        return r.returncode, r.stdout


broken = {
    "passes/fusion/CacheRope.cpp": '#include "passes/Passes.h"\n'
                                   '#include "compiler/interpreter/TgInterpreter.h"\n',
    "compiler/tools/tcc/main.cpp": '#include "compiler/driver/Compile.h"\n'
                                   '  #  include "runtime/trun/base/NearestName.h"\n',
    "runtime/trun/cli/Options.cpp": '#include "runtime/trun/base/NearestName.h"\n',
}
rc, out = run(broken)
assert rc == 1, (rc, out)
assert 'passes/fusion/CacheRope.cpp:2: includes "compiler/interpreter/TgInterpreter.h"' in out, out
assert 'compiler/tools/tcc/main.cpp:2: includes "runtime/trun/base/NearestName.h"' in out, out
assert "runtime/trun/cli/Options.cpp" not in out, out  # trun may include its own
assert "2 include(s) across the layers" in out, out

mended = {
    "passes/fusion/CacheRope.cpp": '#include "interpreter/TgInterpreter.h"\n',
    "compiler/tools/tcc/main.cpp": '#include "support/NearestName.h"\n',
    "runtime/trun/cli/Options.cpp": '#include "support/NearestName.h"\n',
}
rc, out = run(mended)
assert rc == 0, (rc, out)
print("include layering self-test: both breaks caught, the mended tree passes")
