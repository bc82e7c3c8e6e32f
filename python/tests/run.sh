#!/bin/sh
# Run the Python binding's tests with an interpreter that has numpy, torch
# and pytest: $SMOE_PYTHON, else Debian's /usr/bin/python3, else python3.
# Exit 77 (skip) when none has them.
set -u
here=$(cd "$(dirname "$0")" && pwd)
py=
for c in ${SMOE_PYTHON:-} /usr/bin/python3 python3; do
    if "$c" -c 'import numpy, torch, pytest' > /dev/null 2>&1; then
        py=$c
        break
    fi
done
if [ -z "$py" ]; then
    echo "python_binding: no Python with numpy, torch and pytest (apt-get install" \
         "python3-numpy python3-torch python3-pytest): skipped"
    exit 77
fi
tmp=${SMOE_TEST_TMPDIR:-/tmp}/pytest
rm -rf "$tmp"
cd "$here" || exit 1
PYTHONPATH="$here/.." exec "$py" -m pytest -q -p no:cacheprovider --basetemp="$tmp" "$here"
