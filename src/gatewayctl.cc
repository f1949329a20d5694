// gatewayctl: administration from the command line. Wiring only.
//   gatewayctl token create --tokens-file FILE --tenant TEAM [--name NAME]
#include <iostream>
#include <string>

#include "core/flags.h"
#include "http/tokens.h"

namespace {

int usage() {
  std::cerr << "usage:\n"
               "  gatewayctl token create --tokens-file FILE --tenant TEAM [--name NAME]\n";
  return 2;
}

int token_create(int argc, char** argv) {
  gw::Flags flags({
      {"tokens-file", "GATEWAY_TOKENS_FILE", "", "tokens file to append the token's hash to"},
      {"tenant", "", "", "tenant (team id) the token is bound to"},
      {"name", "", "default", "token name, recorded as the actor of its changes"},
  });
  auto parsed = flags.parse(argc, argv, 3);
  if (!parsed.ok()) {
    std::cerr << "gatewayctl: " << parsed.error().detail << "\n" << flags.usage();
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.usage();
    return 0;
  }
  if (flags.get("tokens-file").empty() || flags.get("tenant").empty()) return usage();
  auto token = gw::http::create_token(flags.get("tokens-file"), flags.get("tenant"), flags.get("name"));
  if (!token.ok()) {
    std::cerr << "gatewayctl: " << token.error().detail;
    for (const auto& e : token.error().errors) std::cerr << "; " << e.field << " " << e.message;
    std::cerr << "\n";
    return 1;
  }
  std::cout << token.value() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "token" && std::string(argv[2]) == "create") {
    return token_create(argc, argv);
  }
  return usage();
}
