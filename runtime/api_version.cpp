// convjit_version(): the version of the library that is actually loaded, which may differ from
// the headers a program was compiled with (CONVJIT_VERSION_STRING) when installs are mixed.
#include "convjit/convjit.h"
#include "convjit/version.h"

extern "C" const char* convjit_version(void) { return CONVJIT_VERSION_STRING; }
