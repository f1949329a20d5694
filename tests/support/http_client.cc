#include "support/http_client.h"

#include <memory>
#include <mutex>
#include <stdexcept>

#include "support/process.h"

namespace gw::testing {
namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_ALL); });
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* headers = static_cast<Headers*>(user);
  std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    headers->clear();  // a new response (e.g. after an interim 1xx): keep only the final one
  } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    headers->emplace_back(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
  }
  return size * n;
}

// The pieces of a chunked body, and the next to send.
struct Chunks {
  const std::vector<std::string>* pieces;
  size_t next = 0;
};

// libcurl's read callback of a chunked body: the next piece (each a chunk), then nothing (the end).
size_t on_read_chunk(char* buffer, size_t size, size_t n, void* user) {
  auto* chunks = static_cast<Chunks*>(user);
  if (chunks->next == chunks->pieces->size()) return 0;
  const std::string& piece = (*chunks->pieces)[chunks->next];
  if (piece.size() > size * n) return CURL_READFUNC_ABORT;  // never, for a test's small pieces
  piece.copy(buffer, piece.size());
  ++chunks->next;
  return piece.size();
}

// libcurl's debug callback: what it sends (the head and the body, as written), kept.
int on_debug(CURL*, curl_infotype type, char* data, size_t size, void* user) {
  if (type == CURLINFO_HEADER_OUT || type == CURLINFO_DATA_OUT) {
    static_cast<std::string*>(user)->append(data, size);
  }
  return 0;
}

bool has_header(const Headers& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return true;
  }
  return false;
}

struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::optional<std::string> Response::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return std::nullopt;
}

std::vector<std::string> Response::header_values(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) out.push_back(v);
  }
  return out;
}

HttpClient::HttpClient(std::chrono::milliseconds timeout) : curl_(nullptr), timeout_(timeout) {
  global_init();
  curl_ = curl_easy_init();
  if (curl_ == nullptr) throw std::runtime_error("curl_easy_init failed");
}

HttpClient::~HttpClient() { curl_easy_cleanup(curl_); }

Response HttpClient::request(std::string_view method, const std::string& url,
                             const Headers& headers, const std::optional<std::string>& body,
                             const std::optional<std::string>& target) {
  return perform(method, url, headers, body, target, nullptr);
}

Response HttpClient::request_chunked(std::string_view method, const std::string& url,
                                     const Headers& headers,
                                     const std::vector<std::string>& chunks) {
  Headers with = headers;
  with.emplace_back("Transfer-Encoding", "chunked");
  return perform(method, url, with, std::nullopt, std::nullopt, &chunks);
}

Response HttpClient::perform(std::string_view method, const std::string& url,
                             const Headers& headers, const std::optional<std::string>& body,
                             const std::optional<std::string>& target,
                             const std::vector<std::string>* chunks) {
  curl_easy_reset(curl_);  // options only: live connections are kept
  Response r;
  std::string method_str(method);
  std::unique_ptr<curl_slist, SlistDeleter> list;
  auto add = [&](const std::string& line) {
    curl_slist* next = curl_slist_append(list.get(), line.c_str());
    if (next == nullptr) throw std::runtime_error("curl_slist_append failed");
    static_cast<void>(list.release());
    list.reset(next);
  };
  for (const auto& [k, v] : headers) add(v.empty() ? k + ";" : k + ": " + v);
  add("Expect:");
  if (!has_header(headers, "Accept")) add("Accept:");
  if ((body || chunks) && !has_header(headers, "Content-Type")) add("Content-Type:");

  curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
  if (target) curl_easy_setopt(curl_, CURLOPT_REQUEST_TARGET, target->c_str());
  curl_easy_setopt(curl_, CURLOPT_PROXY, "");
  curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_.count()));
  curl_easy_setopt(curl_, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, list.get());
  curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(curl_, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl_, CURLOPT_HEADERDATA, &r.headers);
  if (method == "HEAD") {
    curl_easy_setopt(curl_, CURLOPT_NOBODY, 1L);
  } else if (method != "GET" || body || chunks) {
    curl_easy_setopt(curl_, CURLOPT_CUSTOMREQUEST, method_str.c_str());
  }
  if (body) {
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body->data());
  }
  Chunks pieces{chunks};
  if (chunks) {
    // A POST of no given size, its body from the read callback: libcurl sends it chunked.
    curl_easy_setopt(curl_, CURLOPT_POST, 1L);
    curl_easy_setopt(curl_, CURLOPT_READFUNCTION, on_read_chunk);
    curl_easy_setopt(curl_, CURLOPT_READDATA, &pieces);
    curl_easy_setopt(curl_, CURLOPT_VERBOSE, 1L);
    curl_easy_setopt(curl_, CURLOPT_DEBUGFUNCTION, on_debug);
    curl_easy_setopt(curl_, CURLOPT_DEBUGDATA, &r.sent);
  }

  CURLcode rc = curl_easy_perform(curl_);
  curl_easy_getinfo(curl_, CURLINFO_NUM_CONNECTS, &r.new_connections);
  if (rc != CURLE_OK) {
    r.error = curl_easy_strerror(rc);
    r.status = 0;
    return r;
  }
  curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &r.status);
  return r;
}

std::string url_escape(std::string_view s) {
  global_init();
  char* e = curl_easy_escape(nullptr, s.data(), static_cast<int>(s.size()));
  if (e == nullptr) throw std::runtime_error("curl_easy_escape failed");
  std::string out(e);
  curl_free(e);
  return out;
}

}  // namespace gw::testing
