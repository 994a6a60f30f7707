// libFuzzer's driver entry point (in the runtime that `-sanitize=fuzzer` links). The fuzz targets have their own
// `main` (SwiftPM gives every executable one), so they call the driver themselves.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*test_one_input)(const uint8_t *data, size_t size));
