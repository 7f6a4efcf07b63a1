// Interned text: one copy of each distinct string for the life of the process, so that a pointer
// to it may be kept anywhere (a LaunchInfo, an autograd node that outlives its module) and copied
// as one word. The set only grows: intern what has few distinct values (module paths, an op's
// shapes while a profiler watches), never per-element data.
#pragma once

#include <string>
#include <string_view>

namespace glass {

// The process's one copy of `text`; its address and contents never change. Thread-safe.
const std::string& interned(std::string_view text);

}  // namespace glass
