// Field rules of CONTRACT.md section 3 (everything except waf_directives, which lives in
// waf_directives.cc). Pure functions over bytes and RapidJSON values; no I/O.
#include "commands/fields.h"
#include "core/error.h"
#include "core/hex.h"
#include "core/text.h"

#include <arpa/inet.h>
#include <idn2.h>
#include <libpsl.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace gw::fields {
namespace {

// Lists whose length is bounded only by the body's size (up to 1 MiB: 200,000 bad country codes)
// stop looking for problems once they have more than the reply can list (FieldErrors): that many
// already tell the client that some were left out.
bool enough_found(const Problems& out) { return out.size() > FieldErrors::kMaxFieldErrors; }
// The same for the items of one list, which the reply lists as one field (`from`: the size `out`
// had before them).
bool enough_of_one_field(const Problems& out, size_t from) {
  return out.size() - from > FieldErrors::kMaxPerField;
}

constexpr size_t kMaxHostname = 253;
constexpr size_t kMaxLabel = 63;
constexpr size_t kMaxCorsBytes = 4096;
constexpr size_t kMaxRedirectBytes = 2048;
constexpr size_t kMaxCountries = 250;
constexpr int kMaxOverrideDepth = 8;
constexpr size_t kMaxOverrideMembers = 256;
// A number is stored as RapidJSON writes it, in full: `1e20` (4 bytes) as
// `100000000000000000000.0` (23). Arrays had no bound, so a 1 MiB body of such numbers was a
// record of 5 MB, and a list page of 100 of them 500 MB (helper 159); this bounds what the
// numbers can add to about 94 KB.
constexpr size_t kMaxOverrideNumbers = 4096;
constexpr size_t kMaxExclusions = 256;
constexpr size_t kMaxExclusionIds = 256;
constexpr size_t kMaxPathPrefix = 1024;
constexpr int64_t kMaxExcludedRuleId = 99999999;

// ISO 3166-1 alpha-2 codes assigned as of 2024 (249), sorted for binary search.
constexpr std::string_view kCountries =
    "ADAEAFAGAIALAMAOAQARASATAUAWAXAZBABBBDBEBFBGBHBIBJBLBMBNBOBQBRBSBTBVBWBYBZCACCCDCFCGCH"
    "CICKCLCMCNCOCRCUCVCWCXCYCZDEDJDKDMDODZECEEEGEHERESETFIFJFKFMFOFRGAGBGDGEGFGGGHGIGLGMGN"
    "GPGQGRGSGTGUGWGYHKHMHNHRHTHUIDIEILIMINIOIQIRISITJEJMJOJPKEKGKHKIKMKNKPKRKWKYKZLALBLCLI"
    "LKLRLSLTLULVLYMAMCMDMEMFMGMHMKMLMMMNMOMPMQMRMSMTMUMVMWMXMYMZNANCNENFNGNINLNONPNRNUNZOM"
    "PAPEPFPGPHPKPLPMPNPRPSPTPWPYQARERORSRURWSASBSCSDSESGSHSISJSKSLSMSNSOSRSSSTSVSXSYSZTCTD"
    "TFTGTHTJTKTLTMTNTOTRTTTVTWTZUAUGUMUSUYUZVAVCVEVGVIVNVUWFWSYEYTZAZMZW";
static_assert(kCountries.size() == 249 * 2);

bool is_assigned_country(std::string_view code) {
  size_t lo = 0;
  size_t hi = kCountries.size() / 2;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    std::string_view c = kCountries.substr(mid * 2, 2);
    if (c == code) return true;
    if (c < code)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

// True for a C0/C1 control character or DEL starting at s[i] (s is valid UTF-8).
bool control_at(std::string_view s, size_t i) {
  auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x20 || b == 0x7f) return true;
  return b == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9f;
}

bool has_control(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (control_at(s, i)) return true;
  return false;
}

// Dotted-quad IPv4 without leading zeros, e.g. 127.0.0.1.
bool is_ipv4(std::string_view s) {
  int parts = 0;
  size_t i = 0;
  while (true) {
    size_t start = i;
    int value = 0;
    while (i < s.size() && ascii_digit(s[i]) && i - start < 3) value = value * 10 + (s[i++] - '0');
    size_t len = i - start;
    if (len == 0 || value > 255 || (len > 1 && s[start] == '0')) return false;
    if (++parts == 4) return i == s.size();
    if (i >= s.size() || s[i] != '.') return false;
    ++i;
  }
}

// Decimal port 1..65535 without leading zeros.
bool is_port(std::string_view s) {
  if (s.empty() || s.size() > 5 || s[0] == '0') return false;
  int value = 0;
  for (char c : s) {
    if (!ascii_digit(c)) return false;
    value = value * 10 + (c - '0');
  }
  return value <= 65535;
}

// RFC 9110 tchar.
bool is_tchar(char c) {
  return ascii_alpha(c) || ascii_digit(c) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Splits a comma list, trimming spaces and tabs around items, into its non-empty items; an empty
// item (a doubled or trailing comma) is one problem in `out`, however many there are.
void split_list(std::string_view in, std::vector<std::string_view>* items, Problems& out) {
  bool empty_item = false;
  size_t pos = 0;
  while (true) {
    size_t comma = in.find(',', pos);
    std::string_view item = trim_blanks(
        in.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    if (item.empty()) {
      empty_item = true;
    } else {
      items->push_back(item);
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  if (empty_item) {
    out.push_back({"", "must not contain empty items (check for doubled or trailing commas)"});
  }
}

// The problem of one item of a comma list, which the message quotes (its first 64 bytes, cut at a
// character's start: the body was checked to be UTF-8). In the quote, `"` and `\` are escaped
// with a backslash and control characters are written as \u00XX, as in a JSON string, so the
// quote ends where it seems to and shows what the item held.
SubProblem item_problem(std::string_view item, std::string_view why) {
  constexpr size_t kShown = 64;
  std::string_view shown = item;
  if (item.size() > kShown) {
    size_t cut = kShown;
    while (cut > 0 && (static_cast<unsigned char>(item[cut]) & 0xC0) == 0x80) --cut;
    shown = item.substr(0, cut);
  }
  std::string message = "\"";
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < shown.size(); ++i) {
    const char c = shown[i];
    if (c == '"' || c == '\\') {
      message += '\\';
      message += c;
    } else if (control_at(shown, i)) {
      // C0 and DEL are one byte; a C1 character (U+0080 to U+009F) is 0xC2 and a second byte.
      const auto u =
          static_cast<unsigned char>(static_cast<unsigned char>(c) == 0xc2 ? shown[++i] : c);
      message += "\\u00";
      message += kHex[u >> 4];
      message += kHex[u & 0xF];
    } else {
      message += c;
    }
  }
  if (shown.size() < item.size()) message += "...";
  message += "\": ";
  message += why;
  return {"", std::move(message)};
}

// An IPv6 address as an origin shows it (the WHATWG URL serializer, which browsers use for the
// Origin header): eight groups of lower-case hex without leading zeros, the longest run of two or
// more zero groups (the first of equal ones) as "::", and no dotted IPv4 part. nullopt if `text`
// is no IPv6 address.
std::optional<std::string> browser_ipv6(std::string_view text) {
  unsigned char bytes[16];
  const std::string copy(text);
  if (::inet_pton(AF_INET6, copy.c_str(), bytes) != 1) return std::nullopt;
  std::array<unsigned, 8> groups{};
  for (size_t i = 0; i < 8; ++i) groups[i] = (bytes[2 * i] << 8) | bytes[2 * i + 1];
  size_t best_at = 8, best_len = 1;
  for (size_t i = 0; i < 8;) {
    size_t j = i;
    while (j < 8 && groups[j] == 0) ++j;
    if (j - i > best_len) best_at = i, best_len = j - i;
    i = j == i ? i + 1 : j;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < 8; ++i) {
    if (i == best_at) {
      out += i == 0 ? "::" : ":";
      i += best_len - 1;
      continue;
    }
    bool leading = true;
    for (int shift = 12; shift >= 0; shift -= 4) {
      const unsigned digit = (groups[i] >> shift) & 0xf;
      if (leading && digit == 0 && shift != 0) continue;
      leading = false;
      out.push_back(kHex[digit]);
    }
    if (i != 7) out.push_back(':');
  }
  return out;
}

// Host of an origin: `localhost`, an IPv4 literal, an IPv6 literal in brackets as browsers write
// it, or a lower-case hostname without trailing dot.
Problem origin_host(std::string_view host) {
  if (host == "localhost" || is_ipv4(host)) return std::nullopt;
  std::string folded = ascii_lower(host);
  if (folded.ends_with('.')) folded.pop_back();
  if (folded == "localhost") return "origin hosts must be lower case without a trailing dot";
  if (host.starts_with('[')) {
    if (!host.ends_with(']')) return "origin hosts in brackets must be IPv6 addresses";
    auto canonical = browser_ipv6(host.substr(1, host.size() - 2));
    if (!canonical) return "origin hosts in brackets must be IPv6 addresses";
    if (host.substr(1, host.size() - 2) != *canonical) {
      // An Origin header never matches another spelling of the address.
      return "IPv6 origin hosts must be written as browsers send them: [" + *canonical + "]";
    }
    return std::nullopt;
  }
  std::string normalized;
  if (auto p = hostname(host, &normalized)) return "origin host " + *p;
  if (normalized != host) return "origin hosts must be lower case without a trailing dot";
  return std::nullopt;
}

// What follows "http://" or "https://", or nullopt for any other (or no) scheme.
std::optional<std::string_view> after_http_scheme(std::string_view url) {
  if (url.starts_with("https://")) return url.substr(8);
  if (url.starts_with("http://")) return url.substr(7);
  return std::nullopt;
}

Problem origin(std::string_view o) {
  auto after = after_http_scheme(o);
  if (!after) return "origins must start with http:// or https://";
  std::string_view rest = *after;
  if (rest.find_first_of(" \t") != std::string_view::npos)
    return "must separate origins with commas";
  if (rest.find_first_of("/?#@\\") != std::string_view::npos)
    return "origins must be scheme://host[:port] with no path, query or userinfo";
  // The port's colon: the last one, after the closing bracket of an IPv6 host.
  size_t colon = rest.rfind(':');
  if (rest.starts_with('[')) {
    const size_t close = rest.find(']');
    colon = close == std::string_view::npos || close + 1 == rest.size() ? std::string_view::npos
                                                                        : close + 1;
    if (colon != std::string_view::npos && rest[colon] != ':') {
      return "origins must be scheme://host[:port] with no path, query or userinfo";
    }
  }
  std::string_view port;
  if (colon != std::string_view::npos) {
    port = rest.substr(colon + 1);
    if (!is_port(port)) return "origin ports must be 1-65535";
    rest = rest.substr(0, colon);
  }
  if (auto p = origin_host(rest)) return p;
  // Browsers leave the scheme's default port out of an Origin header, so no Origin would match.
  const bool https = o.starts_with("https://");
  if (port == (https ? "443" : "80")) {
    return "origins must leave out the scheme's default port, as browsers send them: " +
           std::string(o.substr(0, o.size() - port.size() - 1));
  }
  return std::nullopt;
}

std::string index_prefix(size_t i) { return "[" + std::to_string(i) + "]"; }

// A client-supplied name cut to at most 64 bytes on a UTF-8 boundary, for messages.
std::string clip(std::string_view name) {
  if (name.size() <= 64) return std::string(name);
  size_t n = 64;
  while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xc0) == 0x80) --n;
  return std::string(name.substr(0, n)) + "...";
}

// Adds to `out`, at `at` (the object as a whole), one problem for each member outside `allowed`,
// each member given more than once and each member of `allowed` that is missing. Callers go on
// to check the members that are there, so one bad name hides no other problem.
void check_members(const rapidjson::Value& obj, std::initializer_list<std::string_view> allowed,
                   const std::string& at, Problems& out) {
  std::set<std::string_view> seen;
  const size_t from = out.size();
  for (const auto& m : obj.GetObject()) {
    // Past what a reply lists of this object, more entries only cost memory (a body may hold 60k
    // members). Counted from this object's first: counted in all, 100 problems of earlier entries
    // of a list hid a later entry's unknown member (helper 171).
    if (enough_of_one_field(out, from)) return;
    std::string_view name(m.name.GetString(), m.name.GetStringLength());
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      out.push_back({at, "has unknown member \"" + clip(name) + "\""});
    } else if (!seen.insert(name).second) {
      out.push_back({at, "has duplicate member \"" + clip(name) + "\""});
    }
  }
  for (auto name : allowed) {
    if (!seen.contains(name))
      out.push_back({at, "is missing member \"" + std::string(name) + "\""});
  }
}

// The member `name` of `obj` (its first, if given twice), nullptr if absent.
const rapidjson::Value* find_member(const rapidjson::Value& obj, const char* name) {
  auto it = obj.FindMember(name);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

Problem path_prefix(const rapidjson::Value& v) {
  if (!v.IsString()) return "must be a string";
  std::string_view path(v.GetString(), v.GetStringLength());
  if (!path.starts_with('/')) return "must start with '/'";
  if (path.size() > kMaxPathPrefix) return "must be at most 1024 bytes";
  if (has_control(path) || path.find(' ') != std::string_view::npos) {
    return "must not contain spaces or control characters";
  }
  return std::nullopt;
}

// The problems of exclusion number `i`, added to `out`.
void exclusion(const rapidjson::Value& e, size_t i, Problems& out) {
  const std::string at = index_prefix(i);
  if (!e.IsObject()) return out.push_back({at, "must be an object"});
  check_members(e, {"path_prefix", "remove_rule_ids"}, at, out);
  if (const auto* path = find_member(e, "path_prefix")) {
    if (auto p = path_prefix(*path)) out.push_back({at + ".path_prefix", std::move(*p)});
  }
  const auto* found = find_member(e, "remove_rule_ids");
  if (found == nullptr) return;
  const auto& ids = *found;
  if (!ids.IsArray()) return out.push_back({at + ".remove_rule_ids", "must be an array"});
  // The count's problem and each id's, as geo_policy's countries.
  if (ids.Empty() || ids.Size() > kMaxExclusionIds) {
    out.push_back({at + ".remove_rule_ids", "must hold 1-256 rule ids"});
  }
  std::set<int64_t> seen;
  const size_t from = out.size();
  for (rapidjson::SizeType k = 0; k < ids.Size() && !enough_of_one_field(out, from); ++k) {
    if (!ids[k].IsInt64() || ids[k].GetInt64() < 1 || ids[k].GetInt64() > kMaxExcludedRuleId) {
      out.push_back({at + ".remove_rule_ids" + index_prefix(k),
                     "must be an integer in 1..99999999"});
    } else if (!seen.insert(ids[k].GetInt64()).second) {
      // As geo_policy.countries: a repeat is a mistake of the client's, never a second meaning.
      out.push_back({at + ".remove_rule_ids" + index_prefix(k), "must not repeat a rule id"});
    }
  }
}

// Why `label` (lower case, starting with "xn--") is not an A-label, or nothing: libidn2's lookup
// (IDNA2008 with UTS #46 non-transitional processing, what libcurl and libpsl use) must take it
// and give it back unchanged. So its Punycode decodes, to characters IDNA2008 allows (not to
// ASCII alone), under the contextual and bidi rules, in NFC.
Problem a_label(std::string_view label) {
  const std::string z(label);
  uint8_t* out = nullptr;
  const int rc =
      idn2_lookup_u8(reinterpret_cast<const uint8_t*>(z.c_str()), &out, IDN2_NONTRANSITIONAL);
  const bool same = rc == IDN2_OK && out != nullptr && z == reinterpret_cast<const char*>(out);
  idn2_free(out);
  if (same) return std::nullopt;
  return "label '" + z + "' is not a valid internationalized (xn--) label: " +
         (rc == IDN2_OK ? std::string("it does not come back the same from Unicode")
                        : std::string(idn2_strerror(rc)));
}

}  // namespace

Problem hostname(std::string_view in, std::string* normalized) {
  std::string h;
  h.reserve(in.size());
  for (char c : in) {
    if (static_cast<unsigned char>(c) >= 0x80)
      return "must be ASCII (send internationalized names as punycode xn-- labels)";
    h.push_back(ascii_lower(c));
  }
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (h.empty()) return "must not be empty";
  if (h.size() > kMaxHostname) return "must be at most 253 bytes";
  if (h.front() == '[' || h.find(':') != std::string::npos)
    return "must be a hostname, not an IP address or host:port";
  if (h.find('*') != std::string::npos) return "must not contain wildcards";
  // A number as URL parsers read an IPv4 address's part (WHATWG's IPv4 number parser): decimal
  // digits, or 0x and hex digits (none: `0x` is 0).
  auto number = [](std::string_view label) {
    if (label.size() >= 2 && label[0] == '0' && label[1] == 'x') {
      return std::all_of(label.begin() + 2, label.end(), [](char c) { return hex_digit(c) >= 0; });
    }
    return std::all_of(label.begin(), label.end(), ascii_digit);
  };
  size_t labels = 0;
  size_t numbers = 0;
  size_t start = 0;
  std::string_view last;
  while (start <= h.size()) {
    size_t dot = std::min(h.find('.', start), h.size());
    std::string_view label(h.data() + start, dot - start);
    if (label.empty()) return "must not contain empty labels";
    if (label.size() > kMaxLabel) return "labels must be at most 63 bytes";
    for (char c : label) {
      if (!ascii_alpha(c) && !ascii_digit(c) && c != '-')
        return "may contain only letters, digits, hyphens and dots";
    }
    if (label.front() == '-' || label.back() == '-')
      return "labels must not start or end with a hyphen";
    if (label.starts_with("xn--")) {
      if (auto p = a_label(label)) return p;
    }
    ++labels;
    if (number(label)) ++numbers;
    last = label;
    start = dot + 1;
  }
  if (labels < 2) return "must have at least two labels";
  // A name whose last label is a number is an IPv4 address to URL parsers (WHATWG's "ends in a
  // number"), or one they refuse: 0x7f.1 is 127.0.0.1. Up to four numbers are an address's
  // shape; a name of other labels that ends in one (example.123) is no address, and is told so.
  if (number(last)) {
    if (labels == numbers && labels <= 4) return "must be a hostname, not an IP address";
    return "must not end in a numeric label, which URL parsers take for an IPv4 address";
  }
  *normalized = std::move(h);
  return std::nullopt;
}

bool is_at_or_under(std::string_view name, std::string_view zone) {
  if (zone.empty()) return false;
  if (name == zone) return true;
  return name.size() > zone.size() && name.ends_with(zone) &&
         name[name.size() - zone.size() - 1] == '.';
}

Problems cors_origins(std::string_view in) {
  if (in.size() > kMaxCorsBytes) return {{"", "must be at most 4096 bytes"}};
  if (in.empty()) return {};
  Problems out;
  std::vector<std::string_view> items;
  split_list(in, &items, out);
  std::set<std::string_view> seen;
  bool star_in_list = false;
  for (auto item : items) {
    if (item == "*") {
      if (items.size() > 1 && !star_in_list) out.push_back({"", "must use * alone, not in a list"});
      star_in_list = items.size() > 1;
      continue;
    }
    // A bad item is one entry however often it is given (helper 165 saw three alike).
    const bool first = seen.insert(item).second;
    if (auto p = origin(item)) {
      if (first) out.push_back(item_problem(item, *p));
    } else if (!first) {
      out.push_back(item_problem(item, "must not repeat an origin"));
    }
  }
  return out;
}

Problems cors_methods(std::string_view in) {
  static constexpr std::array<std::string_view, 7> kMethods = {"GET",   "HEAD",   "POST",   "PUT",
                                                               "PATCH", "DELETE", "OPTIONS"};
  if (in.size() > kMaxCorsBytes) return {{"", "must be at most 4096 bytes"}};
  if (in.empty()) return {};
  Problems out;
  std::vector<std::string_view> items;
  split_list(in, &items, out);
  std::set<std::string_view> seen;
  for (auto item : items) {
    const bool first = seen.insert(item).second;  // a bad item is one entry, as an origin
    if (std::find(kMethods.begin(), kMethods.end(), item) == kMethods.end()) {
      if (first) {
        out.push_back(item_problem(
            item, "must list only GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS (upper case)"));
      }
    } else if (!first) {
      out.push_back(item_problem(item, "must not repeat a method"));
    }
  }
  return out;
}

Problems cors_headers(std::string_view in) {
  if (in.size() > kMaxCorsBytes) return {{"", "must be at most 4096 bytes"}};
  if (in.empty()) return {};
  Problems out;
  std::vector<std::string_view> items;
  split_list(in, &items, out);
  std::set<std::string> seen;           // header names, which compare without case
  std::set<std::string_view> seen_bad;  // bad items, byte for byte: `A B` and `a b` are two
  for (auto item : items) {
    if (!std::all_of(item.begin(), item.end(), is_tchar)) {
      if (seen_bad.insert(item).second) {
        out.push_back(item_problem(item, "must list only header names (RFC 9110 tokens)"));
      }
    } else if (!seen.insert(ascii_lower(std::string(item))).second) {
      out.push_back(item_problem(item, "must not repeat a header name"));
    }
  }
  return out;
}

Problems geo_policy(const rapidjson::Value& v) {
  if (v.IsNull()) return {};
  if (!v.IsObject()) return {{"", "must be null or an object"}};
  Problems out;
  check_members(v, {"mode", "countries"}, "", out);
  if (const auto* mode = find_member(v, "mode")) {
    std::string_view m =
        mode->IsString() ? std::string_view(mode->GetString(), mode->GetStringLength()) : "";
    if (m != "allow" && m != "block") out.push_back({".mode", "must be one of allow, block"});
  }
  const auto* found = find_member(v, "countries");
  if (found == nullptr) return out;
  const auto& countries = *found;
  if (!countries.IsArray()) {
    out.push_back({".countries", "must be an array"});
  } else {
    // Too many codes, and the problems of each: a count's problem hid the items' (helper 165),
    // and a client that fixed the count met them in a second 422.
    if (countries.Empty() || countries.Size() > kMaxCountries) {
      out.push_back({".countries", "must hold 1-250 country codes"});
    }
    std::set<std::string_view> seen;
    const size_t from = out.size();
    for (rapidjson::SizeType i = 0; i < countries.Size() && !enough_of_one_field(out, from); ++i) {
      const auto& c = countries[i];
      std::string_view code =
          c.IsString() ? std::string_view(c.GetString(), c.GetStringLength()) : std::string_view();
      if (code.size() != 2 || !is_assigned_country(code)) {
        out.push_back({".countries" + index_prefix(i),
                       "must be an assigned ISO 3166-1 alpha-2 code in upper case"});
      } else if (!seen.insert(code).second) {
        out.push_back({".countries" + index_prefix(i), "repeats " + std::string(code)});
      }
    }
  }
  return out;
}

Problems waf_overrides(const rapidjson::Value& v) {
  if (v.IsNull()) return {};
  if (!v.IsObject()) return {{"", "must be null or an object"}};
  // The walk goes on after a problem, so that each kind of problem is reported (once); it is
  // iterative and visits each value once, so its cost is bounded by the body's size.
  bool too_deep = false, too_many = false, repeated = false;
  size_t members = 0, numbers = 0;
  std::vector<std::pair<const rapidjson::Value*, int>> stack = {{&v, 1}};
  while (!stack.empty()) {
    auto [value, depth] = stack.back();
    stack.pop_back();
    if (depth > kMaxOverrideDepth) too_deep = true;
    if (value->IsObject()) {
      members += value->MemberCount();
      if (members > kMaxOverrideMembers) too_many = true;
      if (!repeated) {
        std::set<std::string_view> names;
        for (const auto& m : value->GetObject()) {
          if (!names.emplace(m.name.GetString(), m.name.GetStringLength()).second) repeated = true;
        }
      }
      for (const auto& m : value->GetObject()) {
        if (m.value.IsObject() || m.value.IsArray()) stack.emplace_back(&m.value, depth + 1);
        numbers += m.value.IsNumber();
      }
    } else {
      for (const auto& e : value->GetArray()) {
        if (e.IsObject() || e.IsArray()) stack.emplace_back(&e, depth + 1);
        numbers += e.IsNumber();
      }
    }
  }
  Problems out;
  if (too_deep) out.push_back({"", "must be nested at most 8 levels deep"});
  if (too_many) out.push_back({"", "must have at most 256 members in all"});
  if (repeated) out.push_back({"", "must not give a member twice in one object"});
  if (numbers > kMaxOverrideNumbers) out.push_back({"", "must hold at most 4096 numbers in all"});
  return out;
}

Problems waf_rule_exclusions(const rapidjson::Value& v) {
  if (v.IsNull()) return {};
  if (!v.IsArray()) return {{"", "must be null or an array"}};
  Problems out;
  // The count's problem and each entry's, as geo_policy's countries.
  if (v.Size() > kMaxExclusions) out.push_back({"", "must hold at most 256 entries"});
  // Past the 256 entries allowed only: up to them every entry's problems are looked for, as the
  // reply lists 10 of each field (helper 168: 101 problems of one kind hid a later entry's other).
  for (rapidjson::SizeType i = 0; i < v.Size() && (i < kMaxExclusions || !enough_found(out)); ++i) {
    exclusion(v[i], i, out);
  }
  return out;
}

bool is_registrable_domain(std::string_view host) {
  const psl_ctx_t* psl = psl_builtin();
  if (psl == nullptr || host.empty()) return false;
  std::string h(host);
  const char* registrable = psl_registrable_domain(psl, h.c_str());
  return registrable == h.c_str();
}

bool is_public_suffix(std::string_view host) {
  const psl_ctx_t* psl = psl_builtin();
  if (psl == nullptr || host.empty()) return false;
  std::string h(host);
  return psl_is_public_suffix2(psl, h.c_str(), PSL_TYPE_ANY | PSL_TYPE_NO_STAR_RULE) != 0;
}

Problem opaque_id(std::string_view in, size_t max_bytes) {
  if (in.empty()) return "must not be empty";
  if (in.size() > max_bytes) return "must be at most " + std::to_string(max_bytes) + " bytes";
  if (has_control(in)) return "must not contain control characters";
  return std::nullopt;
}

Problem redirect_to(std::string_view in, std::string* back_to) {
  if (back_to != nullptr) back_to->clear();
  if (in.empty()) return std::nullopt;
  if (in.size() > kMaxRedirectBytes) return "must be at most 2048 bytes";
  for (size_t i = 0; i < in.size(); ++i) {
    if (control_at(in, i) || in[i] == ' ' || in[i] == '\\') {
      return "must not contain spaces, backslashes or control characters";
    }
  }
  std::string normalized;
  if (in.find("://") == std::string_view::npos) {
    if (auto p = hostname(in, &normalized)) {
      return "must be a hostname or an http:// or https:// URL; as a hostname, it " + *p;
    }
    if (back_to != nullptr) *back_to = std::move(normalized);
    return std::nullopt;
  }
  auto after = after_http_scheme(in);
  if (!after) return "URLs must start with http:// or https://";
  std::string_view rest = *after;
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (authority.find('@') != std::string_view::npos) return "URLs must not contain userinfo";
  if (authority.starts_with('[')) return "URL hosts must be hostnames, not IP addresses";
  bool default_port = true;
  size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos) {
    std::string_view port = authority.substr(colon + 1);
    if (!is_port(port)) return "URL ports must be 1-65535";
    default_port = port == (in.starts_with("https://") ? "443" : "80");
    authority = authority.substr(0, colon);
  }
  if (auto p = hostname(authority, &normalized)) return "URL host " + *p;
  if (back_to != nullptr && default_port) *back_to = std::move(normalized);
  return std::nullopt;
}

}  // namespace gw::fields
