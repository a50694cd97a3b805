// JSON schema string formats as grammar expressions over the string's text (between the quotes):
// date, time, date-time, duration, email, hostname, ipv4, ipv6, uuid (the formats OpenAI's strict
// mode lists). Each matches a subset of the valid values (years 1000-9999, no leap days, full-form IPv6, bounded
// lengths), so every output passes a format checker; unknown formats give nullptr (JSON schema
// treats format as an annotation).
#pragma once
#include <string_view>

#include "text/constraint/grammar.h"

namespace sparkserve::text::constraint {

ExprPtr StringFormat(std::string_view format);

}  // namespace sparkserve::text::constraint
