#!/bin/bash
# on_device.sh DEVICE TEST -- runs test program TEST (built in
# $TS_BUILD_DIR) with its models on DEVICE: TS_DEVICE=DEVICE for the
# models it makes, TS_TEST_DEVICE=DEVICE for the tests that compare a
# device with the CPU. The observation tests' device parameter (ctest's
# NAME_staged and NAME_cuda). No such device here: exits 77 (ctest's
# skip) saying why.
device=$1 test=$2
probe=$(TS_TEST_DEVICE=$device "$TS_BUILD_DIR/test_backend_ops" --probe)
rc=$?
if [ "$rc" != 0 ]; then
    echo "$test on $device $probe"
    exit 77
fi
TS_DEVICE=$device TS_TEST_DEVICE=$device exec "$TS_BUILD_DIR/$test"
