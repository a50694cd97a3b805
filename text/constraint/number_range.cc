// Bounded JSON numbers: digit-by-digit range expressions for integers and decimal fractions.
#include "text/constraint/number_range.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "fmt/format.h"

namespace sparkserve::text::constraint {
namespace {

constexpr uint64_t kMaxMagnitude = 9'999'999'999'999'999ull;  // kMaxIntegerDigits nines

ExprPtr Digits(int lo, int hi) { return CharSet({{static_cast<uint32_t>('0' + lo), static_cast<uint32_t>('0' + hi)}}); }
ExprPtr AnyDigits(int min, int max) { return Repeat(Digits(0, 9), min, max); }

bool AllChar(std::string_view s, char c) { return std::all_of(s.begin(), s.end(), [c](char x) { return x == c; }); }

// Decimal strings of length n in [x, y] (x <= y, both n digits, leading zeros allowed).
ExprPtr SameLength(std::string_view x, std::string_view y) {
  if (x.empty()) return Empty();
  const int x0 = x[0] - '0', y0 = y[0] - '0';
  const std::string_view xr = x.substr(1), yr = y.substr(1);
  const int rest = static_cast<int>(xr.size());
  if (x0 == y0) return Seq({Literal(x.substr(0, 1)), SameLength(xr, yr)});
  std::vector<ExprPtr> alts;
  int from = x0, to = y0;
  if (!AllChar(xr, '0')) {
    alts.push_back(Seq({Literal(x.substr(0, 1)), SameLength(xr, std::string(xr.size(), '9'))}));
    from = x0 + 1;
  }
  const bool top_full = AllChar(yr, '9');
  if (!top_full) to = y0 - 1;
  if (from <= to) alts.push_back(Seq({Digits(from, to), AnyDigits(rest, rest)}));
  if (!top_full) alts.push_back(Seq({Literal(y.substr(0, 1)), SameLength(std::string(yr.size(), '0'), yr)}));
  return Choice(std::move(alts));
}

uint64_t Pow10(int n) {
  uint64_t v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

int NumDigits(uint64_t v) {
  int n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

// Canonical decimal integers (no leading zeros) in [a, b]; nullptr when a > b.
ExprPtr NonNegativeRange(uint64_t a, uint64_t b) {
  if (a > b) return nullptr;
  std::vector<ExprPtr> alts;
  for (int len = NumDigits(a); len <= NumDigits(b); ++len) {
    const uint64_t lo = std::max(a, len == 1 ? 0 : Pow10(len - 1));
    const uint64_t hi = std::min(b, Pow10(len) - 1);
    if (lo > hi) continue;
    alts.push_back(SameLength(std::to_string(lo), std::to_string(hi)));
  }
  return Choice(std::move(alts));
}

// ---- decimals

struct Decimal {  // a non-negative value
  std::string int_digits = "0";
  std::string frac_digits;
};

int Compare(const Decimal& a, const Decimal& b) {
  if (a.int_digits.size() != b.int_digits.size()) return a.int_digits.size() < b.int_digits.size() ? -1 : 1;
  if (int c = a.int_digits.compare(b.int_digits); c != 0) return c < 0 ? -1 : 1;
  const size_t n = std::max(a.frac_digits.size(), b.frac_digits.size());
  for (size_t i = 0; i < n; ++i) {
    const char x = i < a.frac_digits.size() ? a.frac_digits[i] : '0';
    const char y = i < b.frac_digits.size() ? b.frac_digits[i] : '0';
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

struct FracBound {
  std::string digits;  // of 0.digits
  bool exclusive = false;
};

char DigitAt(const std::string& s, int i) { return i < static_cast<int>(s.size()) ? s[static_cast<size_t>(i)] : '0'; }

bool RestIsZero(const std::string& s, int i) {
  return i >= static_cast<int>(s.size()) || AllChar(std::string_view(s).substr(static_cast<size_t>(i)), '0');
}

// The fraction digits after i digits already written: `tight_lo` / `tight_hi` say whether those
// digits equal the bound's so far. Returns nullptr for no valid continuation (ending included).
ExprPtr FracTail(int i, const FracBound* lo, bool tight_lo, const FracBound* hi, bool tight_hi) {
  if (!tight_lo && !tight_hi) return AnyDigits(0, kMaxFractionDigits - i);
  std::vector<ExprPtr> alts;
  // End here: compare the written digits with the bounds' rest.
  bool end_ok = true;
  if (tight_lo) end_ok = end_ok && RestIsZero(lo->digits, i) && !lo->exclusive;
  if (tight_hi) end_ok = end_ok && (!RestIsZero(hi->digits, i) || !hi->exclusive);
  if (end_ok) alts.push_back(Empty());
  if (i < kMaxFractionDigits) {
    const int dlo = tight_lo ? DigitAt(lo->digits, i) - '0' : 0;
    const int dhi = tight_hi ? DigitAt(hi->digits, i) - '0' : 9;
    if (dlo <= dhi) {
      if (dlo == dhi) {
        if (ExprPtr t = FracTail(i + 1, lo, tight_lo, hi, tight_hi)) alts.push_back(Seq({Digits(dlo, dlo), t}));
      } else {
        int from = dlo, to = dhi;
        if (tight_lo) {
          if (ExprPtr t = FracTail(i + 1, lo, true, hi, false)) alts.push_back(Seq({Digits(dlo, dlo), t}));
          from = dlo + 1;
        }
        if (tight_hi) {
          if (ExprPtr t = FracTail(i + 1, lo, false, hi, true)) alts.push_back(Seq({Digits(dhi, dhi), t}));
          to = dhi - 1;
        }
        if (from <= to) alts.push_back(Seq({Digits(from, to), AnyDigits(0, kMaxFractionDigits - i - 1)}));
      }
    }
  }
  if (alts.empty()) return nullptr;
  return Choice(std::move(alts));
}

// The fraction part ("" or "." digits) of a number whose fraction lies within the bounds (null
// bound: none on that side). nullptr when none does.
ExprPtr FractionPart(const FracBound* lo, const FracBound* hi) {
  std::vector<ExprPtr> alts;
  bool none_ok = true;  // no fraction: the value 0
  if (lo) none_ok = none_ok && RestIsZero(lo->digits, 0) && !lo->exclusive;
  if (hi) none_ok = none_ok && (!RestIsZero(hi->digits, 0) || !hi->exclusive);
  if (none_ok) alts.push_back(Empty());
  // At least one digit after the point.
  std::vector<ExprPtr> first;
  const int dlo = lo ? DigitAt(lo->digits, 0) - '0' : 0;
  const int dhi = hi ? DigitAt(hi->digits, 0) - '0' : 9;
  if (dlo <= dhi) {
    if (dlo == dhi) {
      if (ExprPtr t = FracTail(1, lo, lo != nullptr, hi, hi != nullptr)) first.push_back(Seq({Digits(dlo, dlo), t}));
    } else {
      int from = dlo, to = dhi;
      if (lo) {
        if (ExprPtr t = FracTail(1, lo, true, hi, false)) first.push_back(Seq({Digits(dlo, dlo), t}));
        from = dlo + 1;
      }
      if (hi) {
        if (ExprPtr t = FracTail(1, lo, false, hi, true)) first.push_back(Seq({Digits(dhi, dhi), t}));
        to = dhi - 1;
      }
      if (from <= to) first.push_back(Seq({Digits(from, to), AnyDigits(0, kMaxFractionDigits - 1)}));
    }
  }
  if (!first.empty()) alts.push_back(Seq({Literal("."), Choice(std::move(first))}));
  if (alts.empty()) return nullptr;
  return Choice(std::move(alts));
}

struct Bound {
  Decimal value;
  bool exclusive = false;
};

// Non-negative magnitudes m with lo <=/< m <=/< hi (hi: none = unbounded), as decimal text.
ExprPtr MagnitudeRange(const Bound& lo, const std::optional<Bound>& hi) {
  if (lo.value.int_digits.size() > static_cast<size_t>(kMaxIntegerDigits)) return nullptr;
  if (hi) {
    const int c = Compare(lo.value, hi->value);
    if (c > 0 || (c == 0 && (lo.exclusive || hi->exclusive))) return nullptr;
  }
  const uint64_t ia = std::stoull(lo.value.int_digits);
  const bool hi_capped = !hi || hi->value.int_digits.size() > static_cast<size_t>(kMaxIntegerDigits);
  const uint64_t ib = hi_capped ? kMaxMagnitude : std::stoull(hi->value.int_digits);
  const FracBound flo{lo.value.frac_digits, lo.exclusive};
  std::optional<FracBound> fhi;
  if (!hi_capped) fhi = FracBound{hi->value.frac_digits, hi->exclusive};
  std::vector<ExprPtr> alts;
  if (ia == ib) {
    if (ExprPtr f = FractionPart(&flo, fhi ? &*fhi : nullptr)) alts.push_back(Seq({Literal(std::to_string(ia)), f}));
  } else {
    if (ExprPtr f = FractionPart(&flo, nullptr)) alts.push_back(Seq({Literal(std::to_string(ia)), f}));
    const uint64_t mid_hi = fhi ? ib - 1 : ib;
    if (ia + 1 <= mid_hi) {
      alts.push_back(Seq({NonNegativeRange(ia + 1, mid_hi), FractionPart(nullptr, nullptr)}));
    }
    if (fhi) {
      if (ExprPtr f = FractionPart(nullptr, &*fhi)) alts.push_back(Seq({Literal(std::to_string(ib)), f}));
    }
  }
  if (alts.empty()) return nullptr;
  return Choice(std::move(alts));
}

}  // namespace

DecimalBound DecimalFromDouble(double value, bool exclusive) {
  DecimalBound d;
  d.exclusive = exclusive;
  d.negative = std::signbit(value) && value != 0.0;
  char buf[512];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), std::fabs(value), std::chars_format::fixed);
  std::string text = ec == std::errc() ? std::string(buf, end) : std::string("0");
  const size_t dot = text.find('.');
  std::string ip = text.substr(0, dot);
  std::string fp = dot == std::string::npos ? "" : text.substr(dot + 1);
  while (ip.size() > 1 && ip[0] == '0') ip.erase(0, 1);
  while (!fp.empty() && fp.back() == '0') fp.pop_back();
  d.int_digits = ip.empty() ? "0" : ip;
  d.frac_digits = fp;
  return d;
}

ExprPtr AnyInteger() {
  return Seq({Optional(Literal("-")), Choice({Literal("0"), Seq({Digits(1, 9), AnyDigits(0, kMaxIntegerDigits - 1)})})});
}

ExprPtr AnyNumber() {
  return Seq({AnyInteger(), Optional(Seq({Literal("."), AnyDigits(1, kMaxFractionDigits)})),
              Optional(Seq({CharSet({{'e', 'e'}, {'E', 'E'}}), Optional(CharSet({{'+', '+'}, {'-', '-'}})), AnyDigits(1, 2)}))});
}

absl::StatusOr<ExprPtr> IntegerRange(std::optional<int64_t> lo_in, std::optional<int64_t> hi_in) {
  const auto max = static_cast<int64_t>(kMaxMagnitude);
  const int64_t lo = std::clamp<int64_t>(lo_in.value_or(-max), -max, max + 1);
  const int64_t hi = std::clamp<int64_t>(hi_in.value_or(max), -max - 1, max);
  if (lo > hi) {
    return absl::InvalidArgumentError(fmt::format(
        "no integer of at most {} digits lies in [{}, {}]", kMaxIntegerDigits,
        lo_in ? std::to_string(*lo_in) : "-inf", hi_in ? std::to_string(*hi_in) : "inf"));
  }
  std::vector<ExprPtr> alts;
  if (lo < 0) {
    const uint64_t mag_lo = hi < 0 ? static_cast<uint64_t>(-hi) : 1;
    alts.push_back(Seq({Literal("-"), NonNegativeRange(mag_lo, static_cast<uint64_t>(-lo))}));
  }
  if (hi >= 0) alts.push_back(NonNegativeRange(static_cast<uint64_t>(std::max<int64_t>(lo, 0)), static_cast<uint64_t>(hi)));
  return Choice(std::move(alts));
}

absl::StatusOr<ExprPtr> NumberRange(const std::optional<DecimalBound>& lo, const std::optional<DecimalBound>& hi) {
  auto magnitude = [](const DecimalBound& b) { return Decimal{b.int_digits, b.frac_digits}; };
  auto is_zero = [](const DecimalBound& b) { return b.int_digits == "0" && b.frac_digits.empty(); };
  std::vector<ExprPtr> alts;
  // v < 0 part: magnitude m = -v, with m >= -hi (hi < 0) or m > 0, and m <= -lo.
  const bool lo_negative = !lo || (lo->negative && !is_zero(*lo));
  if (lo_negative) {
    Bound mlo{Decimal{}, true};  // m > 0
    if (hi && hi->negative && !is_zero(*hi)) mlo = Bound{magnitude(*hi), hi->exclusive};
    const bool hi_nonneg_or_none = !hi || !hi->negative || is_zero(*hi);
    if (hi_nonneg_or_none || (hi && hi->negative)) {
      std::optional<Bound> mhi;
      if (lo) mhi = Bound{magnitude(*lo), lo->exclusive};
      if (ExprPtr m = MagnitudeRange(mlo, mhi)) alts.push_back(Seq({Literal("-"), m}));
    }
  }
  // v >= 0 part.
  const bool hi_nonneg = !hi || !hi->negative || is_zero(*hi);
  if (hi_nonneg) {
    Bound mlo{Decimal{}, false};  // m >= 0
    if (lo && !lo->negative) mlo = Bound{magnitude(*lo), lo->exclusive};
    if (lo && lo->negative && is_zero(*lo)) mlo = Bound{Decimal{}, lo->exclusive};
    std::optional<Bound> mhi;
    if (hi) mhi = Bound{magnitude(*hi), hi->exclusive};
    if (ExprPtr m = MagnitudeRange(mlo, mhi)) alts.push_back(m);
  }
  if (alts.empty()) return absl::InvalidArgumentError("no number lies within the given bounds");
  return Choice(std::move(alts));
}

}  // namespace sparkserve::text::constraint
