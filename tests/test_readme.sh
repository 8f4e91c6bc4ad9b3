#!/bin/bash
# test_readme.sh -- the README's console samples are what the CLI prints:
# scripts/readme_samples.py --check runs every `$ ./build/tensorscope ...`
# sample and fails when a line it shows is no longer printed or new lines
# appear where it shows none (numbers masked: timings differ run to run).
# Regenerate them with scripts/readme_samples.py.
# needs: plots
set -u
BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
if /usr/bin/python3 "$SRC/scripts/readme_samples.py" --check --build "$BUILD"; then
    echo "ok   README samples match the CLI's output"
    echo "1 passed, 0 failed"
else
    echo "FAIL README samples are out of date (see above): run scripts/readme_samples.py"
    echo "0 passed, 1 failed"
    exit 1
fi
