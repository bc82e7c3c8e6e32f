#!/bin/sh
# docs/python.md's install command, offline: a venv that sees Debian's
# packages, `pip install ./python` into it (a PEP 517 build from
# pyproject.toml by Debian's setuptools and wheel, with no deprecation
# warning), then an import that finds the library through
# SMOE_STREAM_LIBRARY and reports the installed version as the library's.
# The source is copied first, so the build leaves nothing in the tree.
# Exit 77 (skip) without python3-venv or python3-wheel.
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
if ! "$work/venv/bin/python" -c 'import setuptools, wheel' > "$work/wheel.log" 2>&1; then
    cat "$work/wheel.log"
    echo "python_install: the venv has no setuptools or wheel (apt-get install" \
         "python3-wheel): skipped"
    exit 77
fi
cp -r "$here" "$work/python"
rm -rf "$work/python/tests" "$work/python/build" "$work/python"/*.egg-info
# No network: pip must build from pyproject.toml with what the venv has.
PIP_NO_INDEX=1 "$work/venv/bin/pip" install --no-build-isolation "$work/python" \
    > "$work/pip.log" 2>&1 || { cat "$work/pip.log"; exit 1; }
cat "$work/pip.log"
if grep -n -i -E 'deprecat|setup\.py install|legacy' "$work/pip.log"; then
    echo "python_install: pip warned (above)"
    exit 1
fi
grep -q "(pyproject.toml)" "$work/pip.log" || { echo "python_install: not a PEP 517 build"; exit 1; }
cd "$work"
"$work/venv/bin/python" - <<'PY'
import importlib.metadata, os, smoe_stream
assert smoe_stream.__file__.startswith(os.environ.get("VIRTUAL_ENV", os.getcwd())) or \
    "/venv/" in smoe_stream.__file__, smoe_stream.__file__
assert smoe_stream.library_path == os.environ["SMOE_STREAM_LIBRARY"]
dist = importlib.metadata.version("smoe_stream")
assert dist == smoe_stream.__version__ == smoe_stream.library_version, \
    (dist, smoe_stream.__version__, smoe_stream.library_version)
print("installed", smoe_stream.__file__, "version", dist, "library", smoe_stream.library_version)
PY
