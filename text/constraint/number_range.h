// JSON numbers inside bounds, as grammar expressions over their decimal text: minimum / maximum /
// exclusiveMinimum / exclusiveMaximum hold for every string the expression matches. Integers have
// at most kMaxIntegerDigits digits and fractions at most kMaxFractionDigits (a weak model cannot
// spend its tokens on digits); bounded numbers are written without exponents.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "text/constraint/grammar.h"

namespace sparkserve::text::constraint {

inline constexpr int kMaxIntegerDigits = 16;
inline constexpr int kMaxFractionDigits = 16;

// A bound as exact decimal digits: value = (negative ? -1 : 1) * int_digits.frac_digits.
struct DecimalBound {
  bool negative = false;
  std::string int_digits = "0";  // no leading zeros ("0" for zero)
  std::string frac_digits;       // no trailing zeros
  bool exclusive = false;
};

// From a JSON number (the shortest text that reads back as the same double, in fixed notation).
DecimalBound DecimalFromDouble(double value, bool exclusive);

// Integers (JSON text: -?(0|[1-9][0-9]*)) in [lo, hi]; missing bounds: as far as the digit limit
// allows. InvalidArgument when no integer is in range.
absl::StatusOr<ExprPtr> IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi);

// JSON numbers (integer or with a fraction) within the bounds. InvalidArgument when none is.
absl::StatusOr<ExprPtr> NumberRange(const std::optional<DecimalBound>& lo, const std::optional<DecimalBound>& hi);

// Any JSON integer / number within the digit limits (exponents of up to 2 digits for numbers).
ExprPtr AnyInteger();
ExprPtr AnyNumber();

}  // namespace sparkserve::text::constraint
