// The C ABI's error reporting, shared by the files that implement it (api_c.cpp, api_cache.cpp).
#pragma once

#include <string>

#include "convjit/convjit.h"

namespace convjit::runtime {

/// Sets this thread's convjit_last_error() message and returns `code`.
convjit_status c_api_fail(convjit_status code, std::string message);

}  // namespace convjit::runtime
