// GLASS_EMU_ASAN is defined when compiling with AddressSanitizer (GCC announces it with
// __SANITIZE_ADDRESS__, Clang through __has_feature).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define GLASS_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GLASS_EMU_ASAN 1
#endif
#endif
