// The ceiling of scripts/bench.sh: the least an HTTP service on Pistache 0.0.5 can do per request,
// measured with the same wrk settings as gatewayd so each gatewayd figure can be given as a ratio
// to it.
//   GET  <any path>  200, a fixed 600-byte JSON body
//   POST <any path>  200, the body parsed with RapidJSON and written back (400 if it is not JSON)
// Like gatewayd it answers an HTTP/1.1 request that has no `Connection: close` with
// `Connection: keep-alive` (Pistache 0.0.5 would send `Connection: Close` and drop the
// connection, see /work/shared/PITFALLS.md), and serves with --threads worker threads (default:
// number of cores, gatewayd's default).
//
//   g++ -O2 -std=c++20 scripts/bench/ceiling.cc -o build-bench/ceiling
//       $(pkg-config --cflags --libs libpistache)      (one line; scripts/bench.sh does this)
//   build-bench/ceiling [--listen HOST:PORT] [--threads N]
//       prints: listening on http://HOST:PORT
#include <pistache/endpoint.h>
#include <pistache/http.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

namespace P = Pistache;

namespace {

// 600 bytes of JSON shaped like a gatewayd record.
std::string fixed_body() {
  std::string body =
      R"({"webhook_id":"whk_01JBENCHCEILING000000000000","team_id":"team_bench",)"
      R"("workload_id":"w-ceiling","provider":"github","status":"active","external_id":"",)"
      R"("created_at":1795212747,"updated_at":1795212747,"deleted_at":0,"padding":")";
  const std::string tail = R"("})";
  body.append(600 - body.size() - tail.size(), 'x');
  body += tail;
  return body;
}

class Handler final : public P::Http::Handler {
 public:
  HTTP_PROTOTYPE(Handler)

  void onRequest(const P::Http::Request& req, P::Http::ResponseWriter response) override {
    // The keep-alive fix: HTTP/1.1 is keep-alive unless the client says close. `add` alone does
    // not replace the header Pistache put there.
    bool close = req.version() != P::Http::Version::Http11;
    if (auto c = req.headers().tryGet<P::Http::Header::Connection>()) {
      close = c->control() == P::Http::ConnectionControl::Close;
    }
    auto& headers = response.headers();
    headers.remove("Connection");
    headers.add<P::Http::Header::Connection>(close ? P::Http::ConnectionControl::Close
                                                   : P::Http::ConnectionControl::KeepAlive);
    if (req.method() == P::Http::Method::Get) {
      static const std::string body = fixed_body();
      response.send(P::Http::Code::Ok, body, MIME(Application, Json));
      return;
    }
    if (req.method() == P::Http::Method::Post) {
      rapidjson::Document doc;
      doc.Parse(req.body().data(), req.body().size());
      if (doc.HasParseError() || !doc.IsObject()) {
        response.send(P::Http::Code::Bad_Request, R"({"code":"invalid_json"})",
                      MIME(Application, Json));
        return;
      }
      rapidjson::StringBuffer out;
      rapidjson::Writer<rapidjson::StringBuffer> writer(out);
      doc.Accept(writer);
      response.send(P::Http::Code::Ok, std::string(out.GetString(), out.GetSize()),
                    MIME(Application, Json));
      return;
    }
    response.send(P::Http::Code::Method_Not_Allowed, R"({"code":"method_not_allowed"})",
                  MIME(Application, Json));
  }
};

[[noreturn]] void usage() {
  std::cerr << "usage: ceiling [--listen HOST:PORT] [--threads N]\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0";
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--listen" && i + 1 < argc) {
      listen = argv[++i];
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
      if (threads < 1) usage();
    } else {
      usage();
    }
  }
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) usage();
  const std::string host = listen.substr(0, colon);
  const int port = std::atoi(listen.c_str() + colon + 1);

  // Block the stop signals in every thread Pistache starts; main waits for them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  P::Address addr(host, P::Port(static_cast<uint16_t>(port)));
  P::Http::Endpoint endpoint(addr);
  endpoint.init(P::Http::Endpoint::options().threads(threads).flags(P::Tcp::Options::ReuseAddr));
  endpoint.setHandler(P::Http::make_handler<Handler>());
  endpoint.serveThreaded();
  std::printf("listening on http://%s:%u\n", host.c_str(),
              static_cast<unsigned>(endpoint.getPort()));
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop, &sig);
  endpoint.shutdown();
  return 0;
}
