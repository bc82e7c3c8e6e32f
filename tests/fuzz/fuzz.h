/*
 * fuzz.h - what every fuzz target defines (libFuzzer's entry point), for
 * the plain replay driver (driver.c) that runs the kept corpus under ctest.
 */
#ifndef SMOE_FUZZ_H
#define SMOE_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
