// The declaration in include/CFuzzer.h is all this module provides; SwiftPM needs one source file for a C target.
#include "CFuzzer.h"
