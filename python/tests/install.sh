#!/bin/sh
# docs/python.md's install command, offline: a venv that sees Debian's
# packages, `pip install ./python` into it, then an import that finds the
# library through SMOE_STREAM_LIBRARY. The source is copied first, so the
# build leaves nothing in the tree. Exit 77 (skip) without python3-venv.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
py=${SMOE_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
work=${SMOE_TEST_TMPDIR:-/tmp}/pyinstall
rm -rf "$work"
mkdir -p "$work"
if ! "$py" -m venv --system-site-packages "$work/venv" > "$work/venv.log" 2>&1; then
    cat "$work/venv.log"
    echo "python_install: $py has no venv module (apt-get install python3-venv): skipped"
    exit 77
fi
cp -r "$here" "$work/python"
rm -rf "$work/python/tests" "$work/python/build" "$work/python"/*.egg-info
# No network: pip must build from setup.py with what the venv already has.
PIP_NO_INDEX=1 "$work/venv/bin/pip" install --no-build-isolation "$work/python"
cd "$work"
"$work/venv/bin/python" - <<'PY'
import os, smoe_stream
assert smoe_stream.__file__.startswith(os.environ.get("VIRTUAL_ENV", os.getcwd())) or \
    "/venv/" in smoe_stream.__file__, smoe_stream.__file__
assert smoe_stream.library_path == os.environ["SMOE_STREAM_LIBRARY"]
print("installed", smoe_stream.__file__, "library", smoe_stream.library_version)
PY
