// Pieces of the Prometheus text format (version 0.0.4) that every family
// nvshare-metrics writes shares.
#pragma once

#include <string>

namespace nvshare::metrics {

// A label value with \, " and newline escaped as the format requires.
std::string escape_label(const std::string& value);

// The shortest text without an exponent that reads back as v: 0.003, not
// 0.0030000000000000001; 140000000000, not 1.4e+11.
std::string number(double v);

// A family's "# HELP" and "# TYPE" lines.
std::string family_head(const char* name, const char* type, const char* help);

}  // namespace nvshare::metrics
