// Internal to the YAML reader (yaml_io.cpp) and writer (yaml_emit.cpp): the core-schema typing that
// the reader applies and that the writer checks a string against, to know whether it may go unquoted.
#pragma once

#include <string>

#include "trainer/config/node.h"

namespace wavetrain::config::detail {

// What a plain (unquoted, untagged) scalar reads as, by the YAML 1.2 core schema (yaml_io.cpp).
Node::Kind plain_kind(const std::string& s);

}  // namespace wavetrain::config::detail
